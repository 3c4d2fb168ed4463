#!/usr/bin/env bash
# End-to-end tests of `oxinfer list` and `oxinfer rm` (issue 31 item 4) on a Hugging Face cache
# laid out as huggingface_hub lays it out (blobs/<sha256>, snapshots/<commit>/<path> → relative
# links, refs/main), with two real GGUF quants of a synthetic Qwen 3.5 model so that "the other
# quant still works after rm" is checked by running it. Also: sizes count a blob once, last used
# is the newest atime/mtime, a quant named by its folder, a blob two quants share outlives the
# rm of one, hostile links (absolute, ../ escapes, blobs/ or the repo folder
# itself a link out of the cache) never make rm delete anything outside the cache.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/hub_cache"
rm -rf "$WORK" && mkdir -p "$WORK"
export HF_HUB_CACHE="$WORK/cache"
unset HF_HOME HF_HUB_OFFLINE HF_ENDPOINT
OUT="$WORK/outside"  # must survive every rm below

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# ---- two real quants of one synthetic model, and its checkpoint ----
node "$SRC/tools/gen/extract_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
"$OXI_GEN" qwen35 --out "$WORK/q35" --seed 5 --hidden 64 --layers 4 --tokenizer-dir "$WORK/tok" \
  --chat-template "$SHARED/testdata/templates/Qwen3.5-4B.jinja" >/dev/null || { echo "FAIL - oxi-gen"; exit 1; }
"$OXINFER" convert "$WORK/q35" -o "$WORK/q8.gguf" --type q8_0 >/dev/null 2>&1 || { echo "FAIL - convert q8_0"; exit 1; }
"$OXINFER" convert "$WORK/q35" -o "$WORK/f16.gguf" --type f16 >/dev/null 2>&1 || { echo "FAIL - convert f16"; exit 1; }

# add_file REPO COMMIT PATH SOURCE: the blob (named by its sha256) and the snapshot's relative link.
add_file() {
  local root="$HF_HUB_CACHE/models--${1/\//--}" sha
  sha=$(sha256sum "$4" | cut -c1-64)
  mkdir -p "$root/blobs" "$root/refs" "$(dirname "$root/snapshots/$2/$3")"
  [ -e "$root/blobs/$sha" ] || cp "$4" "$root/blobs/$sha"
  local up="../.."; local d; d=$(dirname "$3")
  while [ "$d" != "." ]; do up="$up/.."; d=$(dirname "$d"); done
  ln -s "$up/blobs/$sha" "$root/snapshots/$2/$3"
}
A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
B=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
G=test/tiny-GGUF
GR="$HF_HUB_CACHE/models--test--tiny-GGUF"
python3 -c "import os; open('$WORK/p1','wb').write(os.urandom(3000)); open('$WORK/p2','wb').write(os.urandom(2000)); open('$WORK/mm','wb').write(os.urandom(700))"
echo readme > "$WORK/readme"
add_file $G $A tiny-Q8_0.gguf "$WORK/q8.gguf"           # an older commit shares the Q8_0 blob
add_file $G $B tiny-Q8_0.gguf "$WORK/q8.gguf"
add_file $G $B tiny-F16.gguf "$WORK/f16.gguf"
add_file $G $B BF16/tiny-BF16-00001-of-00002.gguf "$WORK/p1"
add_file $G $B BF16/tiny-BF16-00002-of-00002.gguf "$WORK/p2"
add_file $G $B Q6_K/model-00001-of-00001.gguf "$WORK/p2"  # quant from its folder; shares a blob with BF16
add_file $G $B mmproj-tiny-F16.gguf "$WORK/mm"
add_file $G $B README.md "$WORK/readme"
printf %s $B > "$GR/refs/main"
# Another tool's absolute link to the BF16 part 1 blob, spelled through another path to the cache
# (a quant of its own in the older commit): the blob is still in use though no link names it.
ln -s "$HF_HUB_CACHE" "$WORK/cache-alias"
ln -s "$WORK/cache-alias/models--test--tiny-GGUF/blobs/$(basename "$(readlink "$GR/snapshots/$B/BF16/tiny-BF16-00001-of-00002.gguf")")" \
  "$GR/snapshots/$A/abs-Q3_K_M.gguf"
# The BF16 parts were last touched in 2020 (blob atime/mtime and the links' own mtime).
for f in "$GR"/snapshots/$B/BF16/*; do touch -d '2020-01-02 03:04:05 UTC' "$(readlink -f "$f")"; touch -h -d '2020-01-02 03:04:05 UTC' "$f"; done
# Hostile entries: an absolute link and a ../ escape out of the cache, a link to a folder outside.
mkdir -p "$OUT/dir" "$OUT/blobdir" "$OUT/repo"
head -c 1234 /dev/urandom > "$OUT/victim-Q4_K_M.gguf"; head -c 99 /dev/urandom > "$OUT/victim2"; echo keep > "$OUT/dir/keep.txt"
ln -s "$OUT/victim-Q4_K_M.gguf" "$GR/snapshots/$B/evil-Q4_K_M.gguf"
ln -s "../../blobs/../../../outside/victim2" "$GR/snapshots/$B/esc-Q5_K_M.gguf"
ln -s "$OUT/dir" "$GR/snapshots/$B/dirlink"
check "fixture: the ../ escape resolves outside the cache" "[ \"\$(readlink -f '$GR/snapshots/$B/esc-Q5_K_M.gguf')\" = '$OUT/victim2' ]"
# A checkpoint repo (every file of the synthetic model).
for f in "$WORK"/q35/*; do add_file test/tiny-hf $A "$(basename "$f")" "$f"; done
printf %s $A > "$HF_HUB_CACHE/models--test--tiny-hf/refs/main"
# blobs/ of a repo is a link to a folder outside; the blob it names must survive rm.
EB="$HF_HUB_CACHE/models--test--evil-blobs"
mkdir -p "$EB/snapshots/$A" "$EB/refs"; head -c 500 /dev/urandom > "$OUT/blobdir/deadbeef"
ln -s "$OUT/blobdir" "$EB/blobs"; ln -s ../../blobs/deadbeef "$EB/snapshots/$A/x-Q8_0.gguf"; printf %s $A > "$EB/refs/main"
# A repo folder that is itself a link to a folder outside.
cp -r "$EB/snapshots" "$OUT/repo/"; ln -s "$OUT/repo" "$HF_HUB_CACHE/models--test--linked"
mkdir -p "$HF_HUB_CACHE/datasets--x--y" "$HF_HUB_CACHE/.locks/models--test--tiny-GGUF"  # not models

size() { stat -c %s "$1"; }
SQ8=$(size "$WORK/q8.gguf"); SF16=$(size "$WORK/f16.gguf"); SHF=$(cat "$WORK"/q35/* | wc -c)

# ---- list ----
"$OXINFER" list --json > "$WORK/l1.json" 2> "$WORK/l1.err"
check "list --json: exit 0" "[ $? -eq 0 ]" || cat "$WORK/l1.err"
python3 - "$WORK/l1.json" "$SQ8" "$SF16" "$SHF" "$GR/snapshots/$B" <<'EOF' > "$WORK/l1.py" 2>&1
import json, sys
rows = json.load(open(sys.argv[1])); sq8, sf16, shf = map(int, sys.argv[2:5]); snap = sys.argv[5]
by = {r["name"]: r for r in rows}
assert list(by) == ["test/evil-blobs:Q8_0", "test/tiny-GGUF:BF16", "test/tiny-GGUF:F16", "test/tiny-GGUF:Q3_K_M", "test/tiny-GGUF:Q4_K_M",
                    "test/tiny-GGUF:Q5_K_M", "test/tiny-GGUF:Q6_K", "test/tiny-GGUF:Q8_0", "test/tiny-hf"], list(by)
for r in rows:
    assert list(r) == ["name", "repo", "quant", "format", "size_bytes", "last_used", "revision", "path", "files"], list(r)
q8 = by["test/tiny-GGUF:Q8_0"]
assert q8["size_bytes"] == sq8, ("Q8_0 blob counted once", q8["size_bytes"], sq8)
assert q8["files"] == ["tiny-Q8_0.gguf"] and q8["revision"] == "b" * 40 and q8["path"] == snap + "/tiny-Q8_0.gguf", q8
assert by["test/tiny-GGUF:F16"]["size_bytes"] == sf16
assert by["test/tiny-GGUF:Q3_K_M"]["size_bytes"] == 3000, "an absolute link into the cache counts"
bf = by["test/tiny-GGUF:BF16"]
assert bf["size_bytes"] == 5000 and len(bf["files"]) == 2 and bf["last_used"] == "2020-01-02T03:04:05Z", bf
assert bf["path"].endswith("BF16/tiny-BF16-00001-of-00002.gguf"), bf
assert by["test/tiny-GGUF:Q4_K_M"]["size_bytes"] == 0, "a link out of the cache is not counted"
q6 = by["test/tiny-GGUF:Q6_K"]
assert q6["size_bytes"] == 2000 and q6["path"] == snap + "/Q6_K/model-00001-of-00001.gguf", q6
hf = by["test/tiny-hf"]
assert hf["quant"] is None and hf["format"] == "safetensors" and hf["size_bytes"] == shf and hf["path"].endswith("a" * 40), hf
assert q8["last_used"] > "2026" or q8["last_used"] > "2024", q8["last_used"]
EOF
check "list --json: rows per quant/checkpoint, blobs counted once, last used, paths" "[ ! -s '$WORK/l1.py' ]" || cat "$WORK/l1.py"
"$OXINFER" list > "$WORK/l1.txt"
check "list: table with a header, NAME usable as -hf" "head -1 '$WORK/l1.txt' | grep -q '^NAME  *FORMAT  *SIZE  *LAST USED' && grep -q '^test/tiny-GGUF:Q8_0  *gguf ' '$WORK/l1.txt'"
check "list: sizes in decimal units, old files 'years ago'" "grep -q '^test/tiny-GGUF:BF16 .* 5.0 KB  6 years ago' '$WORK/l1.txt'"
HF_HUB_CACHE="$WORK/none" "$OXINFER" list --json > "$WORK/l0.json"
check "list: missing cache → [] and exit 0" "[ $? -eq 0 ] && [ \"\$(tr -d ' \n' < '$WORK/l0.json')\" = '[]' ]"

# ---- the other quant keeps working after rm of one ----
runq() { "$OXINFER" run -hf "$1" --offline --tokens 1,2,3 -n 4 --temp 0 --json 2>/dev/null | head -n 4; }
runq $G:Q8_0 > "$WORK/q8.before"
runq $G:F16 > "$WORK/f16.before"
check "fixture: both quants run from the cache" "[ \$(wc -l < '$WORK/q8.before') -eq 4 ] && [ \$(wc -l < '$WORK/f16.before') -eq 4 ]"
F16BLOB=$(readlink -f "$GR/snapshots/$B/tiny-F16.gguf")
"$OXINFER" rm $G:f16 > "$WORK/rm1.out" 2>&1
check "rm :quant (any case): exit 0, says what it freed" "[ $? -eq 0 ] && grep -q \"deleted '$G:f16'\" '$WORK/rm1.out'" || cat "$WORK/rm1.out"
check "rm :quant: its link and blob are gone" "[ ! -e '$GR/snapshots/$B/tiny-F16.gguf' ] && [ ! -e '$F16BLOB' ]"
runq $G:Q8_0 > "$WORK/q8.after"
check "rm :quant: the other quant still runs, same tokens" "[ -s '$WORK/q8.after' ] && cmp -s '$WORK/q8.before' '$WORK/q8.after'"
"$OXINFER" run -hf $G:F16 --offline --tokens 1 -n 1 >/dev/null 2>&1
check "rm :quant: the removed quant no longer resolves (exit 1)" "[ $? -eq 1 ]"
"$OXINFER" rm $G:BF16 >/dev/null 2>&1
check "rm :quant in a folder: parts and the emptied folder gone" "[ ! -e '$GR/snapshots/$B/BF16' ] && [ \$(ls '$GR/blobs' | wc -l) -eq 5 ]"
check "rm :quant: a blob another entry reaches by an absolute link stays" "cmp -s '$GR/snapshots/$A/abs-Q3_K_M.gguf' '$WORK/p1'"
Q6=$("$OXINFER" pull $G:Q6_K --offline --quiet 2>/dev/null)
check "rm :quant: a blob another quant links to stays (Q6_K still resolves, same bytes)" "[ -n '$Q6' ] && cmp -s '$Q6' '$WORK/p2'"

# ---- hostile links ----
"$OXINFER" rm $G:Q4_K_M $G:Q5_K_M >/dev/null 2>&1
check "rm: absolute and ../ links out of the cache: links gone, targets kept" \
  "[ \$? -eq 0 ] && [ ! -L '$GR/snapshots/$B/evil-Q4_K_M.gguf' ] && [ ! -L '$GR/snapshots/$B/esc-Q5_K_M.gguf' ] && [ \$(size '$OUT/victim-Q4_K_M.gguf') -eq 1234 ] && [ -f '$OUT/victim2' ]"
"$OXINFER" rm test/evil-blobs:Q8_0 >/dev/null 2>&1
check "rm: blobs/ a link out of the cache: the blob outside kept, the repo folder gone" \
  "[ \$? -eq 0 ] && [ -f '$OUT/blobdir/deadbeef' ] && [ ! -e '$EB' ] && [ ! -L '$EB' ]"
"$OXINFER" rm test/linked:Q8_0 > /dev/null 2> "$WORK/rm_l.err"
check "rm :quant of a repo folder that is a link out: exit 1, nothing removed" \
  "[ \$? -eq 1 ] && grep -q 'link out of the cache' '$WORK/rm_l.err' && [ -L '$OUT/repo/snapshots/$A/x-Q8_0.gguf' ]"
"$OXINFER" rm test/linked >/dev/null 2>&1
check "rm of a repo folder that is a link: only the link goes" \
  "[ \$? -eq 0 ] && [ ! -L '$HF_HUB_CACHE/models--test--linked' ] && [ -L '$OUT/repo/snapshots/$A/x-Q8_0.gguf' ]"

# ---- errors ----
expect_rm() {  # NAME RC PATTERN ARGS...
  local name=$1 want=$2 pat=$3; shift 3
  "$OXINFER" rm "$@" > "$WORK/e.out" 2> "$WORK/e.err"
  local got=$?
  if [ $got -eq $want ] && grep -q "^error: .*$pat" "$WORK/e.err"; then ok "$name"; else bad "$name (rc $got)"; cat "$WORK/e.err"; fi
}
expect_rm "rm unknown repo → 1" 1 "test/nope is not in the Hugging Face cache" test/nope
expect_rm "rm unknown quant → 1, names the quants there" 1 "no quant 'Q2_K' of $G in the cache; there: Q3_K_M, Q6_K, Q8_0" $G:Q2_K
expect_rm "rm :quant of a checkpoint → 1" 1 "there: the safetensors checkpoint" test/tiny-hf:Q8_0
expect_rm "rm bad spec → 1" 1 "invalid model spec" nothing-here
expect_rm "rm with a revision → 1" 1 "every revision is removed" $G@main
expect_rm "rm with nothing → 2" 2 "no model given"
expect_rm "rm unknown option → 2" 2 "unknown option --force" --force $G

# ---- whole repo: a link inside to a folder outside is not followed ----
"$OXINFER" rm $G > "$WORK/rm_all.out" 2>&1
check "rm org/name: the repo folder is gone" "[ \$? -eq 0 ] && [ ! -e '$GR' ]"
check "rm org/name: the folder a link inside pointed to is intact" "[ -f '$OUT/dir/keep.txt' ]"
"$OXINFER" rm test/tiny-hf:Q8_0 >/dev/null 2>&1; "$OXINFER" list --json > "$WORK/l2.json"
check "list after rm: only the checkpoint left" "python3 -c \"import json; r=json.load(open('$WORK/l2.json')); assert [x['name'] for x in r]==['test/tiny-hf'], r\""
"$OXINFER" rm test/tiny-hf >/dev/null 2>&1
check "rm of the last model: cache without model folders, other folders kept" \
  "[ -z \"\$(ls '$HF_HUB_CACHE' | grep '^models--')\" ] && [ -d '$HF_HUB_CACHE/datasets--x--y' ]"

echo "hub_cache: $fails failure(s)"
[ $fails -eq 0 ]
