"""Outside oracle for data_resized_crop_test.cpp: torchvision 0.14's transforms on PIL images.

Reads commands, one per line, from the file named by argv[1]; writes results next to it:
  image SEED H W C OUT.(png|jpg)    a smooth random image (PNG lossless, JPEG quality 90)
  resized_crop IN TOP LEFT H W OH OW OUT.bin    F.resized_crop(..., BILINEAR), CHW bytes
  eval IN RESIZE CROP OUT.bin       CenterCrop(CROP)(Resize(RESIZE)(img)), CHW bytes
  fallback H W SMIN SMAX OUT.txt    RandomResizedCrop.get_params with that scale: "top left h w"
  stats H W N OUT.txt               mean area fraction and mean log aspect ratio over N draws
"""
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F


def chw(img):
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[:, :, None]
    return np.ascontiguousarray(a.transpose(2, 0, 1)).tobytes()


def make_image(seed, h, w, c, out):
    # Smooth content (a few low-frequency waves plus a little noise), as photographs are, so that
    # JPEG and scaled decoding behave as on real images.
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = []
    for _ in range(c):
        fy, fx, ph = rng.uniform(0.01, 0.08), rng.uniform(0.01, 0.08), rng.uniform(0, 6.3)
        v = 128 + 90 * np.sin(fy * y + ph) * np.cos(fx * x) + rng.normal(0, 8, (h, w))
        planes.append(np.clip(v, 0, 255).astype(np.uint8))
    a = planes[0] if c == 1 else np.stack(planes, axis=2)
    img = Image.fromarray(a, "L" if c == 1 else "RGB")
    if out.endswith(".jpg"):
        img.save(out, quality=90)
    else:
        img.save(out)


def main():
    torch.manual_seed(0)
    for line in open(sys.argv[1]):
        cmd, *a = line.split()
        if cmd == "image":
            make_image(int(a[0]), int(a[1]), int(a[2]), int(a[3]), a[4])
        elif cmd == "resized_crop":
            img = Image.open(a[0])
            top, left, h, w, oh, ow = map(int, a[1:7])
            out = F.resized_crop(img, top, left, h, w, [oh, ow], InterpolationMode.BILINEAR)
            open(a[7], "wb").write(chw(out))
        elif cmd == "eval":
            img = Image.open(a[0])
            t = T.Compose([T.Resize(int(a[1])), T.CenterCrop(int(a[2]))])
            open(a[3], "wb").write(chw(t(img)))
        elif cmd == "fallback":
            h, w = int(a[0]), int(a[1])
            img = Image.new("L", (w, h))
            box = T.RandomResizedCrop.get_params(img, [float(a[2]), float(a[3])], [3 / 4, 4 / 3])
            open(a[4], "w").write(" ".join(map(str, box)))
        elif cmd == "stats":
            h, w, n = int(a[0]), int(a[1]), int(a[2])
            img = Image.new("L", (w, h))
            frac, logr = 0.0, 0.0
            for _ in range(n):
                _, _, bh, bw = T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
                frac += bh * bw / (h * w)
                logr += np.log(bw / bh)
            open(a[3], "w").write(f"{frac / n} {logr / n}")
        else:
            raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
