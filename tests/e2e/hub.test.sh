#!/usr/bin/env bash
# End-to-end tests of `oxinfer pull` / -hf against a local stand-in for the Hugging Face Hub
# (tests/hub/fake_hub.py on 127.0.0.1, random port, stops by itself). No internet needed.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/hub"
rm -rf "$WORK" && mkdir -p "$WORK"
REPOS="$WORK/repos"
export HF_HUB_CACHE="$WORK/cache"
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE HF_HOME HF_HUB_DISABLE_PROGRESS_BARS OXI_HUB_ATTEMPTS
export HF_TOKEN_PATH="$WORK/no-token"
FAKE="python3 $SRC/tests/hub/fake_hub.py"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

rnd() { python3 -c "import os,sys; sys.stdout.buffer.write(os.urandom($2))" > "$1"; }
mk() { mkdir -p "$(dirname "$1")"; rnd "$1" "$2"; }

# ---- synthetic repos ----
R=$REPOS/test/tiny-hf
mkdir -p $R/onnx $R/images
echo '{"architectures":["Qwen3ForCausalLM"]}' > $R/config.json
echo '{"model":{}}' > $R/tokenizer.json
echo '{}' > $R/tokenizer_config.json
echo '{"do_sample":true}' > $R/generation_config.json
echo '{% for m in messages %}{{ m.content }}{% endfor %}' > $R/chat_template.jinja
echo '{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}' > $R/model.safetensors.index.json
mk $R/model-00001-of-00002.safetensors 300000
mk $R/model-00002-of-00002.safetensors 200000
mk $R/pytorch_model.bin 1000; mk $R/onnx/model.onnx 1000; mk $R/images/a.png 100; echo hi > $R/README.md
echo '{"tree_page": 3, "revisions": {"v1": "1111111111111111111111111111111111111111"}}' > $REPOS/test/tiny-hf.json

R=$REPOS/test/tiny-GGUF
mk $R/tiny-Q4_K_M.gguf 150000; mk $R/tiny-Q8_0.gguf 1000; mk $R/tiny-F16.gguf 1000; mk $R/mmproj-tiny-F16.gguf 500
echo hi > $R/README.md

R=$REPOS/test/split-GGUF
for i in 1 2 3; do mk $R/Q4_K_M/split-Q4_K_M-0000$i-of-00003.gguf $((50000 + i)); done
mk $R/split-Q8_0.gguf 1000

R=$REPOS/test/gated; mk $R/g-Q4_K_M.gguf 2000
echo '{"gated_token": "s3cret"}' > $REPOS/test/gated.json

R=$REPOS/test/flaky; mk $R/f-Q4_K_M.gguf 400000
echo '{"drop": {"f-Q4_K_M.gguf": "once"}}' > $REPOS/test/flaky.json
R=$REPOS/test/flaky2; mk $R/f-Q4_K_M.gguf 400000
echo '{"drop": {"f-Q4_K_M.gguf": "always"}}' > $REPOS/test/flaky2.json
R=$REPOS/test/corrupt; mk $R/c-Q4_K_M.gguf 5000
echo '{"corrupt": ["c-Q4_K_M.gguf"]}' > $REPOS/test/corrupt.json
R=$REPOS/test/huge; mk $R/h-Q4_K_M.gguf 1000
echo '{"fake_size": {"h-Q4_K_M.gguf": 1125899906842624}}' > $REPOS/test/huge.json
R=$REPOS/test/notree; mk $R/n-Q4_K_M.gguf 3000; echo '{"a":1}' > $R/n.json
echo '{"no_tree": true}' > $REPOS/test/notree.json
R=$REPOS/test/slow; mk $R/s-Q4_K_M.gguf 200000
echo '{"slow": {"s-Q4_K_M.gguf": 200000}}' > $REPOS/test/slow.json
R=$REPOS/test/big; mk $R/b-Q4_K_M.gguf 300000
for i in 1 2 3 4 5 6; do mkdir -p $REPOS/bad/b$i; mk $REPOS/bad/b$i/x-Q4_K_M.gguf 100; done
echo '{"revision_body": "not json {"}' > $REPOS/bad/b1.json
echo '{"revision_body": "{\"sha\": 5, \"siblings\": 7}"}' > $REPOS/bad/b2.json
echo '{"revision_body": "{\"sha\": \"../../etc\", \"siblings\": [{\"rfilename\": \"../x-Q4_K_M.gguf\"}]}"}' > $REPOS/bad/b3.json
echo '{"tree_body": "[{\"type\": 1, \"path\": []}, 5, {\"type\": \"file\", \"path\": \"x-Q4_K_M.gguf\", \"oid\": \"../../x\", \"size\": \"big\"}]"}' > $REPOS/bad/b4.json
echo '{"tree_body": "[{\"type\": \"file\", \"path\": \"x-Q4_K_M.gguf\", \"lfs\": {\"oid\": \"zz\", \"size\": -3}}]"}' > $REPOS/bad/b5.json
echo '{"fake_size": {"x-Q4_K_M.gguf": 9223372036854775807}}' > $REPOS/bad/b6.json
R=$REPOS/other/made; mk $R/made-Q4_K_M.gguf 4000

VOCAB="${OXI_SHARED_DIR:-$SRC/../shared}/testdata/tokenizer/ggml-vocab-qwen35.gguf"
if [ -f "$VOCAB" ]; then mkdir -p $REPOS/test/vocab-GGUF && cp "$VOCAB" $REPOS/test/vocab-GGUF/vocab-Q8_0.gguf; fi

# ---- server ----
$FAKE serve "$REPOS" --idle 120 --max-requests 3000 > "$WORK/server.out" 2> "$WORK/server.err" &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null' EXIT
for _ in $(seq 200); do grep -q PORT "$WORK/server.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/PORT/{print $2}' "$WORK/server.out")
[ -n "$PORT" ] || { echo "FAIL - fake hub did not start"; cat "$WORK/server.err"; exit 1; }
export HF_ENDPOINT="http://127.0.0.1:$PORT"
stat_of() { $FAKE get "$PORT" __stats | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', 0))"; }
reset() { $FAKE get "$PORT" __reset > /dev/null; }

pull() { "$OXINFER" pull "$@" > "$WORK/out" 2> "$WORK/err"; echo $? > "$WORK/rc"; }
rc() { cat "$WORK/rc"; }
out() { cat "$WORK/out"; }
err_has() { grep -q -- "$1" "$WORK/err"; }

# 1. fresh download of an HF checkpoint
pull test/tiny-hf
SHA_HF=$(python3 -c "import hashlib; print(hashlib.sha1(b'test/tiny-hf').hexdigest())")
SNAP="$HF_HUB_CACHE/models--test--tiny-hf/snapshots/$SHA_HF"
check "hf: pull succeeds" '[ "$(rc)" = 0 ]'
check "hf: prints the snapshot dir" '[ "$(out)" = "$SNAP" ]'
check "hf: refs/main holds the commit" '[ "$(cat $HF_HUB_CACHE/models--test--tiny-hf/refs/main)" = "$SHA_HF" ]'
allsame=1
for f in config.json tokenizer.json tokenizer_config.json generation_config.json chat_template.jinja \
         model.safetensors.index.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors; do
  cmp -s "$SNAP/$f" "$REPOS/test/tiny-hf/$f" || { allsame=0; echo "  differs: $f"; }
  case "$(readlink "$SNAP/$f")" in ../../blobs/*) ;; *) allsame=0; echo "  not a relative link: $f";; esac
done
check "hf: files identical, relative links into blobs/" '[ $allsame = 1 ]'
check "hf: skips README, *.bin, onnx/, images/" '[ ! -e $SNAP/README.md -a ! -e $SNAP/pytorch_model.bin -a ! -e $SNAP/onnx -a ! -e $SNAP/images ]'
check "hf: blob named by sha256 for LFS files" '[ -f $HF_HUB_CACHE/models--test--tiny-hf/blobs/$(sha256sum $REPOS/test/tiny-hf/model-00001-of-00002.safetensors | cut -c1-64) ]'
check "hf: blob named by git oid for small files" '[ -f $HF_HUB_CACHE/models--test--tiny-hf/blobs/$(git hash-object $REPOS/test/tiny-hf/config.json) ]'
check "hf: plain progress lines off a terminal" 'err_has "downloaded model-00001-of-00002.safetensors"'
check "hf: no .incomplete left" '[ -z "$(find $HF_HUB_CACHE -name "*.incomplete")" ]'

# 2. second run: cache reused, no file transfer
reset
pull test/tiny-hf
check "hf again: same path" '[ "$(rc)" = 0 -a "$(out)" = "$SNAP" ]'
check "hf again: no /resolve/ request" '[ "$(stat_of resolve)" = 0 ]'

reset
pull test/tiny-hf@$SHA_HF
check "pinned commit, cached: no request at all" '[ "$(rc)" = 0 -a "$(out)" = "$SNAP" -a "$(stat_of api)" = 0 ]'

# 3. -hf through another subcommand's resolver: same code path (pull -hf)
pull -hf test/tiny-hf --quiet
check "pull -hf form" '[ "$(rc)" = 0 -a "$(out)" = "$SNAP" ]'

# 4. revision pinning
pull test/tiny-hf@v1 --quiet
check "revision v1: refs/v1 written" '[ "$(rc)" = 0 -a "$(cat $HF_HUB_CACHE/models--test--tiny-hf/refs/v1)" = 1111111111111111111111111111111111111111 ]'
pull test/tiny-hf@nope
check "unknown revision: clear error" '[ "$(rc)" = 1 ] && err_has "revision .nope. not found in test/tiny-hf"'
pull test/does-not-exist
check "unknown repo: clear error" '[ "$(rc)" = 1 ] && err_has "repository test/does-not-exist not found"'

# 5. GGUF: default Q4_K_M, case-insensitive quant, other quants skipped
G="$HF_HUB_CACHE/models--test--tiny-GGUF/snapshots/$(python3 -c "import hashlib; print(hashlib.sha1(b'test/tiny-GGUF').hexdigest())")"
pull test/tiny-GGUF
check "gguf: default quant Q4_K_M" '[ "$(rc)" = 0 -a "$(out)" = "$G/tiny-Q4_K_M.gguf" ] && cmp -s "$(out)" $REPOS/test/tiny-GGUF/tiny-Q4_K_M.gguf'
check "gguf: other quants not fetched" '[ ! -e $G/tiny-Q8_0.gguf -a ! -e $G/mmproj-tiny-F16.gguf -a ! -e $G/README.md ]'
pull test/tiny-GGUF:q8_0
check "gguf: :q8_0 (any case)" '[ "$(rc)" = 0 -a "$(out)" = "$G/tiny-Q8_0.gguf" ]'
pull test/tiny-GGUF:Q5_K_S
check "gguf: missing quant lists the available ones" '[ "$(rc)" = 1 ] && err_has "available: F16, Q4_K_M, Q8_0"'

# 6. split GGUF: all parts
pull test/split-GGUF:Q4_K_M
S="$HF_HUB_CACHE/models--test--split-GGUF/snapshots/$(python3 -c "import hashlib; print(hashlib.sha1(b'test/split-GGUF').hexdigest())")"
check "split: returns part 1" '[ "$(rc)" = 0 -a "$(out)" = "$S/Q4_K_M/split-Q4_K_M-00001-of-00003.gguf" ]'
allparts=1
for i in 1 2 3; do cmp -s $S/Q4_K_M/split-Q4_K_M-0000$i-of-00003.gguf $REPOS/test/split-GGUF/Q4_K_M/split-Q4_K_M-0000$i-of-00003.gguf || allparts=0; done
check "split: all 3 parts, identical" '[ $allparts = 1 ]'
check "split: link in a subfolder is ../../../blobs/" '[[ "$(readlink $S/Q4_K_M/split-Q4_K_M-00002-of-00003.gguf)" == ../../../blobs/* ]]'

# 7. gated repo
pull test/gated
check "gated, no token: 401 and how to pass one" '[ "$(rc)" = 1 ] && err_has "gated" && err_has "--hf-token" && err_has "HF_TOKEN"'
pull test/gated --hf-token wrong
check "gated, wrong token: no access" '[ "$(rc)" = 1 ] && err_has "no access"'
HF_TOKEN=s3cret pull test/gated
check "gated, HF_TOKEN: ok" '[ "$(rc)" = 0 ] && [ -f "$(out)" ]'
rm -rf "$HF_HUB_CACHE/models--test--gated"
pull test/gated --hf-token s3cret
check "gated, --hf-token: ok" '[ "$(rc)" = 0 ] && [ -f "$(out)" ]'

# 8. resume: the connection drops half-way once → resumed in the same run with Range
reset
pull test/flaky
check "flaky: resumed and verified" '[ "$(rc)" = 0 ] && cmp -s "$(out)" $REPOS/test/flaky/f-Q4_K_M.gguf'
check "flaky: a Range request was made" '[ "$(stat_of range:f-Q4_K_M.gguf)" -ge 1 ]'
check "flaky: bytes served ~ 1x the file, not 1.5x" '[ "$(stat_of bytes:f-Q4_K_M.gguf)" = 400000 ]'

# 9. network failure mid-file: partial kept, resumed by the next run
reset
OXI_HUB_ATTEMPTS=1 pull test/flaky2
INC=$(find "$HF_HUB_CACHE/models--test--flaky2" -name "*.incomplete" 2>/dev/null | head -1)
check "drop: clear error, partial kept" '[ "$(rc)" = 1 ] && err_has "interrupted" && [ -n "$INC" ] && [ "$(stat -c %s "$INC")" = 200000 ]'
check "drop: no snapshot entry, no blob" '[ -z "$(find $HF_HUB_CACHE/models--test--flaky2 -path "*snapshots*" -name "*.gguf")" ] && [ "$(ls $HF_HUB_CACHE/models--test--flaky2/blobs | grep -vc incomplete)" = 0 ]'
$FAKE get "$PORT" "__drop?path=test/flaky2/f-Q4_K_M.gguf&mode=off" > /dev/null
reset
pull test/flaky2
check "drop: next run resumes with Range and verifies" '[ "$(rc)" = 0 ] && cmp -s "$(out)" $REPOS/test/flaky2/f-Q4_K_M.gguf && [ "$(stat_of range:f-Q4_K_M.gguf)" = 1 ] && [ "$(stat_of bytes:f-Q4_K_M.gguf)" = 200000 ]'

# 10. checksum mismatch
pull test/corrupt
check "corrupt: rejected with checksum mismatch" '[ "$(rc)" = 1 ] && err_has "checksum mismatch"'
check "corrupt: nothing left in blobs/ or snapshots/" '[ -z "$(find $HF_HUB_CACHE/models--test--corrupt -type f -path "*blobs*")" ] && [ -z "$(find $HF_HUB_CACHE/models--test--corrupt -path "*snapshots*" -name "*.gguf")" ]'

# 10b. a write failure (here a file size limit, as a full disk would) keeps the partial, no blob
( trap '' XFSZ; ulimit -f 100; pull test/big )
INC=$(find "$HF_HUB_CACHE/models--test--big" -name "*.incomplete" 2>/dev/null | head -1)
check "write error: clear error, partial kept, no blob" '[ "$(rc)" = 1 ] && err_has "write error" && [ -n "$INC" ] && [ "$(ls $HF_HUB_CACHE/models--test--big/blobs | grep -vc incomplete)" = 0 ]'
reset
pull test/big
check "write error: next run resumes" '[ "$(rc)" = 0 ] && cmp -s "$(out)" $REPOS/test/big/b-Q4_K_M.gguf && [ "$(stat_of range:b-Q4_K_M.gguf)" = 1 ]'

# 11. disk space checked before transfer
pull test/huge
check "huge: not enough disk space" '[ "$(rc)" = 1 ] && err_has "not enough disk space"'

# 12. no tree API (a mirror): HEAD per file
pull test/notree
check "no tree API: HEAD fallback" '[ "$(rc)" = 0 ] && cmp -s "$(out)" $REPOS/test/notree/n-Q4_K_M.gguf'

# 13. offline: with and without the files
reset
HF_HUB_OFFLINE=1 pull test/tiny-hf
check "offline (HF_HUB_OFFLINE=1), cached: ok" '[ "$(rc)" = 0 -a "$(out)" = "$SNAP" ]'
pull test/tiny-GGUF:Q8_0 --offline
check "offline (--offline), cached quant: ok" '[ "$(rc)" = 0 -a "$(out)" = "$G/tiny-Q8_0.gguf" ]'
pull test/tiny-GGUF:F16 --offline
check "offline, quant not cached: lists cached quants" '[ "$(rc)" = 1 ] && err_has "available: Q4_K_M, Q8_0"'
pull test/never --offline
check "offline, not cached: clear error" '[ "$(rc)" = 1 ] && err_has "not in the Hugging Face cache"'
check "offline: no request reached the server" '[ "$(stat_of api)" = 0 -a "$(stat_of resolve)" = 0 ]'
HF_ENDPOINT=http://127.0.0.1:1 pull test/tiny-GGUF
check "hub unreachable, cached: cached copy with a warning" '[ "$(rc)" = 0 -a "$(out)" = "$G/tiny-Q4_K_M.gguf" ] && err_has "cached copy"'
HF_ENDPOINT=http://127.0.0.1:1 pull test/never
check "hub unreachable, not cached: clear error" '[ "$(rc)" = 1 ] && err_has "cannot reach"'

# 14. a cache written by another tool (huggingface_hub layout) is read as-is, offline and online
M="$HF_HUB_CACHE/models--other--made"
MSHA=$(python3 -c "import hashlib; print(hashlib.sha1(b'other/made').hexdigest())")
B=$(sha256sum $REPOS/other/made/made-Q4_K_M.gguf | cut -c1-64)
mkdir -p $M/blobs $M/refs $M/snapshots/$MSHA
cp $REPOS/other/made/made-Q4_K_M.gguf $M/blobs/$B
printf %s $MSHA > $M/refs/main
ln -s ../../blobs/$B $M/snapshots/$MSHA/made-Q4_K_M.gguf
pull other/made --offline
check "other tool's cache, offline" '[ "$(rc)" = 0 -a "$(out)" = "$M/snapshots/$MSHA/made-Q4_K_M.gguf" ]'
reset
pull other/made
check "other tool's cache, online: reused, no transfer" '[ "$(rc)" = 0 -a "$(out)" = "$M/snapshots/$MSHA/made-Q4_K_M.gguf" -a "$(stat_of resolve)" = 0 ]'

# 15. two processes, one blob: the lock makes the second wait and reuse
reset
"$OXINFER" pull test/slow --quiet > "$WORK/p1.out" 2> "$WORK/p1.err" & P1=$!
sleep 0.3
"$OXINFER" pull test/slow --quiet > "$WORK/p2.out" 2> "$WORK/p2.err" & P2=$!
wait $P1; r1=$?; wait $P2; r2=$?
check "concurrent pulls: both ok, same file" '[ $r1 = 0 -a $r2 = 0 ] && [ "$(cat $WORK/p1.out)" = "$(cat $WORK/p2.out)" ] && cmp -s "$(cat $WORK/p1.out)" $REPOS/test/slow/s-Q4_K_M.gguf'
check "concurrent pulls: blob transferred once" '[ "$(stat_of content:s-Q4_K_M.gguf)" = 1 ]'

# 16. -hf in other subcommands: same result as -m on the resolved file
if [ -f "$VOCAB" ]; then
  pull test/vocab-GGUF --quiet
  V=$(out)
  "$OXINFER" tokenize -hf test/vocab-GGUF "Hello world" > "$WORK/t1" 2>&1; r1=$?
  "$OXINFER" tokenize -m "$V" "Hello world" > "$WORK/t2" 2>&1; r2=$?
  check "tokenize -hf = tokenize -m (resolved path)" '[ $r1 = $r2 ] && cmp -s "$WORK/t1" "$WORK/t2" && [ -s "$WORK/t1" ]'
  "$OXINFER" inspect -hf test/vocab-GGUF --offline > "$WORK/t1" 2>&1; r1=$?
  "$OXINFER" inspect "$V" > "$WORK/t2" 2>&1; r2=$?
  check "inspect -hf --offline = inspect PATH" '[ $r1 = $r2 ] && cmp -s "$WORK/t1" "$WORK/t2"'
else
  echo "skip - -hf in other subcommands ($VOCAB missing)"
fi

# 17. bad input never crashes
pull "not a spec"
check "bad spec: usage error" '[ "$(rc)" = 1 ] && err_has "org/name"'
pull
check "no spec: usage" '[ "$(rc)" = 2 ]'
for i in 1 2 3 4 5 6; do
  pull bad/b$i
  check "malformed Hub answer $i: clean error" '[ "$(rc)" = 1 ] && grep -q "^error: " "$WORK/err"'
done
check "malformed Hub answers: nothing written outside the cache" '[ ! -e "$HF_HUB_CACHE/../etc" -a ! -e "$HF_HUB_CACHE/x" ]'

$FAKE get "$PORT" __shutdown > /dev/null 2>&1
wait $SERVER_PID 2>/dev/null
echo "hub e2e: $fails failure(s)"
[ $fails = 0 ]
