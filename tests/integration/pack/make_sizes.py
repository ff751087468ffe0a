"""Writes an image folder of JPEGs of varying sizes for test_augment_sizes.sh.
usage: make_sizes.py OUT N_PER_CLASS SEED
Three classes; sides from 40 to 260 pixels (so random-resized crops to 32 take both the full and
TurboJPEG's scaled decoding), smooth photo-like content, quality 90."""
import os
import sys

import numpy as np
from PIL import Image

out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
for c, name in enumerate(["ant", "bee", "cow"]):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for i in range(n):
        w, h = int(rng.integers(40, 261)), int(rng.integers(40, 261))
        small = rng.integers(0, 256, size=(h // 8 + 2, w // 8 + 2, 3), dtype=np.uint8)
        small[..., c] = 200  # a class colour, so the net has something to learn
        arr = np.asarray(Image.fromarray(small).resize((w, h), Image.BILINEAR)).astype(int)
        arr = np.clip(arr + rng.integers(-10, 11, size=arr.shape), 0, 255).astype(np.uint8)
        Image.fromarray(arr).save(os.path.join(out, name, "%03d.jpg" % i), quality=90)
