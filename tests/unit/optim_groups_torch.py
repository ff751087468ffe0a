#!/usr/bin/env python3
"""The oracle of optim_groups_test.cpp's TwoStepsEqualTorchOptimWithTheSameParamGroups: torch.optim
with four param groups over six toy parameters (fc.*: lr x10, no weight decay; bn: no weight
decay; *.bias: lr x2; the rest: lr 0.1, weight decay 0.01, SGD momentum 0.9), two steps at base
learning rates 0.1 and 0.05 (a schedule scales every group: each group's lr = its factor x the
base). Prints the weights after the two steps, as C++ float literals. Run with /usr/bin/python3
(python3-torch)."""
import torch

SIZES = [("conv1.weight", 4), ("conv1.bias", 2), ("bn1.weight", 2), ("bn1.bias", 2),
         ("fc.weight", 6), ("fc.bias", 2)]
N = sum(s for _, s in SIZES)
W0 = [0.1 * (i + 1) * (-1) ** i for i in range(N)]
G1 = [0.05 * ((i * 7) % 5 - 2) for i in range(N)]
G2 = [0.03 * ((i * 3) % 4 - 1.5) for i in range(N)]


def run(name, nesterov=False):
    params, off = {}, 0
    for key, size in SIZES:
        params[key] = torch.nn.Parameter(torch.tensor(W0[off:off + size], dtype=torch.float32))
        off += size
    groups = [(dict(params=[params["fc.weight"], params["fc.bias"]], weight_decay=0.0), 10.0),
              (dict(params=[params["bn1.weight"], params["bn1.bias"]], weight_decay=0.0), 1.0),
              (dict(params=[params["conv1.bias"]]), 2.0),
              (dict(params=[params["conv1.weight"]]), 1.0)]
    pgs = [g for g, _ in groups]
    if name == "sgd":
        opt = torch.optim.SGD(pgs, lr=0.1, momentum=0.9, nesterov=nesterov, weight_decay=0.01)
    else:
        opt = (torch.optim.Adam if name == "adam" else torch.optim.AdamW)(pgs, lr=0.1,
                                                                          weight_decay=0.01)
    for base, grads in ((0.1, G1), (0.05, G2)):
        for pg, (_, mult) in zip(opt.param_groups, groups):
            pg["lr"] = base * mult
        off = 0
        for key, size in SIZES:
            params[key].grad = torch.tensor(grads[off:off + size], dtype=torch.float32)
            off += size
        opt.step()
    values = [v for key, _ in SIZES for v in params[key].detach().tolist()]
    print(name, "nesterov" if nesterov else "", ", ".join("%.9gf" % v for v in values))


run("sgd")
run("sgd", nesterov=True)
run("adam")
run("adamw")
