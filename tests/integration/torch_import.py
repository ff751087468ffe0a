#!/usr/bin/env python3
"""Helpers of test_torch_import.sh and test_finetune.sh (torch, torchvision, h5py, numpy).

  torch_import.py save PRESET CLASSES STEM CIFAR_ROOT OUT.pth
      a torchvision model of PRESET (the stem as ddp_train builds it) with random weights, seeded,
      whose batch norms have weights, biases and running statistics of real data (a few training
      forwards on CIFAR-10 images), saved with torch.save(model.state_dict())
  torch_import.py compare PRESET.pth PRESET STEM CIFAR_ROOT N LOGITS.csv
      torchvision's logits of the first N CIFAR-10 test images (normalised as ddp_train does with
      data.mean = data.std = 0.5), computed in float32 (as ddp_train computes them), against
      `ddp_train eval --dump-logits`'s: every logit within 1e-4 (of max(1, |logit|)), the labels
      the same. float32, not float64: either differs from ddp_train's by ~1e-6 (resnet18: 1.13e-6
      in float32, 1.03e-6 in float64), 100x inside the tolerance, and float64 costs 4x the CPU-s
  torch_import.py bad KIND IN.pth OUT.pth
      IN's state_dict with one thing wrong: missing (a running variance), extra (a key),
      shape (layer2.0.conv1.weight), tracked (a num_batches_tracked removed), nan (a value)
  torch_import.py untrained PRESET CLASSES STEM OUT.pth
      torch's model of PRESET as built (no seed, no statistics), saved as a state_dict
  torch_import.py same A.h5 B.h5 PREFIX...
      every tensor of A and B whose name starts with no PREFIX is bitwise equal in both, and every
      tensor that does (the head) differs; prints what it compared
  torch_import.py cli LOG ARGS...
      scripts/torch_to_snapshot.py with the command line ARGS, run in this process (its main()):
      what it prints, and the message of its sys.exit, into LOG, then a last line "exit N" with
      the status the command would have exited with (1 for a message, as python exits; an
      exception that escapes main() is written with its traceback, "exit 1"). Never fails itself.

Several commands run in one process, in order, when separated by "--" (each `import torch` costs
seconds): torch_import.py save ... -- bad ... -- compare ...; the first that fails ends it ("cli"
does not fail: its LOG says how the command ended).
"same" needs no torch, so torch is imported only by the commands that use it.
"""
import os
import sys

import h5py
import numpy as np

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")


def _torch():
    """(torch, snapshot_to_torch), imported on first use."""
    import torch
    sys.path.insert(0, SCRIPTS)
    import snapshot_to_torch
    return torch, snapshot_to_torch

TOL = 1e-4
CONFIG = {"data": {"normalize": "config", "mean": [0.5], "std": [0.5], "limit_subset": "first"}}


def cifar_train_images(root, n):
    torch, _ = _torch()
    raw = open(os.path.join(root, "data_batch_1.bin"), "rb").read(3073 * n)
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
    return torch.from_numpy(rec[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 127.5 - 1.0)


def save(preset, classes, stem, root, out):
    torch, snapshot_to_torch = _torch()
    torch.manual_seed(1234)
    model = snapshot_to_torch.build_model(preset, int(classes), stem)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            elif isinstance(m, torch.nn.Linear):  # torchvision's mobilenet_v2 head: N(0, 0.01),
                m.weight.uniform_(-0.1, 0.1)  # logits of ~0.05; these give logits of a few units
    # Running statistics of real images, as a trained model has (and num_batches_tracked > 0).
    model.train()
    images = cifar_train_images(root, 192)
    with torch.no_grad():
        for b in range(0, len(images), 64):
            model(images[b:b + 64])
    torch.save(model.state_dict(), out)


def compare(pth, preset, stem, root, n, csv):
    torch, snapshot_to_torch = _torch()
    state = torch.load(pth, map_location="cpu")
    head = "classifier.1.weight" if preset == "mobilenet_v2" else "fc.weight"
    model = snapshot_to_torch.build_model(preset, state[head].shape[0], stem)
    model.load_state_dict(state)
    model = model.float().eval()
    images, labels = snapshot_to_torch.cifar10_test_set(CONFIG, root, int(n))
    with torch.no_grad():
        theirs = model(torch.from_numpy(images).float()).numpy().astype(np.float64)
    rows = np.loadtxt(csv, delimiter=",", skiprows=1)
    ours = rows[:, 3:]
    if ours.shape != theirs.shape:
        sys.exit(f"{csv}: logits {ours.shape}, torch {theirs.shape}")
    if not np.array_equal(rows[:, 1].astype(np.int64), labels):
        sys.exit(f"{csv}: the labels are not the first {n} CIFAR-10 test labels")
    err = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    worst = np.unravel_index(np.argmax(err), err.shape)
    agree = int((ours.argmax(1) == theirs.argmax(1)).sum())
    print(f"{preset}: {ours.shape[0]} images x {ours.shape[1]} logits, largest difference "
          f"{err.max():.3g} (image {worst[0]}, class {worst[1]}: ours {ours[worst]:.7g}, torch "
          f"{theirs[worst]:.7g}); logit range {theirs.min():.3g}..{theirs.max():.3g}; "
          f"{agree} predictions agree")
    if not err.max() <= TOL:
        sys.exit(f"{preset}: logits differ from torchvision's by {err.max():.3g} > {TOL}")


def untrained(preset, classes, stem, out):
    torch, snapshot_to_torch = _torch()
    torch.save(snapshot_to_torch.build_model(preset, int(classes), stem).state_dict(), out)


def bad(kind, src, out):
    torch, _ = _torch()
    state = torch.load(src, map_location="cpu")
    if kind == "missing":
        del state["layer1.0.bn1.running_var"]
    elif kind == "extra":
        state["layer1.0.extra.weight"] = torch.zeros(3)
    elif kind == "shape":
        state["layer2.0.conv1.weight"] = torch.zeros(128, 64, 1, 1)
    elif kind == "tracked":
        del state["layer3.1.bn2.num_batches_tracked"]
    elif kind == "nan":
        state["layer4.1.conv2.weight"][0, 0, 0, 0] = float("nan")
    else:
        sys.exit(f"unknown kind {kind}")
    torch.save(state, out)


def same(a, b, prefixes):
    def tensors(path):
        with h5py.File(path, "r") as f:
            return {f"{layer}.{leaf}": ds[()] for layer, g in f["model"].items()
                    for leaf, ds in g.items()}
    ta, tb = tensors(a), tensors(b)
    if ta.keys() != tb.keys():
        sys.exit(f"{a} and {b} hold other tensors: {sorted(ta.keys() ^ tb.keys())}")
    head = [k for k in ta if k.startswith(tuple(prefixes))]
    changed = [k for k in ta if k not in head and not np.array_equal(ta[k], tb[k])]
    if changed:
        sys.exit(f"{len(changed)} tensors outside {prefixes} changed: {', '.join(changed[:10])}")
    same_head = [k for k in head if ta[k].shape == tb[k].shape and np.array_equal(ta[k], tb[k])]
    if not head or same_head:
        sys.exit(f"the head did not change: {same_head or 'no tensor starts with ' + str(prefixes)}")
    print(f"{len(ta) - len(head)} tensors bitwise equal (running statistics included), "
          f"{len(head)} changed: {', '.join(head)}")


def cli(log, args):
    import contextlib
    import traceback
    sys.path.insert(0, SCRIPTS)
    import torch_to_snapshot
    with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            torch_to_snapshot.main(args)
            status = 0
        except SystemExit as e:  # what python does with an uncaught SystemExit
            if e.code is None or isinstance(e.code, int):
                status = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException:
            traceback.print_exc()
            status = 1
        print(f"exit {status}")


def run(cmd, args):
    if cmd == "same":
        same(args[0], args[1], args[2:])
    elif cmd == "cli":
        cli(args[0], args[1:])
    elif cmd in ("save", "compare", "bad", "untrained"):
        {"save": save, "compare": compare, "bad": bad, "untrained": untrained}[cmd](*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    commands, args = [[]], sys.argv[1:]
    for a in args:
        if a == "--":
            commands.append([])
        else:
            commands[-1].append(a)
    if not all(commands):
        sys.exit(__doc__)
    for cmd in commands:
        run(cmd[0], cmd[1:])
