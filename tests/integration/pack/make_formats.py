"""Writes an image folder of every format torchvision's ImageFolder takes, for test_pack_formats.sh.
usage: make_formats.py OUT
Classes "a" and "b", each with JPEG, PNG, BMP (24-bit, palette, 1-bit), WebP (lossy, lossless,
with alpha), TIFF (plain, LZW), PPM and PGM files, grey ones among them (a grey JPEG, PNG, PGM,
TIFF and a 1-bit BMP: 5 per class, which ImageFolder converts to RGB), and files it leaves out (a
.txt and a .gif per class). All 32x32; the first file of each class is RGB."""
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
rng = np.random.default_rng(11)


def pixels(mode):
    # Smooth noise: lossy codecs on pure noise are extreme; this is more photo-like.
    bands = 1 if mode in ("L", "1") else len(mode)
    small = rng.integers(0, 256, size=(9, 9, bands), dtype=np.uint8)
    img = Image.fromarray(small.squeeze(), "L" if bands == 1 else mode).resize((32, 32), Image.BILINEAR)
    arr = np.asarray(img).astype(int) + rng.integers(-20, 21, size=np.asarray(img).shape)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L" if bands == 1 else mode)


for cls in ["a", "b"]:
    d = os.path.join(out, cls)
    os.makedirs(d)
    pixels("RGB").save(os.path.join(d, "0rgb.jpg"), quality=90)
    pixels("L").save(os.path.join(d, "grey.jpg"), quality=90)
    pixels("L").save(os.path.join(d, "grey.png"))
    pixels("RGB").save(os.path.join(d, "rgb.bmp"))
    pixels("RGB").quantize(16).save(os.path.join(d, "palette.BMP"))
    pixels("L").convert("1").save(os.path.join(d, "onebit.bmp"))
    pixels("RGB").save(os.path.join(d, "lossy.webp"), quality=80)
    pixels("RGB").save(os.path.join(d, "lossless.webp"), lossless=True)
    pixels("RGBA").save(os.path.join(d, "alpha.webp"), lossless=True)
    pixels("RGB").save(os.path.join(d, "rgb.tif"))
    pixels("RGB").save(os.path.join(d, "lzw.tiff"), compression="tiff_lzw")
    pixels("L").save(os.path.join(d, "grey.tif"))
    pixels("RGB").save(os.path.join(d, "rgb.ppm"))
    pixels("L").save(os.path.join(d, "grey.pgm"))
    pixels("RGB").save(os.path.join(d, "left_out.gif"))
    with open(os.path.join(d, "readme.txt"), "w") as f:
        f.write("not an image\n")
