#!/usr/bin/python3
"""PyTorch 1.13 side of bench/cifar_accuracy.sh: trains ResNet-20 on the real CIFAR-10 binary
files with the recipe of configs/cifar_resnet20.toml, as a PyTorch user would write it, and prints
each epoch's training loss and test accuracy as JSON lines.

Recipe (the same as the config): batch 128, SGD with Nesterov momentum 0.9, weight decay 5e-4 on
convolution and linear weights only (batch-norm weights and all biases excluded), one-cycle
learning rate (peak 0.2, pct_start 0.25, div_factor 10, final_div_factor 100, cosine, momentum not
cycled: ddp_train keeps it fixed), label smoothing 0.1, random 32x32 crops of the image zero-padded
by 4 and horizontal flips, per-channel normalisation, torchvision's initialisation of the net.

  /usr/bin/python3 bench/torch_cifar_recipe.py --data ../shared/data/cifar-10-batches-bin \
      --epochs 5 --threads 2 --seed 42
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_cnn import CifarResNet

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def read_cifar(root, files):
    raw = b"".join(open(os.path.join(root, f), "rb").read() for f in files)
    rec = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(-1, 3073)
    return rec[:, 1:].reshape(-1, 3, 32, 32).clone(), rec[:, 0].long()


def normalise(x_u8):
    x = x_u8.float().div_(255.0)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (x - mean) / std


def augment(x_u8, gen):
    """torchvision's RandomCrop(32, padding=4) then RandomHorizontalFlip, per sample."""
    n = x_u8.shape[0]
    padded = F.pad(x_u8, (4, 4, 4, 4))  # zero (black) padding, as RandomCrop's default fill
    offs = torch.randint(0, 9, (n, 2), generator=gen)
    flips = torch.rand(n, generator=gen) < 0.5
    out = torch.empty_like(x_u8)
    for i in range(n):
        dy, dx = int(offs[i, 0]), int(offs[i, 1])
        img = padded[i, :, dy:dy + 32, dx:dx + 32]
        out[i] = img.flip(-1) if flips[i] else img
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)

    xtr, ytr = read_cifar(a.data, [f"data_batch_{i}.bin" for i in range(1, 6)])
    xte, yte = read_cifar(a.data, ["test_batch.bin"])
    xte = normalise(xte)

    model = CifarResNet(3)
    # torchvision's ResNet initialisation, as the resnet20 preset does: Kaiming-normal (fan_out)
    # convolutions, batch norm weight 1 and bias 0, the classifier left at PyTorch's default.
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=0.2, momentum=0.9, nesterov=True)
    steps = (len(ytr) + a.batch - 1) // a.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.2, total_steps=steps * a.epochs, pct_start=0.25, div_factor=10.0,
        final_div_factor=100.0, anneal_strategy="cos", cycle_momentum=False)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)

    for epoch in range(a.epochs):
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(len(ytr), generator=gen)
        loss_sum, seen = 0.0, 0
        for s in range(steps):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            x = normalise(augment(xtr[idx], gen))
            y = ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += float(loss) * len(y)
            seen += len(y)
        train_s = time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad():
            for s in range(0, len(yte), 500):
                correct += int((model(xte[s:s + 500]).argmax(1) == yte[s:s + 500]).sum())
        print(json.dumps({"epoch": epoch + 1, "train_loss": loss_sum / seen,
                          "test_acc": correct / len(yte), "epoch_s": train_s}), flush=True)


if __name__ == "__main__":
    main()
