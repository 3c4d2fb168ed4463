#!/usr/bin/env bash
# Images through `oxinfer serve` (Qwen 3.5 + mmproj) against llama.cpp's llama-mtmd-cli, on the
# synthetic model mtmd_oracle uses (oxi-gen --vision, converted by us with --mmproj). Prepares the
# model, the images (Pillow) and llama-mtmd-cli's greedy answers here; lib/images_client.mjs then
# asks the server with the real `openai` client (and the Anthropic / ollama shapes) and compares:
#   1. one image, two images, the same new image three times (encoded once), the image as a file:// URL under --media-dir, the HF checkpoint's
#      own tower: text identical to llama-mtmd-cli's for the same image and prompt (temperature 0);
#   2. a second turn about the same image: identical to llama-mtmd-cli on that two-turn prompt
#      (rendered from the model's template by @huggingface/jinja), and the image not encoded again;
#   2b. the same model through the C API (oxi_context_prefill_image), two images; and with
#      oxi_model_params.image_preproc "llama", 2c's image: llama-mtmd-cli's text and 30 rows;
#   2c. `serve --image-preproc llama` on an image the two resizes treat differently: llama-mtmd-cli's
#      text and row count (the default server: HF's rows, more of them);
#   3. bad input → 4xx naming the reason, the server still answering: bad base64, no image,
#      a corrupt PNG, a 20000 × 20000 PNG header, http(s) and refused file:// URLs, more image
#      rows than the context, an image for a server without a tower.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
export OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/server_images"
PY=/usr/bin/python3
TEMPLATE="$SHARED/testdata/templates/Qwen3.5-4B.jinja"
rm -rf "$WORK" && mkdir -p "$WORK/media"

. "$SRC/tests/e2e/lib/vision_setup.sh"  # skips, $MTMD, t0, the model pair m.gguf + mmproj.gguf

# ---- images (Pillow): sizes both preprocessings leave alone (multiples of 32, ≥ 64 tokens) ----
$PY - "$WORK" <<'PYEOF'
import random, struct, sys, zlib
from PIL import Image
d = sys.argv[1]
random.seed(5)
def img(w, h, k):
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * k + y * 3) % 256, (x * y * k) % 256, random.randrange(256))
    return im
img(256, 256, 7).save(d + "/media/square.png")
img(320, 256, 5).save(d + "/wide.png")
img(288, 256, 11).save(d + "/third.png")
img(1024, 1024, 3).save(d + "/big.png")
# A size the two preprocessings resize differently (HF: stretched up to 320 × 224 = 70 rows;
# llama.cpp's mtmd: 192 × 160 with padding = 30 rows): --image-preproc llama's case.
img(200, 150, 9).save(d + "/odd.png")   # 1024 rows: more than a 1024-entry context holds
open(d + "/outside.png", "wb").write(open(d + "/media/square.png", "rb").read())
png = open(d + "/media/square.png", "rb").read()
open(d + "/corrupt.png", "wb").write(png[:len(png) // 2])
# A decompression bomb's header: 20000 × 20000 RGB, valid CRCs, a few bytes of data.
def chunk(t, b): return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)) + \
       chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b"")
open(d + "/bomb.png", "wb").write(bomb)
PYEOF
ln -s "$WORK/outside.png" "$WORK/media/link.png"   # a symlink out of --media-dir: refused

# ---- prompts as the model's template renders them (@huggingface/jinja, not ours), for
# llama-mtmd-cli through a pass-through template: a second turn, and one turn with thinking off
# (the Anthropic dialect's default) ----
render() {  # out-file, messages JSON, extra template variables JSON
  node --input-type=module - "$TEMPLATE" "$2" "$3" > "$1" <<'JSEOF'
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
const require = createRequire(path.join(process.env.NLC_DIR, "package.json"));
const { Template } = require("@huggingface/jinja");
const [tmpl, msgs, extra] = process.argv.slice(2);
let s = new Template(fs.readFileSync(tmpl, "utf8")).render({ messages: JSON.parse(msgs), add_generation_prompt: true, ...JSON.parse(extra) });
// llama-mtmd-cli places an image at its marker and adds <|vision_start|>/<|vision_end|> itself.
s = s.replace("<|vision_start|><|image_pad|><|vision_end|>", "<__media__>");
if (s.split("<__media__>").length !== 2) throw new Error("expected one image placeholder: " + s);
process.stdout.write(s);
JSEOF
  [ -s "$1" ] || { echo "FAIL - rendering a prompt with @huggingface/jinja"; exit 1; }
}
USER1='{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "Describe this picture."}]}'
render "$WORK/turn2.txt" "[$USER1, {\"role\": \"assistant\", \"content\": \"It is a picture.\"}, {\"role\": \"user\", \"content\": \"Say more.\"}]" '{}'
render "$WORK/nothink.txt" "[$USER1]" '{"enable_thinking": false}'
PASSTHROUGH="{{ messages[0]['content'] }}"  # the prompt as given (--jinja before --chat-template)

# ---- llama-mtmd-cli's greedy answers (24 tokens) ----
ref() {  # name, llama-mtmd-cli arguments...
  local name=$1; shift
  MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "$@" \
    -n 24 --temp 0 -t 2 -c 4096 -fa off --jinja > "$WORK/ref_$name.out" 2> "$WORK/ref_$name.err" ||
    { tail -5 "$WORK/ref_$name.err"; echo "FAIL - llama-mtmd-cli ($name)"; exit 1; }
}
ref one --image "$WORK/media/square.png" -p "Describe this picture."
ref wide --image "$WORK/wide.png" -p "Describe this picture."
ref three --image "$WORK/third.png" --image "$WORK/third.png" --image "$WORK/third.png" -p "Compare the images."
ref two --image "$WORK/media/square.png" --image "$WORK/wide.png" -p "Compare the two images."
ref odd --image "$WORK/odd.png" -p "Describe this picture."
# The prompts with their trailing newline ($(cat) alone would drop it).
TURN2="$(cat "$WORK/turn2.txt"; printf x)"; TURN2="${TURN2%x}"
NOTHINK="$(cat "$WORK/nothink.txt"; printf x)"; NOTHINK="${NOTHINK%x}"
ref turn2 --image "$WORK/media/square.png" -p "$TURN2" --jinja --chat-template "$PASSTHROUGH"
ref nothink --image "$WORK/media/square.png" -p "$NOTHINK" --jinja --chat-template "$PASSTHROUGH"

OXI_IMG_WORK="$WORK" OXI_IMG_MODEL="$WORK/m.gguf" OXI_IMG_MMPROJ="$WORK/mmproj.gguf" node "$SRC/tests/e2e/lib/images_client.mjs"
rc=$?
# The C API (oxi_context_prefill_image via python/oxinfer.py, mRoPE positions after each image):
# llama-mtmd-cli's text for two images.
if OXINFER_LIB="$(dirname "$OXINFER")/../../src/api/liboxinfer.so" PYTHONPATH="$SRC/python" \
   $PY "$SRC/tests/e2e/lib/c_api_images.py" "$WORK/m.gguf" "$WORK/mmproj.gguf" "$WORK/ref_two.out" "Compare the two images." \
   "$WORK/media/square.png" "$WORK/wide.png" > "$WORK/capi.out" 2>&1
then echo "ok   C API images (oxi_context_prefill_image): greedy text identical to llama-mtmd-cli's"
else cat "$WORK/capi.out"; echo "FAIL C API images differ from llama-mtmd-cli"; rc=1; fi
# image_preproc "llama": the 200 × 150 image as llama.cpp's mtmd resizes it (30 rows + start/end).
if OXINFER_LIB="$(dirname "$OXINFER")/../../src/api/liboxinfer.so" PYTHONPATH="$SRC/python" \
   OXI_CAPI_PREPROC=llama OXI_CAPI_ENTRIES=32 \
   $PY "$SRC/tests/e2e/lib/c_api_images.py" "$WORK/m.gguf" "$WORK/mmproj.gguf" "$WORK/ref_odd.out" "Describe this picture." \
   "$WORK/odd.png" > "$WORK/capi_odd.out" 2>&1
then echo "ok   C API image_preproc llama: llama-mtmd-cli's text and 30 rows for a 200 × 150 image"
else cat "$WORK/capi_odd.out"; echo "FAIL C API image_preproc llama differs from llama-mtmd-cli"; rc=1; fi
echo "# server_images: $(( $(date +%s) - t0 )) s"
exit $rc
