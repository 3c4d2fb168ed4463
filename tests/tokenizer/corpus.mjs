// A varied tokenizer test corpus: scripts, code, emoji, whitespace and newline runs, digits,
// contractions, combining marks, special-token text, and seeded random mixes of all of these.
// (Only code points assigned before Unicode 14 are used: our tables are Unicode 14, node's ICU
// is newer; see docs/tokenizer.md.)

function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 4294967296; };
}

const fixed = [
  "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", " \n", "\n ", "\r\n", "\r\n\r\n", " \r\n  x",
  "Hello world", " Hello world", "Hello, world!", "Hello World!!!  ", "ied 4 ½ months",
  "It's, they're, we've, I'm, you'll, he'd, IT'S, THEY'RE, We'Ve, a'LL, 'd 's 't",
  "don't can't won't shouldn't y'all o'clock rock'n'roll '",
  "1 12 123 1234 12345 3.14159 1,000,000 0x1F 1e-9 ٣٤٥ ४५६ ⅫⅦ ²³",
  "The quick brown fox jumps over the lazy dog.",
  "Ünïcödé façade naïve café résumé coöperate Ångström",
  "Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.",
  "Γειά σου κόσμε· ὁ λόγος",
  "你好，世界！今天天气很好。我们去公园散步吧。",
  "こんにちは世界。カタカナとひらがな、漢字。ｶﾀｶﾅ",
  "안녕하세요 세계! 한국어 텍스트입니다.",
  "مرحبا بالعالم! هذا نص عربي.",
  "שלום עולם, זה טקסט בעברית.",
  "नमस्ते दुनिया! यह हिंदी पाठ है।",
  "สวัสดีชาวโลก ภาษาไทย",
  "வணக்கம் உலகம் தமிழ்",
  "Tiếng Việt có dấu: Xin chào thế giới",
  "ქართული ენა, Հայերեն, አማርኛ",
  "Emoji: 🙂😀🎉👍🏽👨‍👩‍👧‍👦🇫🇷🏳️‍🌈 ❤️ ✨",
  "def f(x):\n    return x**2 + 1  # comment\n\n\nclass A:\n\tpass\n",
  "int main(int argc, char** argv) {\n  printf(\"%d\\n\", argc);\n  return 0;\n}\n",
  "for (let i = 0; i < 10; i++) { console.log(`i=${i}`); }",
  "<html><body><div class=\"x\">Hi &amp; bye</div></body></html>",
  "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
  "https://example.com/path?query=1&x=y#frag user@mail.org",
  "a                                                  b",
  "x\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\ny",
  "\t\t\t\t\tindent\t\t\t",
  "trailing spaces   \n   leading spaces",
  "   \n\n   \n",
  "!!!???...,,,;;;:::---___===+++***&&&%%%$$$###@@@",
  "e\u0301 a\u0300 o\u0308 n\u0303 A\u030A e\u0301\u0327 \u1100\u1161\u11A8",
  "x\u0301\u0301\u0301 \u0301 \u0301abc 1\u0301 .\u0301 ",
  "ſtreet 'ſ K Å ﬁ ﬀ ㎏ ①",
  "'ſtreet 'ſt 'Kelvin 'ſll x'ſ 'İs 'ıs",
  "zero\u200bwidth\u200cjoiner\u200d nbsp\u00a0here \u3000ideographic \u2003em",
  "mixed123abc456 ABC-DEF_ghi.jkl",
  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
  "ààààààààààààààààààààààààààààààà",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉 \ud83d\ude00",
  "¡Hola! ¿Qué tal? Ça va? Grüß Gott! Dziękuję. Ελληνικά. Türkçe ığüşöç",
];

const pools = [
  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
  "0123456789",
  "     \t\n\n\r",
  ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
  "àéîõüçñßøåæœÀÉÎÕÜÇÑ",
  "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
  "的一是不了人我在有他这为之大来以个中上们",
  "あいうえおかきくけこアイウエオ",
  "가나다라마바사아자차카타파하",
  "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
  "\u0300\u0301\u0302\u0303\u0308\u0327\u064b\u0951\u093f\u0e31",
  "🙂😀🎉👍❤️✨🚀",
  "½¾²³①ⅫⅦ٣४",
];

export function buildCorpus() {
  const r = rng(12345);
  const random = [];
  for (let k = 0; k < 300; k++) {
    const len = 1 + Math.floor(r() * 60);
    let s = "";
    for (let i = 0; i < len; i++) {
      const pool = Array.from(pools[Math.floor(r() * pools.length)]);
      s += pool[Math.floor(r() * pool.length)];
    }
    random.push(s);
  }
  // Longer mixed paragraphs.
  for (let k = 0; k < 20; k++) {
    let s = "";
    for (let i = 0; i < 30; i++) s += fixed[5 + Math.floor(r() * (fixed.length - 5))] + (r() < 0.3 ? "\n" : " ");
    random.push(s);
  }
  const common = [...fixed, ...random];
  const qwenSpecial = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHi!<|im_end|>",
    "<|endoftext|><|endoftext|>text<|im_end|>",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "a<|im_start|>b<|im_end|>c <|im_end|> <|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>",
    "<|im_end", "<|im_end|", "<|im_start|><|im_start|>",
  ];
  const gemmaSpecial = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi<end_of_turn>",
    "<bos>text<eos>", "<pad><unk><mask>", "<start_of_image>x<end_of_image>",
    "<unused0> <unused99>x", "<start_of_turn", "<<start_of_turn>>",
  ];
  return { common, qwenSpecial, gemmaSpecial };
}
