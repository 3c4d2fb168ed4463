/* The C API in a dozen lines: load a model, greedy-generate from a prompt, print the text.
 *   cc generate.c $(pkg-config --cflags --libs oxinfer) -o generate
 *   ./generate MODEL.gguf "Hello" 16 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oxinfer.h>

static int on_token(const oxi_token_event* ev, void* user) {
  (void)user;
  fwrite(ev->text, 1, ev->text_len, stdout);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [N]\n", argv[0]);
    return 2;
  }
  oxi_model* model = NULL;
  oxi_context* ctx = NULL;
  if (oxi_model_open(argv[1], NULL, &model) != OXI_OK || oxi_context_new(model, 2048, &ctx) != OXI_OK) {
    fprintf(stderr, "error: %s\n", oxi_last_error());
    oxi_model_free(model);
    return 1;
  }
  int32_t ids[1024];
  size_t n = 0;
  if (oxi_tokenize(model, argv[2], strlen(argv[2]), 1, 0, ids, 1024, &n) != OXI_OK || n > 1024) {
    fprintf(stderr, "error: %s\n", n > 1024 ? "prompt too long" : oxi_last_error());
    return 1;
  }
  oxi_generate_params p = oxi_generate_default_params();
  p.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
  oxi_status st = oxi_generate(ctx, ids, n, &p, on_token, NULL, NULL);
  printf("\n");
  if (st != OXI_OK) fprintf(stderr, "error: %s\n", oxi_last_error());
  oxi_context_free(ctx);
  oxi_model_free(model);
  return st == OXI_OK ? 0 : 1;
}
