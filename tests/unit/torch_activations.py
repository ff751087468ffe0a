#!/usr/bin/env python3
"""PyTorch's activations as the outside oracle of activation_torch_test.cpp.

usage: torch_activations.py DIR NAME...

Reads DIR/x.f32 and DIR/dy.f32 (float32, the same length) and, for each layer type NAME, writes
DIR/NAME.y.f64 and DIR/NAME.dx.f64: torch's forward and input gradient (dy times the derivative,
torch's autograd) evaluated in float64 on those float32 values. leaky_relu uses the slope in
DIR/slope.txt. A NAME without a torch counterpart here is an error (exit 3), so that a new
activation type cannot go unchecked.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

d, names = sys.argv[1], sys.argv[2:]
slope = float(open(os.path.join(d, "slope.txt")).read())
functions = {
    "relu": F.relu,
    "relu6": F.relu6,
    "leaky_relu": lambda t: F.leaky_relu(t, slope),
    "gelu": F.gelu,  # approximate="none": the erf form
    "silu": F.silu,
    "hardswish": F.hardswish,
}
unknown = [n for n in names if n not in functions]
if unknown:
    print(f"torch_activations.py: no torch counterpart for {unknown}: add it to {__file__}",
          file=sys.stderr)
    sys.exit(3)
x = np.fromfile(os.path.join(d, "x.f32"), dtype=np.float32).astype(np.float64)
dy = np.fromfile(os.path.join(d, "dy.f32"), dtype=np.float32).astype(np.float64)
for name in names:
    t = torch.tensor(x, requires_grad=True)
    y = functions[name](t)
    y.backward(torch.tensor(dy))
    y.detach().numpy().astype(np.float64).tofile(os.path.join(d, f"{name}.y.f64"))
    t.grad.numpy().astype(np.float64).tofile(os.path.join(d, f"{name}.dx.f64"))
