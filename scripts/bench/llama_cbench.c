// llama.cpp (the libllama that node-llama-cpp ships) measured without node in the process, the
// way `oxinfer bench` measures oxinfer, so that load time and peak RSS compare like for like:
//   load_ms        wall time of llama_model_load_from_file (backends already registered; mmap on,
//                  as node-llama-cpp and llama-bench use it)
//   vocab_load_ms  wall time of a second, vocab_only load after the runs (the tokenizer part of
//                  load_ms, which oxinfer bench's load_ms does not include)
//   ctx_ms         wall time of llama_init_from_model (KV cache, compute buffers)
//   peak_rss_bytes VmHWM of this process after all tests (model + context + the runs)
//   cold_first_ms  with COLD_N > 0: the first work after llama_init_from_model, before any warm-up:
//                  COLD_N pseudo-random ids (seed 99) in one llama_decode, then one decode of the
//                  argmax — with load_ms and ctx_ms, the cold start to the first token that
//                  `oxinfer bench --cold-start` measures on its side
// and the same tests as `oxinfer bench`, same token ids (same 64-bit LCG and seeds):
//   ppN  N pseudo-random ids in one llama_decode (batch = ubatch = 512, logits of the last token)
//   tgN  N single-token decodes from an empty cache, each fed the argmax of the previous logits
// one warm-up each (pp: the full N, tg: 8 tokens), then R timed runs, cache cleared before each.
//
//   llama_cbench MODEL THREADS PP TG REPS [FLASH_ATTN -1|0|1] [COLD_N]   -> one JSON object on stdout
//
// Built by scripts/bench.sh against llama.h/ggml headers from node-llama-cpp's bundled llama.cpp
// source (node_modules/node-llama-cpp/llama/gitRelease.bundle) and linked to its prebuilt
// libllama/libggml (bins/linux-x64), so the headers match the binary.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static long long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, k) == 0) { v = atoll(line + k); break; }
    }
    fclose(f);
    return v;
}

static void token_ids(llama_token *out, int n, int n_vocab, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = (llama_token)((x >> 33) % (uint64_t)n_vocab);
    }
}

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

static char *g_log;  // llama.cpp's log, kept to name the CPU backend variant and report errors
static size_t g_log_len, g_log_cap;
static void log_cb(enum ggml_log_level level, const char *text, void *ud) {
    (void)level; (void)ud;
    const size_t n = strlen(text);
    if (g_log_len + n + 1 > g_log_cap) {
        g_log_cap = (g_log_len + n + 1) * 2;
        g_log = realloc(g_log, g_log_cap);
    }
    memcpy(g_log + g_log_len, text, n + 1);
    g_log_len += n;
}

static void json_str(const char *s) {  // a JSON string literal (quotes, backslashes, controls escaped)
    putchar('"');
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void die(const char *what) {
    fprintf(stderr, "llama_cbench: %s\n%s", what, g_log ? g_log : "");
    printf("{\"ok\": false, \"error\": "); json_str(what); printf("}\n");
    exit(1);
}

static double run_pp(struct llama_context *ctx, llama_token *ids, int n) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const double t0 = now_ms();
    for (int i = 0; i < n; i += 512) {
        const int len = n - i < 512 ? n - i : 512;
        if (llama_decode(ctx, llama_batch_get_one(ids + i, len)) != 0) die("llama_decode (pp) failed");
    }
    return now_ms() - t0;
}

static double run_tg(struct llama_context *ctx, int n, int n_vocab) {
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_token tok;
    token_ids(&tok, 1, n_vocab, 7);
    const double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) die("llama_decode (tg) failed");
        tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }
    return now_ms() - t0;
}

static void print_runs(const char *name, int n, const double *ms, int reps) {
    printf("  \"%s\": {\"n\": %d, \"runs_ms\": [", name, n);
    for (int r = 0; r < reps; r++) printf("%s%.2f", r ? ", " : "", ms[r]);
    printf("], \"samples_ts\": [");
    for (int r = 0; r < reps; r++) printf("%s%.3f", r ? ", " : "", n / (ms[r] / 1e3));
    printf("]},\n");
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: llama_cbench MODEL THREADS PP TG REPS [FLASH_ATTN -1|0|1] [COLD_N]\n");
        return 2;
    }
    const char *path = argv[1];
    const int threads = atoi(argv[2]), pp = atoi(argv[3]), tg = atoi(argv[4]), reps = atoi(argv[5]);
    const int fa = argc > 6 ? atoi(argv[6]) : -1;
    const int cold = argc > 7 ? atoi(argv[7]) : 0;
    if (threads < 1 || pp < 0 || tg < 0 || reps < 1 || reps > 1000 || (pp == 0 && tg == 0) || cold < 0 || cold > 512) {
        fprintf(stderr, "llama_cbench: bad arguments\n");
        return 2;
    }
    const long long rss_start_kib = status_kib("VmRSS:");
    llama_log_set(log_cb, NULL);
    const char *bins = getenv("NLC_BIN_DIR");
    if (bins) ggml_backend_load_all_from_path(bins); else ggml_backend_load_all();
    llama_backend_init();
    const long long rss_libs_kib = status_kib("VmRSS:");

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;  // as node-llama-cpp resolves it on CPU (useMmap "auto")
    mp.lazy_mode = LLAMA_LAZY_MODE_OFF;   // node-llama-cpp's default
    double t0 = now_ms();
    struct llama_model *model = llama_model_load_from_file(path, mp);
    const double load_ms = now_ms() - t0;
    if (!model) die("llama_model_load_from_file failed");
    const long long rss_model_kib = status_kib("VmRSS:");

    int n_ctx_need = (pp > tg ? pp : tg) + 1;
    if (cold + 2 > n_ctx_need) n_ctx_need = cold + 2;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)((n_ctx_need + 255) / 256 * 256);
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = (enum llama_flash_attn_type)fa;
    cp.no_perf = true;
    cp.swa_full = false;    // node-llama-cpp's context defaults
    cp.kv_unified = false;
    t0 = now_ms();
    struct llama_context *ctx = llama_init_from_model(model, cp);
    const double ctx_ms = now_ms() - t0;
    if (!ctx) die("llama_init_from_model failed");
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    double cold_first_ms = 0;
    if (cold > 0) {
        llama_token *cids = malloc(sizeof(llama_token) * (size_t)cold);
        token_ids(cids, cold, n_vocab, 99);
        t0 = now_ms();
        if (llama_decode(ctx, llama_batch_get_one(cids, cold)) != 0) die("llama_decode (cold prompt) failed");
        llama_token next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0) die("llama_decode (cold token) failed");
        (void)llama_get_logits_ith(ctx, -1);
        cold_first_ms = now_ms() - t0;
        free(cids);
    }

    llama_token *ids = malloc(sizeof(llama_token) * (size_t)(pp > 0 ? pp : 1));
    token_ids(ids, pp, n_vocab, 42);
    double *pp_ms = calloc((size_t)reps, sizeof(double)), *tg_ms = calloc((size_t)reps, sizeof(double));
    if (pp > 0) {
        run_pp(ctx, ids, pp);
        for (int r = 0; r < reps; r++) pp_ms[r] = run_pp(ctx, ids, pp);
    }
    if (tg > 0) {
        run_tg(ctx, tg < 8 ? tg : 8, n_vocab);
        for (int r = 0; r < reps; r++) tg_ms[r] = run_tg(ctx, tg, n_vocab);
    }
    const long long hwm_kib = status_kib("VmHWM:");

    // the vocabulary part of the load: llama.cpp always builds its tokenizer while loading, oxinfer
    // bench's load_ms has none; measured after everything else so that one-time set-up stays in load_ms
    struct llama_model_params vp = mp;
    vp.vocab_only = true;
    t0 = now_ms();
    struct llama_model *vocab_model = llama_model_load_from_file(path, vp);
    const double vocab_load_ms = now_ms() - t0;
    if (!vocab_model) die("llama_model_load_from_file (vocab_only) failed");
    llama_model_free(vocab_model);

    char model_desc[256];
    llama_model_desc(model, model_desc, sizeof model_desc);
    const char *cpu_variant = "";
    char variant[64] = "";
    if (g_log) {  // "load_backend: loaded CPU backend from .../libggml-cpu-VARIANT.so"
        const char *p = strstr(g_log, "libggml-cpu-");
        if (p) {
            p += strlen("libggml-cpu-");
            size_t i = 0;
            while (p[i] && p[i] != '.' && i + 1 < sizeof variant) { variant[i] = p[i]; i++; }
            variant[i] = 0;
            cpu_variant = variant;
        }
    }
    printf("{\n  \"tool\": \"llama_cbench\",\n  \"ok\": true,\n  \"model\": ");
    json_str(path);
    printf(",\n  \"model_desc\": ");
    json_str(model_desc);
    printf(",\n  \"system_info\": ");
    json_str(llama_print_system_info());
    printf(",\n  \"cpu_backend\": ");
    json_str(cpu_variant);
    printf(",\n");
    printf("  \"threads\": %d,\n  \"n_ctx\": %u,\n  \"n_batch\": %u,\n  \"reps\": %d,\n", threads, llama_n_ctx(ctx),
           llama_n_batch(ctx), reps);
    printf("  \"load_ms\": %.2f,\n  \"vocab_load_ms\": %.2f,\n  \"ctx_ms\": %.2f,\n", load_ms, vocab_load_ms, ctx_ms);
    if (cold > 0) {
        printf("  \"cold_prompt\": %d,\n  \"cold_first_ms\": %.2f,\n  \"cold_first_token_ms\": %.2f,\n", cold, cold_first_ms,
               load_ms + ctx_ms + cold_first_ms);
    }
    printf("  \"rss_start_bytes\": %lld,\n  \"rss_after_libs_bytes\": %lld,\n  \"rss_after_load_bytes\": %lld,\n",
           rss_start_kib * 1024, rss_libs_kib * 1024, rss_model_kib * 1024);
    if (pp > 0) print_runs("pp", pp, pp_ms, reps);
    if (tg > 0) print_runs("tg", tg, tg_ms, reps);
    printf("  \"peak_rss_bytes\": %lld\n}\n", hwm_kib * 1024);
    llama_free(ctx);
    llama_model_free(model);
    free(ids); free(pp_ms); free(tg_ms); free(g_log);
    return 0;
}
