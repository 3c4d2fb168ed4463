# Synthetic test images for the multimodal e2e tests (Pillow): each NAME:WxH is written to DIR/NAME
# (format from the extension), in the order given, with one pseudo-random stream seeded 5, so a
# list of images gives the same pixels on every run: red and green channels from the coordinates
# (so resizes and crops change them visibly), blue random.
# Usage: synth_images.py DIR NAME:WxH...
import random
import sys

from PIL import Image


def img(w, h):
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 7 + y * 3) % 256, (x * y) % 256, random.randrange(256))
    return im


random.seed(5)
for spec in sys.argv[2:]:
    name, size = spec.split(":")
    w, h = (int(v) for v in size.split("x"))
    img(w, h).save(sys.argv[1] + "/" + name)
