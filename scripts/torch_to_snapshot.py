#!/usr/bin/env python3
"""Turn a PyTorch state_dict file (.pth) of one of ddp_train's presets into a ddp_train weights file.

The presets resnet18/34/50 and mobilenet_v2 are torchvision's models, resnet20/56 the CIFAR ResNets
that scripts/snapshot_to_torch.py exports; their layer names are torchvision's module names, so the
state_dict key "layer1.0.conv1.weight" is the snapshot tensor /model/layer1.0.conv1/weight.

    scripts/torch_to_snapshot.py resnet18-f37072fd.pth resnet18.h5 --preset resnet18
    scripts/torch_to_snapshot.py mine.pth mine.h5 --preset mobilenet_v2 --stem cifar

The file is checked against torch's own model of the preset, built for the file's class count and
input channels (and stem): every key missing from the file, every key the model does not have,
every shape that differs, every batch norm's running statistics and num_batches_tracked, and every
value (finite) - each problem is named, and nothing is written unless all is well. The stem is read
from the first convolution where it shows (a 7x7 conv1: imagenet; 3x3: cifar); for mobilenet_v2 it
does not show (only the stride differs): --stem says it (default imagenet, as torchvision's own
weights are).

The output is a weights file: the snapshot format (docs/snapshot_format.md) with /meta kind =
"weights", the parameters and batch-norm statistics under /model, no optimizer state, no training
position and no configuration. `ddp_train eval --snapshot OUT.h5 --config C.toml` evaluates it on
C.toml's dataset; `train.init = "OUT.h5"` starts a new run from it (fine-tuning, docs/finetuning.md).
num_batches_tracked is checked but not stored: ddp_train's batch norm uses a fixed momentum.

It needs Python 3.11+ with h5py, numpy, torch and torchvision (on Debian: /usr/bin/python3 with
python3-h5py, python3-numpy, python3-torch, python3-torchvision).
"""
import argparse
import collections
import os
import sys
import zlib

try:
    import h5py
    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from snapshot_to_torch import CIFAR_RESNETS, TORCHVISION_PRESETS, build_model
except ImportError as _e:  # say what to install instead of a bare traceback
    _message = (f"torch_to_snapshot: {sys.executable} cannot import {_e.name or _e}. This script "
                "needs Python 3.11+ with h5py, numpy, torch and torchvision: install them for this "
                "python, or on Debian run it with /usr/bin/python3 after apt install python3-h5py "
                "python3-numpy python3-torch python3-torchvision")
    if __name__ == "__main__":
        sys.exit(_message)
    raise ImportError(_message) from _e

__all__ = ["ImportProblem", "read_state_dict", "check_state_dict", "write_weights", "convert"]

PRESETS = tuple(CIFAR_RESNETS) + TORCHVISION_PRESETS
HEADER_BYTES = 512  # the HDF5 user block holding ddp_train's text header (src/ckpt/file_header.cpp)
FORMAT_VERSION = 1
MAX_NAMED = 25  # problems listed one by one before "... and N more"


class ImportProblem(ValueError):
    """The input cannot become a weights file; the message names every problem."""


def _first_and_head(preset):
    """(first convolution, classifier) weight keys: they give the input channels and classes."""
    if preset == "mobilenet_v2":
        return "features.0.0.weight", "classifier.1.weight"
    return "conv1.weight", "fc.weight"


def read_state_dict(path):
    """(OrderedDict name -> tensor, notes): the state_dict in `path`, from torch.save of a
    state_dict, of a checkpoint dict holding one under "state_dict" / "model" /
    "model_state_dict", or of a whole model. DataParallel's "module." prefix is dropped."""
    if not os.path.isfile(path):
        raise ImportProblem(f"{path}: no such file")
    notes = []
    try:
        # weights_only: a .pth from elsewhere is a pickle; this refuses code in it.
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # a torch without weights_only
        obj = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any unpickling failure is this file's problem
        raise ImportProblem(f"{path}: not a torch state_dict file ({type(e).__name__}: {e}); "
                            "save one with torch.save(model.state_dict(), PATH)") from e
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, dict) and not any(torch.is_tensor(v) for v in obj.values()):
        for key in ("state_dict", "model", "model_state_dict"):
            if isinstance(obj.get(key), dict):
                notes.append(f"the state_dict is the checkpoint's {key!r}")
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not obj:
        raise ImportProblem(f"{path}: holds a {type(obj).__name__}, not a state_dict (a dict of "
                            "tensors by name); save one with torch.save(model.state_dict(), PATH)")
    not_tensors = [k for k, v in obj.items() if not torch.is_tensor(v)]
    if not_tensors:
        raise ImportProblem(f"{path}: entries that are not tensors: {', '.join(map(str, not_tensors[:MAX_NAMED]))}")
    state = collections.OrderedDict(obj)
    if all(k.startswith("module.") for k in state):
        state = collections.OrderedDict((k[len("module."):], v) for k, v in state.items())
        notes.append("the 'module.' prefix of (Distributed)DataParallel dropped")
    return state, notes


def _resolve_stem(preset, state, stem):
    """The stem the file was made with, checked against its first convolution."""
    if preset in CIFAR_RESNETS:
        if stem == "imagenet":
            raise ImportProblem(f"--stem imagenet: {preset} has only the CIFAR stem")
        return "cifar"
    first, _ = _first_and_head(preset)
    if preset == "mobilenet_v2" or first not in state or state[first].dim() != 4:
        return stem or "imagenet"
    side = tuple(state[first].shape[-2:])
    shown = {(7, 7): "imagenet", (3, 3): "cifar"}.get(side)
    if shown is None:
        return stem or "imagenet"  # the shape check names conv1
    if stem and stem != shown:
        raise ImportProblem(f"--stem {stem}: the file's {first} is {list(state[first].shape)}, a "
                            f"{side[0]}x{side[1]} first convolution: the {shown} stem (7x7 is "
                            "imagenet's, 3x3 cifar's); drop --stem or give --stem " + shown)
    return shown


def _reference(preset, state, stem):
    """torch's state_dict of `preset` built for the file's classes and input channels."""
    first, head = _first_and_head(preset)
    classes = int(state[head].shape[0]) if head in state and state[head].dim() == 2 else 1000
    channels = int(state[first].shape[1]) if first in state and state[first].dim() == 4 else 3
    return build_model(preset, classes, stem, channels).state_dict(), classes, channels


def _shape(t):
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def _named(problems):
    shown = problems[:MAX_NAMED]
    more = len(problems) - len(shown)
    return "\n  " + "\n  ".join(shown) + (f"\n  ... and {more} more" if more > 0 else "")


def _differences(state, ref):
    """Every key and shape that differs between the file and torch's model, each named."""
    problems = [f"missing from the file: {k} {_shape(ref[k])}" for k in ref if k not in state]
    problems += [f"not in {{preset}}: {k} {_shape(state[k])}" for k in state if k not in ref]
    problems += [f"{k}: the file has {_shape(state[k])}, {{preset}} needs {_shape(ref[k])}"
                 for k in ref if k in state and tuple(state[k].shape) != tuple(ref[k].shape)]
    return problems


def _value_problems(state, ref):
    """Values that cannot be weights: non-numbers, non-finite values, negative variances, a
    num_batches_tracked that is not a count."""
    problems = []
    for k, t in state.items():
        if k not in ref or tuple(t.shape) != tuple(ref[k].shape):
            continue  # named by _differences
        if k.endswith("num_batches_tracked"):
            if t.dtype.is_floating_point or t.dtype.is_complex or t.numel() != 1 or int(t) < 0:
                problems.append(f"{k}: {t.dtype} {_shape(t)} = {t.flatten()[:1].tolist()}: not a "
                                "batch count (a non-negative integer)")
            continue
        if not t.dtype.is_floating_point:
            problems.append(f"{k}: {t.dtype}, not floating point")
            continue
        bad = (~torch.isfinite(t)).sum().item()
        if bad:
            problems.append(f"{k}: {bad} of {t.numel()} values are not finite (inf or nan)")
        elif k.endswith("running_var") and (t < 0).any():
            problems.append(f"{k}: {(t < 0).sum().item()} negative variances")
    return problems


def _guess(state, stem):
    """The presets whose torch model the file matches exactly (for a file of another
    architecture)."""
    found = []
    for preset in PRESETS:
        first, head = _first_and_head(preset)
        if first not in state or head not in state:
            continue
        for s in ("cifar", "imagenet") if preset not in CIFAR_RESNETS else ("cifar",):
            try:
                ref, _, _ = _reference(preset, state, s)
            except Exception:  # noqa: BLE001 - a shape no model of this preset takes
                continue
            if not _differences(state, ref):
                found.append(preset if preset in CIFAR_RESNETS or preset == "mobilenet_v2"
                             else f"{preset} ({s} stem)")
                break
    return found


def check_state_dict(state, preset, stem=None, source="the file"):
    """(tensors to store: OrderedDict name -> float32 numpy array in torch's order, summary dict).
    Raises ImportProblem naming every difference from torch's `preset`."""
    if preset not in PRESETS:
        raise ImportProblem(f"--preset {preset}: not one with a torch counterpart ({', '.join(PRESETS)})")
    stem = _resolve_stem(preset, state, stem)
    ref, classes, channels = _reference(preset, state, stem)
    problems = [p.replace("{preset}", preset) for p in _differences(state, ref)]
    if problems:
        guess = _guess(state, stem)
        hint = (f"\n{source} matches {', '.join(guess)}: give that --preset" if guess and
                preset not in [g.split(" ")[0] for g in guess] else "")
        raise ImportProblem(f"{source} is not a {preset} state_dict ({stem} stem, {channels} input "
                            f"channel{'s' if channels != 1 else ''}, {classes} classes): "
                            f"{len(problems)} difference{'s' if len(problems) != 1 else ''}:"
                            f"{_named(problems)}{hint}")
    problems = _value_problems(state, ref)
    if problems:
        raise ImportProblem(f"{source}: {len(problems)} tensor{'s' if len(problems) != 1 else ''} "
                            f"cannot be loaded:{_named(problems)}")
    tensors = collections.OrderedDict()
    tracked = 0
    for k in ref:  # torch's order: each module's parameters, then its buffers
        if k.endswith("num_batches_tracked"):
            tracked += 1
            continue
        tensors[k] = np.ascontiguousarray(state[k].detach().to(torch.float32).numpy())
    summary = {"preset": preset, "stem": stem, "classes": classes, "channels": channels,
               "tensors": len(tensors), "num_batches_tracked": tracked,
               "values": int(sum(a.size for a in tensors.values()))}
    return tensors, summary


def _fixed_string(text):
    """A fixed-length, NUL-terminated string (what ddp_train's reader takes; at least one byte)."""
    raw = text.encode("utf-8")
    return np.array(raw, dtype=h5py.string_dtype("utf-8", len(raw) + 1))


def _header(image):
    """ddp_train's 512-byte text header for a file of these bytes (src/ckpt/file_header.cpp):
    a weights file has no training position and belongs to no run."""
    text = (f"ddp_train snapshot\nformat_version {FORMAT_VERSION}\nepoch 0\nstep_in_epoch 0\n"
            f"samples_seen 0\nglobal_step 0\nbytes {len(image)}\n"
            f"crc32 {zlib.crc32(image[HEADER_BYTES:]) & 0xffffffff:08x}\nrun_id \n").encode()
    return text + b"\0" * (HEADER_BYTES - len(text))


def write_weights(path, tensors, imported_from):
    """Writes the weights file atomically: a temporary file beside it, fsync, rename."""
    path = os.path.abspath(path)
    folder, name = os.path.split(path)
    if not os.path.isdir(folder):
        raise ImportProblem(f"{path}: no directory {folder}")
    tmp = os.path.join(folder, f".{name}.tmp.{os.getpid()}")
    try:
        with h5py.File(tmp, "w", userblock_size=HEADER_BYTES, track_order=True) as f:
            model = f.create_group("model", track_order=True)
            for key, values in tensors.items():
                layer, leaf = key.rsplit(".", 1)
                group = model[layer] if layer in model else model.create_group(layer, track_order=True)
                group.create_dataset(leaf, data=values.astype("<f4", copy=False))
            opt = f.create_group("optimizer")
            opt.attrs["name"] = _fixed_string("none")
            opt.attrs["steps"] = np.int64(0)
            meta = f.create_group("meta", track_order=True)
            for key in ("format_version",):
                meta.attrs[key] = np.int64(FORMAT_VERSION)
            meta.attrs["program_version"] = _fixed_string("torch_to_snapshot.py")
            for key in ("epoch", "step_in_epoch", "samples_seen", "global_step"):
                meta.attrs[key] = np.int64(0)
            meta.attrs["seed"] = np.uint64(0)
            meta.attrs["world_size"] = np.int64(0)
            meta.attrs["kind"] = _fixed_string("weights")
            meta.attrs["imported_from"] = _fixed_string(imported_from)
            # No configuration: a weights file is evaluated or trained with the user's.
            meta.create_dataset("config_toml", data=_fixed_string(""))
            meta.create_dataset("metrics_jsonl", data=_fixed_string(""))
        with open(tmp, "r+b") as f:
            image = f.read()
            f.seek(0)
            f.write(_header(image))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def convert(pth, out, preset, stem=None):
    """Reads, checks and writes; returns (summary, notes). Raises ImportProblem."""
    state, notes = read_state_dict(pth)
    tensors, summary = check_state_dict(state, preset, stem, source=pth)
    write_weights(out, tensors, os.path.abspath(pth))
    return summary, notes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pth", help="torch.save(model.state_dict()) file")
    ap.add_argument("out", help="the weights file to write (.h5)")
    ap.add_argument("--preset", required=True, choices=PRESETS, help="ddp_train's model.preset")
    ap.add_argument("--stem", choices=("cifar", "imagenet"),
                    help="model.stem the weights were made for (read from conv1 where it shows)")
    args = ap.parse_args(argv)
    try:
        s, notes = convert(args.pth, args.out, args.preset, args.stem)
    except (ImportProblem, OSError) as e:
        sys.exit(f"torch_to_snapshot: {e}")
    for note in notes:
        print(f"torch_to_snapshot: note: {note}")
    print(f"torch_to_snapshot: {args.out}: {s['preset']} ({s['stem']} stem, {s['channels']} input "
          f"channel{'s' if s['channels'] != 1 else ''}, {s['classes']} classes), {s['tensors']} "
          f"tensors ({s['values']} values); {s['num_batches_tracked']} num_batches_tracked checked, "
          f"not stored. Use: train.init = \"{args.out}\" (model.stem = \"{s['stem']}\"), or "
          f"ddp_train eval --snapshot {args.out} --config C.toml")


if __name__ == "__main__":
    main()
