"""Writes an image folder full of ordering traps for test_pack_imagefolder.sh.
usage: make_folder.py OUT [mixed]
Classes "10", "9", "Zebra", "a b", "cat" (digits, upper case, a space); in "cat", files and nested
directories whose sorted(os.walk) order is not a depth-first walk ("sub b/" and "sub-b/" before
"sub/z/"), mixed-case extensions, an RGBA PNG and a file that is not an image. All RGB 32x32,
unless `mixed`: then sizes vary (for --size)."""
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
mixed = len(sys.argv) > 2 and sys.argv[2] == "mixed"
rng = np.random.default_rng(5)


def image(path, mode="RGB", size=(32, 32)):
    if mixed:
        size = (int(rng.integers(20, 70)), int(rng.integers(20, 70)))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Smooth noise: JPEG artefacts on pure noise are extreme; this is more photo-like.
    small = rng.integers(0, 256, size=(size[1] // 4 + 1, size[0] // 4 + 1, len(mode)), dtype=np.uint8)
    arr = np.asarray(Image.fromarray(small.squeeze(), mode if mode != "RGBA" else "RGBA")
                     .resize(size, Image.BILINEAR))
    arr = np.clip(arr.astype(int) + rng.integers(-20, 21, size=arr.shape), 0, 255).astype(np.uint8)
    img = Image.fromarray(arr, mode)
    if path.lower().endswith((".jpg", ".jpeg")):
        img.save(path, format="JPEG", quality=90)
    else:
        img.save(path, format="PNG")


for cls in ["10", "9", "Zebra", "a b"]:
    for name in ["1.png", "10.png", "2.JPG", "b.Jpeg"]:
        image(os.path.join(out, cls, name))
cat = os.path.join(out, "cat")
for rel in ["z.png", "A.jpg", "sub/z/deep.png", "sub/a.JPEG", "sub b/x.png", "sub-b/y.jpg",
            "sub/b.PNG", "_x/q.jpg"]:
    image(os.path.join(cat, rel))
image(os.path.join(cat, "alpha.png"), mode="RGBA")
with open(os.path.join(cat, "notes.txt"), "w") as f:
    f.write("not an image\n")
with open(os.path.join(cat, "photo.gif"), "w") as f:
    f.write("GIF89a: an extension we do not take\n")
