#!/usr/bin/env python3
"""PyTorch parity of one preset (test_torch_parity.sh): the same weights, the same batch, one
training forward/backward in ddp_train (tests/tools/torch_parity_step) and in torch.

Compared: logits, loss, every parameter gradient and the batch-norm running statistics after the
step, each as a norm-wise relative error per tensor, ||ours - torch||_2 / ||torch||_2 <= TOL, with
torch computing in float64 (the exact values of these float32 weights and inputs; torch's own
float32 result is printed beside, and is no closer to them than ours). A gradient that is zero by
construction (a batch norm's bias whose output only reaches a 1x1 convolution and then a batch
norm, which removes any per-channel shift: MobileNetV2's linear bottlenecks) holds rounding noise
in float32 on both sides; ours must be below TOL times the norm of the whole gradient.

The weights are torchvision's (its initialisation) with every batch norm's weight, bias and running
statistics drawn at random, written into a snapshot that the tool created for the preset (the h5py
edit of /model, then the header zeroed, as docs/snapshot_format.md describes);
snapshot_to_torch.load_snapshot reads the edited file back and must give torch's tensors bit for
bit.

A ReLU (or ReLU6) input within rounding distance of 0 (or 6) makes float32 results differ in a mask
bit, which moves every gradient below it by ~1e-3 in both ours and torch's float32: a fact about the
input, not about either implementation. So the batch norms get weights in [0.2, 0.4] and biases of
either sign of magnitude [0.6, 1.0] (few pre-activations near the kinks; with ReLU6, a third of the
channels at 6.6 to 7.0 instead, around its upper kink), and of the seeds 0, 1, ...
the first whose float64 forward keeps every ReLU input at least MARGIN (relative to that input's
standard deviation) away from a kink is used.

usage: torch_parity.py TOOL WORKDIR PRESET SIDE BATCH LABEL_SMOOTHING [PRESET SIDE BATCH LABEL_SMOOTHING]...
Several presets are checked one after the other in one process (an `import torch` costs seconds);
each is seeded on its own, so each gets what a process of its own would; the exit status is 1 if
any preset disagrees (every one is still checked and printed).
"""
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import snapshot_to_torch  # noqa: E402

TOL = 1e-4
MARGIN = 2e-6  # float32 activations are off by ~1e-7 of their spread


def rel_err(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    diff, scale = np.linalg.norm(ours - ref), np.linalg.norm(ref)
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def write_state(snapshot, state):
    """Replaces every /model tensor of `snapshot` by state's (same names and shapes) and zeros the
    512-byte header, whose checksum no longer holds (a header-less file is read as any HDF5)."""
    with h5py.File(snapshot, "r+") as f:
        written = set()
        for layer, group in f["model"].items():
            for leaf, ds in group.items():
                key = f"{layer}.{leaf}"
                value = state[key].detach().numpy().astype(np.float32)
                assert ds.shape == value.shape, (key, ds.shape, value.shape)
                ds[...] = value
                written.add(key)
    missing = {k for k in state if not k.endswith("num_batches_tracked")} - written
    assert not missing, f"torch tensors without a snapshot dataset: {sorted(missing)}"
    with open(snapshot, "r+b") as f:
        f.write(bytes(512))


def candidate(preset, seed, side, batch):
    """torchvision's initialisation, random batch-norm state, a random batch."""
    torch.manual_seed(seed)
    model = snapshot_to_torch.build_model(preset, 10, "cifar", 3)
    # With ReLU6, a third of the channels sit around 6 so that its upper kink is exercised too.
    modes = 3 if any(isinstance(m, torch.nn.ReLU6) for m in model.modules()) else 2
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                mode = torch.randint(0, modes, m.bias.shape)
                magnitude = torch.empty_like(m.bias).uniform_(0.6, 1.0)
                m.bias.copy_(torch.where(mode == 0, -magnitude, magnitude))
                m.weight.uniform_(0.2, 0.4)
                upper = mode == 2  # x in about 3.25 +- 4: the tail beyond 6 is clipped
                m.bias[upper] = torch.empty_like(m.bias[upper]).uniform_(3.0, 3.5)
                m.weight[upper] = torch.empty_like(m.weight[upper]).uniform_(1.0, 1.2)
                m.running_mean.normal_(0.0, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model, torch.randn(batch, 3, side, side), torch.randint(0, 10, (batch,))


def forward_backward(preset, state, x, y, smoothing, dtype, margins=None):
    """A training step's forward and backward of a fresh model holding `state`, in `dtype`:
    (model, logits, loss). With `margins`, appends each ReLU input's distance to its kinks."""
    model = snapshot_to_torch.build_model(preset, 10, "cifar", 3)
    model.load_state_dict(state)
    model.to(dtype).train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):  # the tool runs dropout with p = 0 too (other RNGs)
            m.p = 0.0
        if margins is not None and isinstance(m, (torch.nn.ReLU, torch.nn.ReLU6)):
            def hook(mod, inputs):
                t = inputs[0].detach()
                d = t.abs() if isinstance(mod, torch.nn.ReLU) else torch.minimum(t.abs(), (t - 6).abs())
                margins.append(float(d.min() / t.std()))
            m.register_forward_pre_hook(hook)
    logits = model(x.to(dtype))
    loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=smoothing)
    loss.backward()
    return model, logits.detach().double().numpy(), loss.item()


def parity(tool, work, preset, side, batch, smoothing):
    """Checks one preset; False (after printing what is over TOL) if ours and torch's disagree."""
    side, batch, smoothing = int(side), int(batch), float(smoothing)
    for seed in range(20):
        model, x, y = candidate(preset, seed, side, batch)
        margins = []
        exact, logits64, loss64 = forward_backward(preset, model.state_dict(), x, y, smoothing,
                                                   torch.float64, margins)
        if min(margins) >= MARGIN:
            break
    else:
        sys.exit(f"no seed in 0..19 keeps the ReLU inputs {MARGIN:g} away from their kinks")

    config = os.path.join(work, f"{preset}.toml")
    with open(config, "w") as f:
        f.write(f'[data]\ndataset = "cifar10"\n[model]\npreset = "{preset}"\nstem = "cifar"\n'
                f"[train]\nseed = 5\nlabel_smoothing = {smoothing}\n")
    snap, batch_file, out = (os.path.join(work, f"{preset}.{x}.h5") for x in ("snap", "batch", "out"))
    subprocess.run([tool, "init", config, snap, "3", str(side), str(side)], check=True)
    # ddp_train's own initialisation has exactly torch's keys and shapes (load_snapshot is strict).
    snapshot_to_torch.load_snapshot(snap)
    write_state(snap, model.state_dict())
    loaded, _ = snapshot_to_torch.load_snapshot(snap)
    for k, v in model.state_dict().items():
        if not k.endswith("num_batches_tracked"):
            assert torch.equal(loaded.state_dict()[k], v), f"{k} did not survive the snapshot"
    with h5py.File(batch_file, "w") as f:
        f["images"] = x.numpy()
        f["labels"] = y.numpy().astype(np.int32)
    subprocess.run([tool, "step", config, snap, batch_file, out], check=True)
    f32, logits32, loss32 = forward_backward(preset, model.state_dict(), x, y, smoothing,
                                             torch.float32)

    g64 = {n: p.grad.numpy() for n, p in exact.named_parameters()}
    g32 = {n: p.grad.numpy() for n, p in f32.named_parameters()}
    total64 = np.sqrt(sum(np.sum(g ** 2) for g in g64.values()))
    errors, torch32, zero = {}, {}, []
    with h5py.File(out, "r") as f:
        errors["logits"] = rel_err(f["logits"][()], logits64)
        errors["loss"] = rel_err(f["loss"][()], [loss64])
        torch32["logits"], torch32["loss"] = rel_err(logits32, logits64), rel_err([loss32], [loss64])
        if set(f["grads"].keys()) != set(g64):
            sys.exit(f"gradient names differ: ours only {sorted(set(f['grads']) - set(g64))}, "
                     f"torch only {sorted(set(g64) - set(f['grads']))}")
        for name, ref in g64.items():
            ours = f["grads"][name][()]
            if np.linalg.norm(ref) <= 1e-9 * total64:
                zero.append(name)
                errors["grad " + name] = np.linalg.norm(ours) / total64
            else:
                errors["grad " + name] = rel_err(ours, ref)
                torch32["grad " + name] = rel_err(g32[name], ref)
        buffers = {k: v for k, v in exact.named_buffers() if not k.endswith("num_batches_tracked")}
        if set(f["buffers"].keys()) != set(buffers):
            sys.exit(f"buffer names differ: {sorted(f['buffers'].keys())} vs {sorted(buffers)}")
        for name, b in buffers.items():
            errors["buffer " + name] = rel_err(f["buffers"][name][()], b.numpy())

    grads = [v for k, v in errors.items() if k.startswith("grad ") and k[5:] not in zero]
    worst = max(errors, key=errors.get)
    print(f"{preset} ({side}x{side}, batch {batch}, label smoothing {smoothing}, seed {seed}): "
          f"logits {errors['logits']:.1e}, loss {errors['loss']:.1e}, {len(grads)} gradients "
          f"max {max(grads):.1e} (torch float32: {max(torch32.values()):.1e}), {len(zero)} zero by "
          f"construction, {len(buffers)} running statistics; worst: {worst} {errors[worst]:.1e}")
    bad = {k: v for k, v in errors.items() if not v <= TOL}
    if bad:
        for k, v in sorted(bad.items(), key=lambda kv: -kv[1])[:20]:
            print(f"  over {TOL:g}: {k}: {v:.3e} (torch float32: {torch32.get(k, float('nan')):.1e})")
        return False
    return True


def main():
    tool, work, groups = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not groups or len(groups) % 4:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    ok = [parity(tool, work, *groups[i:i + 4]) for i in range(0, len(groups), 4)]
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
