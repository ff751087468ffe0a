#!/usr/bin/env python3
"""PyTorch (1.13) as the outside oracle of the speed-run recipe features' unit tests.

usage: recipe_torch.py COMMAND DIR

DIR holds spec.txt (key = value lines) and raw little-endian arrays; each command writes its answer
into DIR:
  dirac    cases; per case i: shape<i> (4 ints), groups<i>; base<i>.f32 (the weight before) ->
           dirac<i>.f32 = torch.nn.init.dirac_(empty, groups), partial<i>.f32 = base with
           torch.nn.init.dirac_(w[:w.size(1)]) (airbench's Conv)
  eigh     n; a.f64 (n x n) -> values.f64 ascending, vectors.f64 (row i: eigenvector i, its
           largest-magnitude entry made positive) from torch.linalg.eigh(UPLO='U') in float64
  whiten   shape (n c h w), kernels (kh kw pairs), eps; images.f32 -> filters<i>.f64: airbench94's
           get_patches / get_whitening_parameters / init_whitening_conv in float64, each
           eigenvector signed as for eigh
  view     shape (n c h w), views (dy dx flip triples); images.f32 -> view<i>.f32: F.pad(reflect)
           by each axis's shift, the crop, then .flip(-1)
  tta      shape, classes, cases (level shift pairs, level 1 or 2); images.f32,
           conv_w/conv_b/fc_w/fc_b.f32 (the net conv3x3 pad 1 -> relu -> maxpool 2 -> flatten ->
           linear) -> logits<i>.f32 by airbench94's infer_mirror / infer_mirror_translate with
           pad = shift
  ema      steps, count, decay, every, start, ramp, total; seq.f32 (steps x count: the weights
           after each step) -> ema.f32 (the average after the last step, torch.lerp_ in float32)
           and updates.txt
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

cmd, d = sys.argv[1], sys.argv[2]
spec = {}
for line in open(os.path.join(d, "spec.txt")):
    if "=" in line:
        k, v = line.split("=", 1)
        spec[k.strip()] = v.split()


def ints(key):
    return [int(x) for x in spec[key]]


def floats(key):
    return [float(x) for x in spec[key]]


def load(name, dtype, shape):
    return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=dtype).reshape(shape))


def save(name, t, dtype):
    np.ascontiguousarray(t.detach().numpy().astype(dtype)).tofile(os.path.join(d, name))


def signed(vectors):
    """Rows made to have their largest-magnitude entry positive (the first of equal ones)."""
    out = vectors.clone()
    for i in range(out.shape[0]):
        j = int(torch.argmax(out[i].abs()))
        if out[i, j] < 0:
            out[i] = -out[i]
    return out


if cmd == "dirac":
    for i in range(ints("cases")[0]):
        shape, groups = ints(f"shape{i}"), ints(f"groups{i}")[0]
        w = torch.empty(shape)
        torch.nn.init.dirac_(w, groups)
        save(f"dirac{i}.f32", w, np.float32)
        base = load(f"base{i}.f32", np.float32, shape).clone()
        torch.nn.init.dirac_(base[: base.size(1)])
        save(f"partial{i}.f32", base, np.float32)
elif cmd == "eigh":
    n = ints("n")[0]
    a = load("a.f64", np.float64, (n, n))
    values, vectors = torch.linalg.eigh(a, UPLO="U")
    save("values.f64", values, np.float64)
    save("vectors.f64", signed(vectors.T), np.float64)
elif cmd == "whiten":
    n, c, h, w = ints("shape")
    kernels = ints("kernels")
    eps = floats("eps")[0]
    x = load("images.f32", np.float32, (n, c, h, w)).double()
    for i in range(len(kernels) // 2):
        kh, kw = kernels[2 * i], kernels[2 * i + 1]
        # airbench94.py's get_patches and get_whitening_parameters, in float64.
        patches = x.unfold(2, kh, 1).unfold(3, kw, 1).transpose(1, 3).reshape(-1, c, kh, kw)
        flat = patches.reshape(patches.shape[0], -1)
        cov = (flat.T @ flat) / flat.shape[0]
        values, vectors = torch.linalg.eigh(cov, UPLO="U")
        rows = signed(vectors.T)
        values, rows = values.flip(0), rows.flip(0)
        scaled = rows / torch.sqrt(values + eps)[:, None]
        save(f"filters{i}.f64", torch.cat((scaled, -scaled)), np.float64)
elif cmd == "view":
    n, c, h, w = ints("shape")
    x = load("images.f32", np.float32, (n, c, h, w))
    v = ints("views")
    for i in range(len(v) // 3):
        dy, dx, flip = v[3 * i: 3 * i + 3]
        # Each axis padded by its own shift (torch's reflect padding must stay below the side).
        py, px = max(abs(dy), 1), max(abs(dx), 1)
        padded = F.pad(x, (px, px, py, py), "reflect")
        out = padded[:, :, py + dy: py + dy + h, px + dx: px + dx + w]
        if flip:
            out = out.flip(-1)
        save(f"view{i}.f32", out, np.float32)
elif cmd == "tta":
    n, c, h, w = ints("shape")
    classes = ints("classes")[0]
    x = load("images.f32", np.float32, (n, c, h, w))
    conv = torch.nn.Conv2d(c, 4, 3, padding=1)
    fc = torch.nn.Linear(4 * (h // 2) * (w // 2), classes)
    with torch.no_grad():
        conv.weight.copy_(load("conv_w.f32", np.float32, conv.weight.shape))
        conv.bias.copy_(load("conv_b.f32", np.float32, conv.bias.shape))
        fc.weight.copy_(load("fc_w.f32", np.float32, fc.weight.shape))
        fc.bias.copy_(load("fc_b.f32", np.float32, fc.bias.shape))
    net = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), fc)

    # airbench94.py's infer_mirror and infer_mirror_translate (pad = shift).
    def infer_mirror(inputs):
        return 0.5 * net(inputs) + 0.5 * net(inputs.flip(-1))

    def infer_mirror_translate(inputs, shift):
        logits = infer_mirror(inputs)
        padded = F.pad(inputs, (shift,) * 4, "reflect")
        translated = [padded[:, :, 0:h, 0:w], padded[:, :, 2 * shift: 2 * shift + h,
                                                      2 * shift: 2 * shift + w]]
        logits_translate = torch.stack([infer_mirror(t) for t in translated]).mean(0)
        return 0.5 * logits + 0.5 * logits_translate

    # One case per (level, shift) pair of "cases".
    cases = ints("cases")
    for i in range(len(cases) // 2):
        level, shift = cases[2 * i], cases[2 * i + 1]
        with torch.no_grad():
            out = infer_mirror(x) if level == 1 else infer_mirror_translate(x, shift)
        save(f"logits{i}.f32", out, np.float32)
elif cmd == "ema":
    steps, count = ints("steps")[0], ints("count")[0]
    decay, ramp = floats("decay")[0], floats("ramp")[0]
    every, start, total = ints("every")[0], ints("start")[0], ints("total")[0]
    seq = load("seq.f32", np.float32, (steps, count))
    ema, updates = None, 0
    for t in range(1, steps + 1):
        if t <= start or t % every != 0:
            continue
        if ema is None:
            ema = seq[t - 1].clone()
        else:
            rho = decay ** every * (min(1.0, t / total) ** ramp if ramp > 0 else 1.0)
            ema.lerp_(seq[t - 1], float(np.float32(1.0 - rho)))
        updates += 1
    save("ema.f32", ema, np.float32)
    open(os.path.join(d, "updates.txt"), "w").write(str(updates))
else:
    print(f"recipe_torch.py: unknown command {cmd}", file=sys.stderr)
    sys.exit(2)
