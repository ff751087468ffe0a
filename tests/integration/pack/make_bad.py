"""Bad inputs for test_pack_errors.sh, under OUT:
  good/<a,b>/*.png      a small good RGB folder (32x32)
  corrupt/<a,b>/...     the same with one JPEG cut short and overwritten in the middle
  grey/<a,b>/...        an RGB folder holding one greyscale PNG
  empty/<a,b,c>/...     class folder c holds only a text file
  sizes/<a,b>/...       images of two sizes (raw without --size)
  small/<a,b>/*.png     8x8 RGB images (too small for LeNet)
  list_missing.csv, list_label.csv, list_columns.csv    CSV lists with one bad row each (line 3)
usage: make_bad.py OUT"""
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
rng = np.random.default_rng(9)


def image(path, size=32, mode="RGB", fmt=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shape = (size, size, 3) if mode == "RGB" else (size, size)
    Image.fromarray(rng.integers(0, 256, size=shape, dtype=np.uint8), mode).save(path, format=fmt)


for folder in ["good", "corrupt", "grey", "empty", "sizes"]:
    for cls in ["a", "b"]:
        for i in range(4):
            image(os.path.join(out, folder, cls, "%d.png" % i))
for cls in ["a", "b"]:
    for i in range(4):
        image(os.path.join(out, "small", cls, "%d.png" % i), size=8)
image(os.path.join(out, "corrupt", "b", "2.jpg"), fmt="JPEG")
path = os.path.join(out, "corrupt", "b", "2.jpg")
data = bytearray(open(path, "rb").read())
data[len(data) // 2:] = b"\x00" * 16  # cut short after garbage: a corrupt, truncated scan
open(path, "wb").write(bytes(data))
image(os.path.join(out, "grey", "b", "1.png"), mode="L")
os.makedirs(os.path.join(out, "empty", "c"))
open(os.path.join(out, "empty", "c", "readme.txt"), "w").write("no images here\n")
image(os.path.join(out, "sizes", "b", "3.png"), size=40)
rows = ["path,label", "good/a/0.png,a", "good/a/1.png,a", "good/b/0.png,b"]
for name, bad in [("missing", "good/b/nothing.png,b"), ("label", "good/b/1.png,"),
                  ("columns", "good/b/1.png,b,extra")]:
    with open(os.path.join(out, "list_%s.csv" % name), "w") as f:
        f.write("\n".join(rows[:3] + [bad] + rows[3:]) + "\n")
