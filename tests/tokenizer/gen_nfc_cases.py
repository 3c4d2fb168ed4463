#!/usr/bin/env python3
# Writes nfc_cases.txt: NFC test cases computed by python3's unicodedata.normalize (an independent
# implementation of the algorithm). One case per line: "<input hex cps>;<expected hex cps>".
# Run: python3 gen_nfc_cases.py > nfc_cases.txt
import random
import unicodedata as ud

random.seed(7)
decomposable = [c for c in range(0x110000)
                if not (0xD800 <= c <= 0xDFFF) and ud.decomposition(chr(c)) and not ud.decomposition(chr(c)).startswith('<')]
marks = [c for c in range(0x300, 0x370)] + [0x0323, 0x0328, 0x0345, 0x05B0, 0x0651, 0x093C, 0x094D, 0x0E38,
                                            0x1DC0, 0x20D0, 0x302A, 0x3099, 0x309A, 0x1D165, 0x1D16E]
bases = [ord(c) for c in "aeiouAEIOUcnszCNSZ"] + [0x3B1, 0x3B7, 0x3C9, 0x415, 0x438, 0x1100, 0x1161, 0x11A8,
                                                   0xAC00, 0xAC01, 0x304B, 0x30AB, 0x0B47, 0x0DD9, 0x1025]
cases = []
for c in decomposable:
    s = chr(c)
    cases.append(s)
    cases.append(ud.normalize('NFD', s))
for _ in range(3000):
    n = random.randint(1, 8)
    s = ''.join(chr(random.choice(bases + marks + decomposable[:400] + [0x20, 0x41]))
                for _ in range(n))
    cases.append(s)
# Hangul: L V T sequences and syllables with trailing T.
for l in range(0x1100, 0x1113, 3):
    for v in range(0x1161, 0x1176, 4):
        cases.append(chr(l) + chr(v))
        cases.append(chr(l) + chr(v) + chr(0x11A8 + (l + v) % 27))
for s in range(0xAC00, 0xD7A4, 97):
    cases.append(chr(s) + chr(0x11AF))
out = []
for s in cases:
    e = ud.normalize('NFC', s)
    out.append(' '.join('%X' % ord(c) for c in s) + ';' + ' '.join('%X' % ord(c) for c in e))
print('\n'.join(out))
