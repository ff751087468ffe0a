#!/usr/bin/env python3
"""torchvision's input pipeline on an image folder, for bench/loader_compare.sh: ImageFolder (PIL
decode) + RandomResizedCrop(SIZE) + RandomHorizontalFlip + ToTensor + Normalize (ImageNet's
mean/std), DataLoader(batch, shuffle). One untimed epoch, then EPOCHS timed ones; prints images/s.
--workers 0 does everything on the main thread (one thread, as ddp_loader_bench's one loader
thread); with --workers W > 0 the workers are persistent (started once, outside the timing), and
the CPU time printed is the main process's only (the workers' is not counted).
"""
import argparse
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = ImageFolder(a.folder, transform=tf)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                    persistent_workers=a.workers > 0)
    images, seconds, cpu, check = 0, 0.0, 0.0, 0.0
    for e in range(a.epochs + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        n = 0
        for x, y in dl:
            n += x.shape[0]
            check += float(x[0, 0, 0, 0])
        s, c = time.perf_counter() - t0, time.process_time() - c0
        if e > 0:
            images += n
            seconds += s
            cpu += c
    print("torch_loader: %d images (%d epochs of %d), %dx%d, batch %d, %d worker(s): %.3f s, "
          "%.1f images/s, %.1f images per CPU s (main process)"
          % (images, a.epochs, len(ds), a.size, a.size, a.batch, a.workers, seconds,
             images / seconds, images / cpu))
    print("csv,torch,%d,%.3f,%.3f" % (a.workers, images / seconds, images / cpu))


if __name__ == "__main__":
    main()
