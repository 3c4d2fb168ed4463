#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <queue>

#include "core/error.h"
#include "tokenizer/flat_map.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace oxi {

namespace {

constexpr const char kSpm[] = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
constexpr uint32_t kSpmCp = 0x2581;

// GPT-2's byte -> code point map (printable bytes map to themselves, the rest to 256+k).
struct ByteUnicode {
  uint32_t byte_to_cp[256];
  ByteUnicode() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      byte_to_cp[b] = keep ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
    }
  }
  int cp_to_byte(uint32_t cp) const {
    if (cp < 256) {
      const bool keep = (cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174);
      return keep ? static_cast<int>(cp) : -1;
    }
    for (int b = 0; b < 256; ++b)
      if (byte_to_cp[b] == cp) return b;
    return -1;
  }
};

const ByteUnicode& byte_unicode() {
  static const ByteUnicode bu;
  return bu;
}

bool parse_byte_token(std::string_view t, uint8_t* out) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int h = hex(t[3]), l = hex(t[4]);
  if (h < 0 || l < 0) return false;
  *out = static_cast<uint8_t>(h * 16 + l);
  return true;
}

struct TextOf {
  const std::vector<std::string>* t;
  std::string_view operator()(int32_t id) const { return (*t)[static_cast<size_t>(id)]; }
};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerData d;
  std::vector<std::string> pieces;
  tok::StrIdMap<TextOf> vocab{TextOf{&d.tokens}};
  tok::U64Map merges;
  int32_t byte_id[256];
  int32_t ascii_id[128];
  std::vector<uint8_t> eog_flag;
  std::vector<int32_t> eog;
  // Added-token trie: node 0 is the root; edges (node << 8 | byte) -> child.
  tok::U64Map trie;
  std::vector<int32_t> trie_token;
  std::vector<uint8_t> token_special, token_lstrip, token_rstrip;
  bool first_byte[256] = {};
  // SentencePiece: code points that some token has right before U+2581 (splitting before a ▁
  // that follows any other code point is exact). Sorted.
  std::vector<uint32_t> before_spm;
  bool newline_mixed = false;  // some token mixes '\n' with other characters

  explicit Impl(TokenizerData data) : d(std::move(data)) {}
  void build();
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_byte_level(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  void spm_segment(std::string_view seg, std::vector<int32_t>& out) const;
  void bpe(std::vector<int32_t>& syms) const;
  std::pair<int32_t, size_t> match_added(std::string_view text, size_t i, bool parse_special,
                                         const std::vector<size_t>* blocked) const;
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              const std::vector<size_t>* blocked) const;
};

void Tokenizer::Impl::build() {
  const std::string& src = d.source;
  const size_t n = d.tokens.size();
  if (n == 0) format_error(src, "tokenizer has no tokens");
  if (n > (1u << 30)) format_error(src, "tokenizer vocabulary too large");
  if (d.types.size() != n)
    format_error(src, "token_type has " + std::to_string(d.types.size()) + " entries, tokens has " +
                          std::to_string(n));
  if (!d.scores.empty() && d.scores.size() != n) format_error(src, "scores size differs from tokens");
  auto check_id = [&](int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<int32_t>(n))
      format_error(src, std::string(what) + " id " + std::to_string(id) + " out of range");
  };
  check_id(d.bos, "bos");
  check_id(d.eos, "eos");
  check_id(d.pad, "pad");
  check_id(d.unk, "unk");

  vocab.reserve(n);
  for (size_t i = 0; i < n; ++i) vocab.insert(d.tokens[i], static_cast<int32_t>(i));

  // Rendered bytes of every token.
  pieces.resize(n);
  const ByteUnicode& bu = byte_unicode();
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = d.tokens[i];
    const TokenType ty = d.types[i];
    std::string& p = pieces[i];
    if (d.model == TokenizerModel::kByteLevelBpe) {
      if (ty == TokenType::kNormal || ty == TokenType::kByte || ty == TokenType::kUndefined) {
        for (size_t k = 0; k < t.size();) {
          size_t len;
          const uint32_t cp = unicode::decode_utf8(t.data() + k, t.size() - k, &len);
          const int b = cp < 0x110000 ? bu.cp_to_byte(cp) : -1;
          if (b >= 0) p.push_back(static_cast<char>(b));
          else p.append(t, k, len);
          k += len;
        }
      } else {
        p = t;
      }
    } else {
      uint8_t b;
      if (ty == TokenType::kByte && parse_byte_token(t, &b)) {
        p.assign(1, static_cast<char>(b));
      } else if (ty == TokenType::kNormal || ty == TokenType::kUserDefined ||
                 ty == TokenType::kUndefined) {
        for (size_t k = 0; k < t.size();) {
          if (t.compare(k, 3, kSpm) == 0) { p.push_back(' '); k += 3; }
          else p.push_back(t[k++]);
        }
      } else {
        p = t;
      }
    }
  }

  // Base symbols.
  for (int b = 0; b < 256; ++b) byte_id[b] = -1;
  for (int c = 0; c < 128; ++c) ascii_id[c] = -1;
  if (d.model == TokenizerModel::kByteLevelBpe) {
    for (int b = 0; b < 256; ++b) {
      std::string s;
      unicode::append_utf8(s, bu.byte_to_cp[b]);
      byte_id[b] = vocab.find(s);
      if (byte_id[b] < 0)
        format_error(src, "byte-level vocabulary lacks the token for byte " + std::to_string(b));
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint8_t b;
      if (parse_byte_token(d.tokens[i], &b) && byte_id[b] < 0) byte_id[b] = static_cast<int32_t>(i);
    }
    for (int c = 0; c < 128; ++c) {
      std::string s = c == ' ' ? std::string(kSpm) : std::string(1, static_cast<char>(c));
      ascii_id[c] = vocab.find(s);
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string& t = d.tokens[i];
      if (d.types[i] != TokenType::kNormal && d.types[i] != TokenType::kUndefined) continue;
      bool has_nl = false, has_other = false;
      uint32_t prev = 0;
      for (size_t k = 0; k < t.size();) {
        size_t len;
        const uint32_t cp = unicode::decode_utf8(t.data() + k, t.size() - k, &len);
        k += len;
        if (cp == '\n') has_nl = true;
        else has_other = true;
        if (cp == kSpmCp && prev != 0 && prev != kSpmCp) before_spm.push_back(prev);
        prev = cp;
      }
      if (has_nl && has_other) newline_mixed = true;
    }
    std::sort(before_spm.begin(), before_spm.end());
    before_spm.erase(std::unique(before_spm.begin(), before_spm.end()), before_spm.end());
  }

  // Merges by rank. Memory-latency bound (3 lookups per merge in a 262k table), so lookups are
  // done in batches with the table slots prefetched.
  {
    const size_t nm = d.merges.size();
    merges.reserve(nm);
    constexpr size_t kBatch = 32;
    uint64_t h[kBatch][3];
    int32_t ids[kBatch][3];
    std::string cat[kBatch];
    using Map = decltype(vocab);
    for (size_t base = 0; base < nm; base += kBatch) {
      const size_t cnt = std::min(kBatch, nm - base);
      for (size_t k = 0; k < cnt; ++k) {
        const auto& m = d.merges[base + k];
        cat[k].assign(m.first);
        cat[k].append(m.second);
        h[k][0] = Map::hash(m.first);
        h[k][1] = Map::hash(m.second);
        h[k][2] = Map::hash(cat[k]);
        for (int j = 0; j < 3; ++j) vocab.prefetch_hash(h[k][j]);
      }
      for (size_t k = 0; k < cnt; ++k) {
        const auto& m = d.merges[base + k];
        ids[k][0] = vocab.find_hashed(m.first, h[k][0]);
        ids[k][1] = vocab.find_hashed(m.second, h[k][1]);
        ids[k][2] = vocab.find_hashed(cat[k], h[k][2]);
        if (ids[k][0] >= 0 && ids[k][1] >= 0) merges.prefetch_key(pair_key(ids[k][0], ids[k][1]));
      }
      for (size_t k = 0; k < cnt; ++k) {
        // As HF/llama.cpp: a merge whose parts or result are not tokens can never apply.
        if (ids[k][0] < 0 || ids[k][1] < 0 || ids[k][2] < 0) continue;
        merges.insert(pair_key(ids[k][0], ids[k][1]),
                      (static_cast<uint64_t>(base + k) << 32) | static_cast<uint32_t>(ids[k][2]));
      }
    }
  }

  // Added tokens.
  token_special.assign(n, 0);
  token_lstrip.assign(n, 0);
  token_rstrip.assign(n, 0);
  size_t total = 1;
  for (const auto& a : d.added) {
    check_id(a.id, "added token");
    total += d.tokens[static_cast<size_t>(a.id)].size();
  }
  trie.reserve(total);
  trie_token.assign(1, -1);
  for (const auto& a : d.added) {
    if (a.id < 0) continue;
    const std::string& t = d.tokens[static_cast<size_t>(a.id)];
    if (t.empty()) continue;
    uint64_t node = 0;
    for (unsigned char ch : t) {
      const uint64_t key = (node << 8) | ch;
      const uint64_t* child = trie.find(key);
      if (child) {
        node = *child;
      } else {
        const uint64_t nn = trie_token.size();
        trie_token.push_back(-1);
        trie.insert(key, nn);
        node = nn;
      }
    }
    if (trie_token[node] < 0) trie_token[node] = a.id;
    first_byte[static_cast<unsigned char>(t[0])] = true;
    const auto id = static_cast<size_t>(a.id);
    token_special[id] = a.special;
    token_lstrip[id] = a.lstrip;
    token_rstrip[id] = a.rstrip;
  }

  // End of generation.
  eog_flag.assign(n, 0);
  auto add_eog = [&](int32_t id) {
    if (id >= 0 && id < static_cast<int32_t>(n) && !eog_flag[static_cast<size_t>(id)]) {
      eog_flag[static_cast<size_t>(id)] = 1;
      eog.push_back(id);
    }
  };
  add_eog(d.eos);
  for (int32_t id : d.eog) add_eog(id);
}

// Runs byte-pair merges over `syms` (vocabulary ids) in rank order, leftmost first on ties.
void Tokenizer::Impl::bpe(std::vector<int32_t>& syms) const {
  const size_t n = syms.size();
  if (n < 2) return;
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  auto rank_of = [&](int32_t a, int32_t b, int32_t* res) -> uint32_t {
    const uint64_t* v = merges.find(pair_key(a, b));
    if (!v) return kNone;
    *res = static_cast<int32_t>(static_cast<uint32_t>(*v));
    return static_cast<uint32_t>(*v >> 32);
  };
  if (n <= 48) {
    uint32_t ranks[48];
    int32_t res[48];
    size_t m = n;
    for (size_t i = 0; i + 1 < m; ++i) ranks[i] = rank_of(syms[i], syms[i + 1], &res[i]);
    while (m > 1) {
      uint32_t best = kNone;
      size_t bi = 0;
      for (size_t i = 0; i + 1 < m; ++i)
        if (ranks[i] < best) { best = ranks[i]; bi = i; }
      if (best == kNone) break;
      syms[bi] = res[bi];
      for (size_t i = bi + 1; i + 1 < m; ++i) syms[i] = syms[i + 1];
      for (size_t i = bi + 1; i + 2 < m; ++i) { ranks[i] = ranks[i + 1]; res[i] = res[i + 1]; }
      --m;
      if (bi > 0) ranks[bi - 1] = rank_of(syms[bi - 1], syms[bi], &res[bi - 1]);
      if (bi + 1 < m) ranks[bi] = rank_of(syms[bi], syms[bi + 1], &res[bi]);
    }
    syms.resize(m);
    return;
  }
  struct Node { int32_t id; int32_t prev, next; };
  std::vector<Node> nodes(n);
  for (size_t i = 0; i < n; ++i)
    nodes[i] = {syms[i], static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  struct Cand {
    uint32_t rank; int32_t pos; int32_t left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
  auto push = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t nx = nodes[static_cast<size_t>(pos)].next;
    if (nx < 0) return;
    int32_t r;
    const uint32_t rk = rank_of(nodes[static_cast<size_t>(pos)].id, nodes[static_cast<size_t>(nx)].id, &r);
    if (rk != kNone) q.push({rk, pos, nodes[static_cast<size_t>(pos)].id, nodes[static_cast<size_t>(nx)].id});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!q.empty()) {
    const Cand c = q.top();
    q.pop();
    Node& l = nodes[static_cast<size_t>(c.pos)];
    if (l.id != c.left || l.next < 0) continue;
    Node& r = nodes[static_cast<size_t>(l.next)];
    if (r.id != c.right) continue;
    int32_t res = -1;
    rank_of(c.left, c.right, &res);
    l.id = res;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) nodes[static_cast<size_t>(r.next)].prev = c.pos;
    push(l.prev);
    push(c.pos);
  }
  size_t m = 0;
  for (int32_t i = 0; i >= 0; i = nodes[static_cast<size_t>(i)].next) syms[m++] = nodes[static_cast<size_t>(i)].id;
  syms.resize(m);
}

void Tokenizer::Impl::encode_byte_level(std::string_view text, std::vector<int32_t>& out) const {
  std::string normed;
  if (d.nfc && unicode::nfc(text, normed)) text = normed;
  std::vector<uint32_t> cps;
  std::vector<uint32_t> off;
  cps.reserve(text.size());
  off.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    size_t len;
    cps.push_back(unicode::decode_utf8(text.data() + i, text.size() - i, &len));
    off.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  off.push_back(static_cast<uint32_t>(text.size()));
  std::vector<std::pair<uint32_t, uint32_t>> words;
  split_qwen(cps.data(), cps.size(), d.pre == PreTokenizerKind::kQwen35, words);
  std::vector<int32_t> syms;
  std::string enc;
  for (const auto& w : words) {
    const std::string_view bytes = text.substr(off[w.first], off[w.second] - off[w.first]);
    if (d.ignore_merges) {
      enc.clear();
      for (unsigned char b : bytes) unicode::append_utf8(enc, byte_unicode().byte_to_cp[b]);
      const int32_t id = vocab.find(enc);
      if (id >= 0) { out.push_back(id); continue; }
    }
    syms.clear();
    for (unsigned char b : bytes) syms.push_back(byte_id[b]);
    bpe(syms);
    out.insert(out.end(), syms.begin(), syms.end());
  }
}

void Tokenizer::Impl::spm_segment(std::string_view seg, std::vector<int32_t>& out) const {
  if (d.ignore_merges) {
    const int32_t id = vocab.find(seg);
    if (id >= 0) { out.push_back(id); return; }
  }
  std::vector<int32_t> syms;
  syms.reserve(seg.size());
  for (size_t i = 0; i < seg.size();) {
    const auto b0 = static_cast<unsigned char>(seg[i]);
    size_t len;
    int32_t id;
    if (b0 < 0x80) {
      len = 1;
      id = ascii_id[b0];
    } else {
      unicode::decode_utf8(seg.data() + i, seg.size() - i, &len);
      id = vocab.find(seg.substr(i, len));
    }
    if (id >= 0) {
      syms.push_back(id);
    } else if (d.byte_fallback) {
      for (size_t k = 0; k < len; ++k) {
        const int32_t bid = byte_id[static_cast<unsigned char>(seg[i + k])];
        if (bid >= 0) syms.push_back(bid);
        else if (d.unk >= 0) syms.push_back(d.unk);
      }
    } else if (d.unk >= 0) {
      syms.push_back(d.unk);
    }
    i += len;
  }
  bpe(syms);
  out.insert(out.end(), syms.begin(), syms.end());
}

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  std::string s;
  s.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') s.append(kSpm);
    else s.push_back(c);
  }
  // Segments: runs of '\n' on their own (llama.cpp's gemma4 split; exact for HF too when no
  // token mixes '\n' with other characters), and a cut before each ▁ that follows a code point
  // which no token has in front of a ▁ (exact: no merge can cross that boundary).
  const std::string_view sv(s);
  size_t start = 0;
  uint32_t prev = 0;
  for (size_t i = 0; i < sv.size();) {
    const char c = sv[i];
    if (c == '\n' && !newline_mixed) {
      if (i > start) spm_segment(sv.substr(start, i - start), out);
      size_t j = i;
      while (j < sv.size() && sv[j] == '\n') ++j;
      const std::string_view run = sv.substr(i, j - i);
      const int32_t id = vocab.find(run);
      if (id >= 0) out.push_back(id);
      else spm_segment(run, out);
      i = j;
      start = j;
      prev = '\n';
      continue;
    }
    size_t len;
    const uint32_t cp = unicode::decode_utf8(sv.data() + i, sv.size() - i, &len);
    if (cp == kSpmCp && i > start && prev != kSpmCp &&
        !std::binary_search(before_spm.begin(), before_spm.end(), prev)) {
      spm_segment(sv.substr(start, i - start), out);
      start = i;
    }
    prev = cp;
    i += len;
  }
  if (start < sv.size()) spm_segment(sv.substr(start), out);
}

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (d.model == TokenizerModel::kByteLevelBpe) encode_byte_level(text, out);
  else encode_spm(text, out);
}

Tokenizer::Tokenizer(TokenizerData data) : impl_(std::make_unique<Impl>(std::move(data))) {
  impl_->build();
}
Tokenizer::~Tokenizer() = default;

namespace {

// Length of the Unicode whitespace run ending at `end` (backwards) / starting at `begin`.
size_t ws_suffix(std::string_view s) {
  size_t k = s.size();
  while (k > 0) {
    size_t b = k - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80 && k - b < 4) --b;
    size_t len;
    const uint32_t cp = unicode::decode_utf8(s.data() + b, k - b, &len);
    if (b + len != k || !(unicode::flags(cp) & unicode::kSpace)) break;
    k = b;
  }
  return s.size() - k;
}

size_t ws_prefix(std::string_view s) {
  size_t k = 0;
  while (k < s.size()) {
    size_t len;
    const uint32_t cp = unicode::decode_utf8(s.data() + k, s.size() - k, &len);
    if (!(unicode::flags(cp) & unicode::kSpace)) break;
    k += len;
  }
  return k;
}

}  // namespace

// The longest added token matching at text[i] (-1: none) and its end. A special token is taken
// only with parse_special, and never across a blocked byte position (sorted; encode_marked).
std::pair<int32_t, size_t> Tokenizer::Impl::match_added(std::string_view text, size_t i, bool parse_special,
                                                        const std::vector<size_t>* blocked) const {
  size_t no_special_from = text.size();  // a special token may not reach this byte
  if (blocked) {
    auto b = std::lower_bound(blocked->begin(), blocked->end(), i);
    if (b != blocked->end()) no_special_from = *b;
  }
  uint64_t node = 0;
  int32_t best = -1;
  size_t best_end = 0;
  for (size_t k = i; k < text.size(); ++k) {
    const uint64_t* child = trie.find((node << 8) | static_cast<unsigned char>(text[k]));
    if (!child) break;
    node = *child;
    const int32_t t = trie_token[node];
    if (t < 0) continue;
    const bool special = token_special[static_cast<size_t>(t)] != 0;
    if (!special || (parse_special && k < no_special_from)) {
      best = t;
      best_end = k + 1;
    }
  }
  return {best, best_end};
}

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_special, bool parse_special,
                                             const std::vector<size_t>* blocked) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && d.add_bos && d.bos >= 0) out.push_back(d.bos);
  size_t start = 0;  // start of pending plain text
  size_t i = 0;
  const bool any_added = trie_token.size() > 1;
  while (any_added && i < text.size()) {
    if (!first_byte[static_cast<unsigned char>(text[i])]) { ++i; continue; }
    const auto [best, best_end] = match_added(text, i, parse_special, blocked);
    if (best < 0) { ++i; continue; }
    std::string_view before = text.substr(start, i - start);
    if (token_lstrip[static_cast<size_t>(best)]) before.remove_suffix(ws_suffix(before));
    encode_text(before, out);
    out.push_back(best);
    i = best_end;
    if (token_rstrip[static_cast<size_t>(best)]) i += ws_prefix(text.substr(i));
    start = i;
  }
  encode_text(text.substr(start), out);
  if (add_special && d.add_eos && d.eos >= 0) out.push_back(d.eos);
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return impl_->encode(text, add_special, parse_special, nullptr);
}

// The marker: U+FDD0, a Unicode noncharacter ("for internal use"), never in real text; a marker
// already in user text is doubled (escaped) and encode_marked turns the pair back into one.
static constexpr std::string_view kMarker = "\xEF\xB7\x90";

std::string Tokenizer::mark_user_text(std::string_view text) const {
  const Impl& m = *impl_;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kMarker.size(), kMarker) == 0) {
      out.append(kMarker).append(kMarker);
      i += kMarker.size();
      continue;
    }
    if (m.first_byte[static_cast<unsigned char>(text[i])]) {
      const auto [t, end] = m.match_added(text, i, /*parse_special=*/true, nullptr);
      if (t >= 0 && m.token_special[static_cast<size_t>(t)]) {
        // The marker goes after the token's first code point, so the string no longer matches
        // (here or in any other text the template compares it with) and no template's trim sees it.
        size_t len = 1;
        unicode::decode_utf8(text.data() + i, end - i, &len);
        out.append(text.substr(i, len)).append(kMarker).append(text.substr(i + len, end - i - len));
        i = end;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

std::vector<int32_t> Tokenizer::encode_marked(std::string_view rendered, bool add_special) const {
  std::string clean;
  clean.reserve(rendered.size());
  std::vector<size_t> blocked;  // the byte before each marker: a special token may not cover it
  for (size_t i = 0; i < rendered.size();) {
    if (rendered.compare(i, kMarker.size(), kMarker) != 0) {
      clean += rendered[i++];
      continue;
    }
    i += kMarker.size();
    if (rendered.compare(i, kMarker.size(), kMarker) == 0) {  // an escaped marker: the character itself
      clean.append(kMarker);
      i += kMarker.size();
    } else if (!clean.empty()) {
      blocked.push_back(clean.size() - 1);
    }
  }
  return impl_->encode(clean, add_special, /*parse_special=*/true, &blocked);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special && token_type(id) == TokenType::kControl) continue;
    out += token_to_piece(id);
  }
  return out;
}

const std::string& Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " out of range [0, " +
                                                 std::to_string(n_vocab()) + ")");
  return impl_->pieces[static_cast<size_t>(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " out of range");
  return impl_->d.tokens[static_cast<size_t>(id)];
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->d.tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->d.bos; }
int32_t Tokenizer::eos_id() const { return impl_->d.eos; }
int32_t Tokenizer::pad_id() const { return impl_->d.pad; }
int32_t Tokenizer::unk_id() const { return impl_->d.unk; }
bool Tokenizer::add_bos() const { return impl_->d.add_bos && impl_->d.bos >= 0; }
bool Tokenizer::add_eos() const { return impl_->d.add_eos && impl_->d.eos >= 0; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog_flag[static_cast<size_t>(id)];
}
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog; }
TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return TokenType::kUndefined;
  return impl_->d.types[static_cast<size_t>(id)];
}
int32_t Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }
const std::string& Tokenizer::chat_template() const { return impl_->d.chat_template; }
TokenizerModel Tokenizer::model() const { return impl_->d.model; }
PreTokenizerKind Tokenizer::pre_tokenizer() const { return impl_->d.pre; }
const TokenizerData& Tokenizer::data() const { return impl_->d; }

// ---- streaming ----

StreamDecoder::StreamDecoder(TokenizerPtr tok, bool skip_special)
    : tok_(std::move(tok)), skip_special_(skip_special) {}

namespace {

// Moves the complete part of `pending` to the result; invalid bytes become U+FFFD. With `final`,
// an incomplete tail is flushed as U+FFFD too.
std::string take_complete(std::string& pending, bool final) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    const auto b = static_cast<unsigned char>(pending[i]);
    if (b < 0x80) { out.push_back(static_cast<char>(b)); ++i; continue; }
    size_t len;
    const uint32_t cp = unicode::decode_utf8(pending.data() + i, pending.size() - i, &len);
    if (cp < unicode::kInvalidBase) {
      out.append(pending, i, len);
      i += len;
      continue;
    }
    // Invalid here: is it only a truncated (so far valid) prefix at the end?
    const int need = unicode::utf8_seq_len(b);
    const size_t have = pending.size() - i;
    if (!final && need > 1 && have < static_cast<size_t>(need)) {
      bool prefix_ok = true;
      for (size_t k = 1; k < have; ++k)
        if ((static_cast<unsigned char>(pending[i + k]) & 0xC0) != 0x80) prefix_ok = false;
      if (have >= 2) {
        const auto b1 = static_cast<unsigned char>(pending[i + 1]);
        if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0) || (b == 0xF0 && b1 < 0x90) ||
            (b == 0xF4 && b1 >= 0x90))
          prefix_ok = false;
      }
      if (prefix_ok) break;
    }
    out.append("\xEF\xBF\xBD");
    ++i;
  }
  pending.erase(0, i);
  return out;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  if (!(skip_special_ && tok_->token_type(id) == TokenType::kControl)) pending_ += tok_->token_to_piece(id);
  return take_complete(pending_, false);
}

std::string StreamDecoder::flush() { return take_complete(pending_, true); }
void StreamDecoder::reset() { pending_.clear(); }

}  // namespace oxi
