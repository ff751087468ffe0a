#!/usr/bin/env python3
"""PyTorch parity of one preset (test_torch_parity.sh): the same weights, the same batch, one
training forward/backward in ddp_train (tests/tools/torch_parity_step) and in torch; logits, loss,
every parameter gradient and the batch-norm running statistics after the step must agree within
TOL, as a norm-wise relative error per tensor: ||ours - torch||_2 / ||torch||_2 (a tensor that is
zero in torch must be zero in ours).

The weights are torchvision's (its initialisation, seeded, with every batch norm's weight, bias and
running statistics drawn at random so that none is the trivial 1/0), written into a snapshot that
the tool created for the preset: the h5py edit of /model, then the header zeroed, as
docs/snapshot_format.md describes. snapshot_to_torch.load_snapshot reads the edited file back and
must give torch's tensors bit for bit.

usage: torch_parity.py TOOL WORKDIR PRESET SIDE BATCH LABEL_SMOOTHING
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


def main():
    tool, work, preset, side, batch, smoothing = sys.argv[1:7]
    side, batch, smoothing = int(side), int(batch), float(smoothing)
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    config = os.path.join(work, f"{preset}.toml")
    with open(config, "w") as f:
        f.write(f'[data]\ndataset = "cifar10"\n[model]\npreset = "{preset}"\nstem = "cifar"\n'
                f"[train]\nseed = 5\nlabel_smoothing = {smoothing}\n")
    snap, batch_file, out = (os.path.join(work, f"{preset}.{x}.h5") for x in ("snap", "batch", "out"))
    subprocess.run([tool, "init", config, snap, "3", str(side), str(side)], check=True)

    # torchvision's weights, random batch-norm state, into the snapshot; read back bit for bit.
    ref_model, _ = snapshot_to_torch.load_snapshot(snap)
    model = snapshot_to_torch.build_model(preset, 10, "cifar", 3)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.2)
                m.running_mean.normal_(0.0, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    assert ref_model.state_dict().keys() == model.state_dict().keys()
    write_state(snap, model.state_dict())
    loaded, _ = snapshot_to_torch.load_snapshot(snap)
    for k, v in model.state_dict().items():
        if not k.endswith("num_batches_tracked"):
            assert torch.equal(loaded.state_dict()[k], v), f"{k} did not survive the snapshot"

    x = torch.randn(batch, 3, side, side)
    y = torch.randint(0, 10, (batch,))
    with h5py.File(batch_file, "w") as f:
        f["images"] = x.numpy()
        f["labels"] = y.numpy().astype(np.int32)
    subprocess.run([tool, "step", config, snap, batch_file, out], check=True)

    model.train()
    for m in model.modules():  # the tool runs dropout with p = 0 too (different RNGs)
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=smoothing)
    loss.backward()

    errors = {}
    with h5py.File(out, "r") as f:
        errors["logits"] = rel_err(f["logits"][()], logits.detach().numpy())
        errors["loss"] = rel_err(f["loss"][()], [loss.item()])
        params = dict(model.named_parameters())
        if set(f["grads"].keys()) != set(params):
            sys.exit(f"gradient names differ: ours only {sorted(set(f['grads']) - set(params))}, "
                     f"torch only {sorted(set(params) - set(f['grads']))}")
        for name, p in params.items():
            errors["grad " + name] = rel_err(f["grads"][name][()], p.grad.numpy())
        buffers = {k: v for k, v in model.named_buffers() if not k.endswith("num_batches_tracked")}
        if set(f["buffers"].keys()) != set(buffers):
            sys.exit(f"buffer names differ: {sorted(f['buffers'].keys())} vs {sorted(buffers)}")
        for name, b in buffers.items():
            errors["buffer " + name] = rel_err(f["buffers"][name][()], b.numpy())

    worst = max(errors, key=errors.get)
    grads = [v for k, v in errors.items() if k.startswith("grad ")]
    print(f"{preset} ({side}x{side}, batch {batch}, label smoothing {smoothing}): "
          f"logits {errors['logits']:.2e}, loss {errors['loss']:.2e}, "
          f"{len(grads)} gradients max {max(grads):.2e}, worst: {worst} {errors[worst]:.2e}")
    bad = {k: v for k, v in errors.items() if not v <= TOL}
    if bad:
        for k, v in sorted(bad.items(), key=lambda kv: -kv[1])[:20]:
            print(f"  over {TOL:g}: {k}: {v:.3e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
