#!/usr/bin/env python3
"""An ImageFolder of JPEGs of realistic size for bench/loader_compare.sh: CLASSES folders of
PER_CLASS images each, sides drawn around ImageNet's typical 500x375 (width 400-500, height
300-375, so the sizes vary and the loader must decode every image per batch). Content: CIFAR-10
images upscaled (bicubic) with a little Gaussian noise for texture (real photographs' JPEG sizes and
decode costs), or smooth random patterns with noise when CIFAR-10 is not at --cifar. Quality 90.

  make_jpeg_folder.py OUT_DIR [--classes 4] [--per-class 128] [--cifar DIR] [--seed 1]
"""
import argparse
import os

import numpy as np
from PIL import Image


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--per-class", type=int, default=128)
    ap.add_argument("--cifar", default="")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    n = a.classes * a.per_class
    src = None
    path = os.path.join(a.cifar, "data_batch_1.bin")
    if a.cifar and os.path.exists(path):
        raw = np.fromfile(path, dtype=np.uint8).reshape(-1, 3073)[:n]
        src = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    print("content:", "CIFAR-10 upscaled" if src is not None else "random smooth patterns")
    total = 0
    for c in range(a.classes):
        d = os.path.join(a.out, "class_%02d" % c)
        os.makedirs(d, exist_ok=True)
        for i in range(a.per_class):
            k = c * a.per_class + i
            w, h = int(rng.integers(400, 501)), int(rng.integers(300, 376))
            if src is not None:
                small = Image.fromarray(src[k])
            else:
                small = Image.fromarray(rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8))
            x = np.asarray(small.resize((w, h), Image.BICUBIC), dtype=np.float32)
            x += rng.normal(0, 12, size=x.shape)
            img = Image.fromarray(np.clip(x, 0, 255).astype(np.uint8))
            f = os.path.join(d, "img_%04d.jpg" % i)
            img.save(f, quality=90)
            total += os.path.getsize(f)
    print("%d JPEGs in %d classes, %.1f MB, mean %.0f KB" % (n, a.classes, total / 1e6, total / n / 1e3))


if __name__ == "__main__":
    main()
