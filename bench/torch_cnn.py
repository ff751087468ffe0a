#!/usr/bin/python3
"""PyTorch 1.13 side of bench/cnn_compare.sh: the ddp_train presets resnet20 (He et al. 2016 CIFAR
net, projection shortcuts), resnet18 with the CIFAR stem (3x3 stride-1 conv1, no max pool) and
torchvision's mobilenet_v2, trained on synthetic CIFAR-shaped data (3x32x32, 10 classes) with SGD
momentum 0.9, in train mode. Prints images/s.

  /usr/bin/python3 bench/torch_cnn.py --model resnet20 --batch 128 --threads 2 --steps 20
  /usr/bin/python3 bench/torch_cnn.py --model resnet20 --batch 128 --world 2 --steps 20   # DDP gloo,
                                                                      # 2 processes x 1 thread
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torchvision


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + idt)


class CifarResNet(nn.Module):
    """resnet20 (n=3) / resnet56 (n=9): 16-32-64 channels, global average pooling, fc."""

    def __init__(self, n, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        layers, cin = [], 16
        for i, cout in enumerate((16, 32, 64)):
            blocks = [BasicBlock(cin, cout, 1 if i == 0 else 2)]
            blocks += [BasicBlock(cout, cout, 1) for _ in range(n - 1)]
            layers.append(nn.Sequential(*blocks))
            cin = cout
        self.layer1, self.layer2, self.layer3 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(name):
    if name == "resnet20":
        return CifarResNet(3)
    if name == "resnet56":
        return CifarResNet(9)
    if name == "resnet18":
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # the CIFAR stem
        m.maxpool = nn.Identity()
        return m
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(num_classes=10)
    raise SystemExit(f"unknown model {name}")


def train(model, batch, steps, warmup=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for i in range(steps + warmup):
        if i == warmup:
            if dist.is_initialized():
                dist.barrier()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    if dist.is_initialized():
        dist.barrier()
    return time.perf_counter() - t0


def worker(rank, world, a, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29541"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(build(a.model))
    s = train(model, a.batch, a.steps)
    if rank == 0:
        out.put(world * a.batch * a.steps / s)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet20",
                    choices=("resnet20", "resnet56", "resnet18", "mobilenet_v2"))
    ap.add_argument("--batch", type=int, default=128, help="per process")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--world", type=int, default=1, help="> 1: DDP on gloo, 1 thread each")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    if a.world > 1:
        q = mp.get_context("spawn").Queue()
        mp.spawn(worker, args=(a.world, a, q), nprocs=a.world, join=True)
        img_s = q.get()
    else:
        torch.set_num_threads(a.threads)
        torch.manual_seed(0)
        img_s = a.batch * a.steps / train(build(a.model), a.batch, a.steps)
    print(f"{a.model} torch {torch.__version__} world {a.world} threads "
          f"{1 if a.world > 1 else a.threads} batch {a.batch}: {img_s:.1f} img/s")


if __name__ == "__main__":
    main()
