#!/usr/bin/python3
"""How far fp32 gradients of a torchvision net are from fp64 ones, per layer: the noise floor that
tests/unit/cuda_model_test.cpp's GradTolerance for MobileNetV2 rests on (GPU and CPU are two fp32
computations; they cannot agree more closely than fp32 agrees with exact arithmetic).

One forward and backward in train mode (batch statistics) of mobilenet_v2 with the cifar stem
(first convolution stride 1) and without dropout, on a random N(0,1) batch of 16 at 32x32 with
random labels, in fp32 and fp64 from the same weights; then 3 SGD steps (momentum 0.9, weight
decay 5e-4) at lr 0.05, and the largest parameter difference in units of the GPU test's tolerance
(2e-4 of the largest |parameter| plus 1e-3 of each).

  /usr/bin/python3 bench/fp32_gradient_noise.py [--model mobilenet_v2] [--seeds 3,4,5,15,17]
"""
import argparse
import copy

import torch
import torchvision


def build(name, seed):
    torch.manual_seed(seed)
    m = getattr(torchvision.models, name)(num_classes=10)
    if name == "mobilenet_v2":
        m.features[0][0].stride = (1, 1)  # the cifar stem
        m.classifier[0] = torch.nn.Identity()  # no dropout: both precisions see the same net
    m.train()
    return m


def gradients(m, x, y, dtype):
    mm = copy.deepcopy(m).to(dtype)
    torch.nn.functional.cross_entropy(mm(x.to(dtype)), y).backward()
    return {n: p.grad.double() for n, p in mm.named_parameters()}


def layer_stats(m, x, y):
    g64, g32 = gradients(m, x, y, torch.float64), gradients(m, x, y, torch.float32)
    layers = {}
    for n in g64:
        layers.setdefault(n.rsplit(".", 1)[0], []).append(n)
    worst_l2, worst_name, worst_elem = 0.0, "", 0.0
    for layer, names in layers.items():
        a = torch.cat([g64[n].flatten() for n in names])
        b = torch.cat([g32[n].flatten() for n in names])
        l2 = ((a - b).norm() / a.norm()).item()
        if l2 > worst_l2:
            worst_l2, worst_name = l2, layer
        worst_elem = max(worst_elem, ((a - b).abs().max() / a.abs().max()).item())
    a = torch.cat([g64[n].flatten() for n in g64])
    b = torch.cat([g32[n].flatten() for n in g64])
    return worst_l2, worst_name, ((a - b).norm() / a.norm()).item(), worst_elem


def steps_apart(m, seed, steps=3, lr=0.05):
    gen = torch.Generator().manual_seed(seed + 1000)
    xs = [torch.randn(16, 3, 32, 32, generator=gen) for _ in range(steps)]
    ys = [torch.randint(0, 10, (16,), generator=gen) for _ in range(steps)]
    params = {}
    for dtype in (torch.float32, torch.float64):
        mm = copy.deepcopy(m).to(dtype)
        opt = torch.optim.SGD(mm.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
        for x, y in zip(xs, ys):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(mm(x.to(dtype)), y).backward()
            opt.step()
        params[dtype] = torch.cat([p.detach().double().flatten() for p in mm.parameters()])
    p32, p64 = params[torch.float32], params[torch.float64]
    allowed = 2e-4 * p64.abs().max() + 1e-3 * p64.abs()
    return ((p32 - p64).abs() / allowed).max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--seeds", default="3,4,5,15,17")
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print("seed  worst layer (L2)                          all params (L2)  elementwise  3 steps apart (x tolerance)")
    for seed in (int(s) for s in args.seeds.split(",")):
        m = build(args.model, seed)
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(16, 3, 32, 32, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        wl2, wname, all_l2, elem = layer_stats(m, x, y)
        print(f"{seed:4d}  {wl2:7.2%} {wname:33s} {all_l2:8.2%}       {elem:8.2%}     {steps_apart(m, seed):8.0f}")


if __name__ == "__main__":
    main()
