#!/usr/bin/env python3
"""Load a ddp_train snapshot into the matching PyTorch model.

The presets resnet18/34/50 and mobilenet_v2 are torchvision's models, resnet20/56 the CIFAR
ResNets of He et al. 2016 (CifarResNet below); their layer names are the models' state_dict keys,
so a snapshot's /model/<layer>/<tensor> is the tensor "<layer>.<tensor>" of the state_dict. The
model is built for the snapshot's class count, input channels and stem (model.stem; cifar: a 3x3
stride-1 first convolution and no max pool for the ResNets, a stride-1 first convolution for
MobileNetV2), and every key must match both ways.

As a library (h5py, torch, torchvision):

    from snapshot_to_torch import load_snapshot
    model, config = load_snapshot("runs/cifar/snapshot_e0030.h5")  # config: the run's TOML, a dict

As a command: evaluates the snapshot on the run's test set with the run's normalisation and
evaluation transform, as `ddp_train eval` does. It reads every dataset ddp_train reads: cifar10,
cifar100, mnist, fashion_mnist (from data.root) and packed files (data.test_file), raw or encoded;
data.train_size's Resize + CenterCrop is torchvision's on PIL images (for encoded files PIL also
decodes the JPEGs, so results may differ from ddp_train's in the last digits):

    scripts/snapshot_to_torch.py runs/cifar/snapshot_e0030.h5 [--data-root DIR] [--test-limit N]
    scripts/snapshot_to_torch.py SNAPSHOT --test-file test.h5   # another packed test file
    scripts/snapshot_to_torch.py SNAPSHOT --save model.pt     # torch.save(model.state_dict())

It needs Python 3.11 or newer (tomllib) with h5py, numpy, torch and torchvision (and PIL for
data.train_size). On Debian those are python3-h5py, python3-numpy, python3-torch,
python3-torchvision and python3-pil for /usr/bin/python3: a virtual environment's or conda's
python3, which `#!/usr/bin/env python3` may find first, needs them installed there (pip install
h5py numpy torch torchvision pillow), or run the script as /usr/bin/python3 scripts/...
"""
import argparse
import gzip
import os
import sys

try:
    import tomllib

    import h5py
    import numpy as np
    import torch
    import torchvision
    from torch import nn
    from torchvision.models.resnet import BasicBlock, conv1x1
except ImportError as _e:  # say what to install instead of a bare traceback
    _missing = "tomllib (Python 3.11 or newer)" if _e.name == "tomllib" else (_e.name or str(_e))
    _message = (f"snapshot_to_torch: {sys.executable} cannot import {_missing}. This script "
                "needs Python 3.11+ with h5py, numpy, torch and torchvision: install them for this "
                "python (pip install h5py numpy torch torchvision pillow), or on Debian run it with "
                "/usr/bin/python3 after apt install python3-h5py python3-numpy python3-torch "
                "python3-torchvision python3-pil")
    if __name__ == "__main__":
        sys.exit(_message)
    raise ImportError(_message) from _e

__all__ = ["CifarResNet", "build_model", "read_snapshot", "load_snapshot", "cifar10_test_set",
           "test_set", "evaluate"]

TORCHVISION_PRESETS = ("resnet18", "resnet34", "resnet50", "mobilenet_v2")
CIFAR_RESNETS = {"resnet20": 3, "resnet56": 9}  # blocks per stage


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for CIFAR (He et al. 2016) as ddp_train's resnet20/resnet56 presets build it:
    a 3x3 stem of 16 channels, 3 stages of n torchvision BasicBlocks (16, 32, 64 planes), projection
    shortcuts (1x1 convolution + batch norm) where the shape changes, global average pooling, fc.
    torchvision's module names and initialisation."""

    def __init__(self, n, num_classes=10, in_channels=3, zero_init_residual=False):
        super().__init__()
        self.inplanes = 16
        self.conv1 = nn.Conv2d(in_channels, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(16, n, 1)
        self.layer2 = self._make_layer(32, n, 2)
        self.layer3 = self._make_layer(64, n, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes, stride), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model(preset, num_classes, stem="cifar", in_channels=3):
    """The torch model of a ddp_train preset; stem: "cifar" or "imagenet" (as resolved)."""
    if preset in CIFAR_RESNETS:
        return CifarResNet(CIFAR_RESNETS[preset], num_classes, in_channels)
    if preset not in TORCHVISION_PRESETS:
        raise ValueError(f"model.preset = {preset!r} has no torch counterpart here (supported: "
                         f"{', '.join(list(CIFAR_RESNETS) + list(TORCHVISION_PRESETS))})")
    if stem not in ("cifar", "imagenet"):
        raise ValueError(f"stem {stem!r}: expected cifar or imagenet")
    model = getattr(torchvision.models, preset)(num_classes=num_classes)
    cifar = stem == "cifar"
    if preset == "mobilenet_v2":
        first = model.features[0][0]
        if cifar or in_channels != 3:
            model.features[0][0] = nn.Conv2d(in_channels, first.out_channels, 3,
                                             stride=1 if cifar else 2, padding=1, bias=False)
    else:
        if cifar:
            model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
            model.maxpool = nn.Identity()
        elif in_channels != 3:
            model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    return model


def _dataset_side(dataset, config=None):
    """The longer image side the model was built for (model.stem = auto decides by it)."""
    data = (config or {}).get("data", {})
    if int(data.get("train_size", 0)) > 0:
        return int(data["train_size"])
    if dataset == "packed" and data.get("train_file") and os.path.isfile(data["train_file"]):
        with h5py.File(data["train_file"], "r") as f:
            return max(int(f.attrs.get("height", 0)), int(f.attrs.get("width", 0)))
    return 28 if dataset in ("mnist", "fashion_mnist") else 32


def read_snapshot(path):
    """(tensors, config, meta): {"<layer>.<tensor>": numpy array} from /model, the run's resolved
    configuration (a dict) and /meta's attributes."""
    with h5py.File(path, "r") as f:
        tensors = {}
        for layer, group in f["model"].items():
            for leaf, ds in group.items():
                tensors[f"{layer}.{leaf}"] = np.asarray(ds[()], dtype=np.float32)
        text = f["meta/config_toml"][()]
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        meta = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f["meta"].attrs.items()}
    return tensors, tomllib.loads(text.rstrip("\0")), meta


def resolved_stem(config):
    """model.stem as the run resolved it (auto: cifar for images of at most 64 px)."""
    stem = config.get("model", {}).get("stem", "auto")
    if stem != "auto":
        return stem
    side = _dataset_side(config.get("data", {}).get("dataset", "cifar10"), config)
    return "cifar" if side <= 64 else "imagenet"


def load_snapshot(path):
    """(model, config): the snapshot's model in torch, in eval mode, and the run's configuration.
    Raises ValueError naming every key that is missing on either side or whose shape differs."""
    tensors, config, meta = read_snapshot(path)
    preset = config.get("model", {}).get("preset", "")
    if not preset:
        raise ValueError(f"{path}: the model is given by [[model.layers]], not a preset; only "
                         "presets have a torch counterpart here")
    head = "classifier.1.weight" if preset == "mobilenet_v2" else "fc.weight"
    first = "features.0.0.weight" if preset == "mobilenet_v2" else "conv1.weight"
    if head not in tensors or first not in tensors:
        raise ValueError(f"{path}: no {head} / {first}: not a {preset} snapshot")
    model = build_model(preset, tensors[head].shape[0], resolved_stem(config),
                        tensors[first].shape[1])
    state = model.state_dict()
    # num_batches_tracked only matters for BatchNorm(momentum=None); ddp_train does not keep it.
    expected = {k for k in state if not k.endswith("num_batches_tracked")}
    problems = [f"missing from the snapshot: {k} {tuple(state[k].shape)}"
                for k in sorted(expected - tensors.keys())]
    problems += [f"not in the torch model: {k} {tensors[k].shape}"
                 for k in sorted(tensors.keys() - expected)]
    problems += [f"{k}: snapshot {tensors[k].shape}, torch {tuple(state[k].shape)}"
                 for k in sorted(expected & tensors.keys())
                 if tuple(tensors[k].shape) != tuple(state[k].shape)]
    if problems:
        raise ValueError(f"{path} does not match torch's {preset}:\n  " + "\n  ".join(problems))
    steps = int(meta.get("global_step", 0))
    new_state = {k: (torch.from_numpy(tensors[k]) if k in tensors else torch.tensor(steps))
                 for k in state}
    model.load_state_dict(new_state, strict=True)
    return model.eval(), config


_M64 = (1 << 64) - 1


def _mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def random_subset(n, k, seed, split):
    """ddp_train's data::random_subset (include/ddp/data/subset.hpp, rng.hpp): k indices of
    [0, n), ascending, for split 0 (train) or 1 (test)."""
    key = _mix64(_mix64(_mix64(_mix64(seed & _M64) ^ 5) ^ split) ^ 0)  # RngStream::subset = 5
    order = list(range(n))
    for i in range(min(k, n)):
        u = _mix64((key + 0x632BE59BD9B4E019 * (i + 1)) & _M64)  # CounterRng::next_u64
        j = i + ((u * (n - i)) >> 64)                              # next_below(n - i)
        order[i], order[j] = order[j], order[i]
    return sorted(order[:min(k, n)])


def _limited(n, limit, config, split):
    """The sample indices ddp_train uses with data.train_limit / data.test_limit = `limit`, picked
    as data.limit_subset says (random: by train.seed); None = all."""
    if not 0 < limit < n:
        return None
    # The snapshot holds the resolved configuration (every key): one without the key comes from a
    # ddp_train whose limits took the first N.
    if config.get("data", {}).get("limit_subset", "first") == "first":
        return list(range(limit))
    return random_subset(n, limit, int(config.get("train", {}).get("seed", 0)), split)


def _pick(arrays, limit, config, split):
    idx = _limited(len(arrays[0]), limit, config, split)
    return arrays if idx is None else [a[idx] for a in arrays]


def _cifar10_records(files, limit, config, split):
    """The records ddp_train uses with data.train_limit / data.test_limit = `limit`, picked as
    data.limit_subset says (random: by train.seed)."""
    raw = b"".join(open(f, "rb").read() for f in files)
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
    (rec,) = _pick([rec], limit, config, split)
    return rec[:, 1:].reshape(-1, 3, 32, 32), rec[:, 0].astype(np.int64)


def _cifar100_records(path, limit, config, split):
    rec = np.frombuffer(open(path, "rb").read(), dtype=np.uint8).reshape(-1, 3074)
    (rec,) = _pick([rec], limit, config, split)
    return rec[:, 2:].reshape(-1, 3, 32, 32), rec[:, 1].astype(np.int64)  # the fine label


def _idx(root, prefix, kind):
    """An IDX file of an MNIST-style directory, raw or gzipped, as a numpy array."""
    name = f"{prefix}-{kind}-{'idx3' if kind == 'images' else 'idx1'}-ubyte"
    for path, opener in ((os.path.join(root, name), open), (os.path.join(root, name + ".gz"), gzip.open)):
        if os.path.isfile(path):
            with opener(path, "rb") as f:
                raw = f.read()
            dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(raw[3])]
            return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * raw[3]).reshape(dims)
    raise FileNotFoundError(f"no {name} (or .gz) in {root!r}")


def _mnist_records(root, limit, config, split):
    prefix = "train" if split == 0 else "t10k"
    images, labels = _idx(root, prefix, "images"), _idx(root, prefix, "labels")
    images, labels = _pick([images, labels], limit, config, split)
    return images.reshape(-1, 1, images.shape[1], images.shape[2]), labels.astype(np.int64)


def _packed_records(path, limit, config, split):
    """(images, labels): raw packs as uint8 [N,C,H,W]; encoded ones as a list of their JPEG/PNG
    bytes."""
    with h5py.File(path, "r") as f:
        labels = np.asarray(f["labels"][()], dtype=np.int64)
        idx = _limited(len(labels), limit, config, split)
        idx = range(len(labels)) if idx is None else idx
        if "images" in f:
            images = np.asarray(f["images"][()], dtype=np.uint8)[list(idx)]
        else:
            data, offsets = f["encoded"], np.asarray(f["offsets"][()], dtype=np.int64)
            images = [bytes(data[offsets[i]:offsets[i + 1]]) for i in idx]
    return images, labels[list(idx)]


def _records(config, split, root=None, packed_file=None, limit=None):
    """(images, labels) of a split as ddp_train reads it, before any transform."""
    data = config.get("data", {})
    dataset = data.get("dataset", "cifar10")
    key = "train_limit" if split == 0 else "test_limit"
    limit = int(data.get(key, 0)) if limit is None else limit
    root = root or data.get("root", "")
    if dataset == "cifar10":
        names = [f"data_batch_{i}.bin" for i in range(1, 6)] if split == 0 else ["test_batch.bin"]
        files = [os.path.join(root, n) for n in names]
        if not all(os.path.isfile(f) for f in files):
            raise FileNotFoundError(f"no CIFAR-10 {', '.join(names)} in {root!r}; give --data-root")
        return _cifar10_records(files, limit, config, split)
    if dataset == "cifar100":
        path = os.path.join(root, "train.bin" if split == 0 else "test.bin")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no CIFAR-100 {os.path.basename(path)} in {root!r}; give --data-root")
        return _cifar100_records(path, limit, config, split)
    if dataset in ("mnist", "fashion_mnist"):
        return _mnist_records(root, limit, config, split)
    if dataset == "packed":
        path = packed_file or data.get("train_file" if split == 0 else "test_file", "")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"packed file {path!r} not found; give --test-file")
        return _packed_records(path, limit, config, split)
    raise ValueError(f"data.dataset = {dataset!r} is not one this script reads")


def _normalisation(config, root, channels=3):
    """Per-channel (mean, std) as float32 on the [0,1] scale, as ddp_train computes them."""
    data = config.get("data", {})
    how = data.get("normalize", "config")
    if how == "none":
        return np.zeros(channels, np.float32), np.ones(channels, np.float32)
    if how == "dataset":  # exact integer sums over the training set, as data::compute_normalization
        px, _ = _records(config, 0, root=root)
        if isinstance(px, list):
            raise ValueError("data.normalize = dataset on an encoded pack: ddp_train refuses it too")
        count = px.shape[0] * px.shape[2] * px.shape[3]
        s = px.astype(np.uint64).sum(axis=(0, 2, 3))
        q = (px.astype(np.uint64) ** 2).sum(axis=(0, 2, 3))
        mean = s.astype(np.float64) / count
        var = np.maximum(0.0, q.astype(np.float64) / count - mean * mean)
        return (mean / 255.0).astype(np.float32), (np.sqrt(var) / 255.0).astype(np.float32)
    mean = np.broadcast_to(np.asarray(data.get("mean", [0.5]), np.float64), channels)
    std = np.broadcast_to(np.asarray(data.get("std", [0.5]), np.float64), channels)
    return mean.astype(np.float32), std.astype(np.float32)


def _eval_transform(config):
    """data.train_size's evaluation transform (torchvision's Resize + CenterCrop on PIL images),
    or None when images keep their size."""
    data = config.get("data", {})
    size = int(data.get("train_size", 0))
    if size <= 0:
        return None
    from torchvision import transforms  # PIL-backed
    crop = int(data.get("eval_crop", 0)) or size
    resize = int(data.get("eval_resize", 0)) or (crop * 8 + 6) // 7
    return transforms.Compose([transforms.Resize(resize), transforms.CenterCrop(crop)])


def test_set(config, root=None, limit=None, packed_file=None):
    """(images float32 [N,C,H,W], labels int64 [N]): the run's test images (`limit`, default
    data.test_limit, picked as data.limit_subset says) after its evaluation transform, normalised
    as ddp_train does: p * (1/(255 sd)) + (-mean/sd)."""
    px, labels = _records(config, 1, root=root, packed_file=packed_file, limit=limit)
    transform = _eval_transform(config)
    if isinstance(px, list) or transform is not None:
        import io

        from PIL import Image
        channels = _records_channels(config, packed_file) if isinstance(px, list) else px.shape[1]
        mode = "L" if channels == 1 else "RGB"
        out = []
        for p in px:
            img = (Image.open(io.BytesIO(p)).convert(mode) if isinstance(p, bytes) else
                   Image.fromarray(p[0] if channels == 1 else np.transpose(p, (1, 2, 0)), mode))
            if transform is not None:
                img = transform(img)
            a = np.asarray(img, dtype=np.uint8)
            out.append(a[None] if a.ndim == 2 else np.transpose(a, (2, 0, 1)))
        px = np.stack(out)
    mean, std = _normalisation(config, root, px.shape[1])
    sd = std.astype(np.float64)
    scale = (1.0 / (255.0 * sd)).astype(np.float32).reshape(1, -1, 1, 1)
    offset = (-mean.astype(np.float64) / sd).astype(np.float32).reshape(1, -1, 1, 1)
    return px.astype(np.float32) * scale + offset, labels


def _records_channels(config, packed_file):
    path = packed_file or config.get("data", {}).get("test_file", "")
    with h5py.File(path, "r") as f:
        return int(f.attrs.get("channels", 3))


def cifar10_test_set(config, root, limit=None):
    """test_set for a CIFAR-10 run (kept for callers of earlier versions)."""
    return test_set(config, root, limit)


@torch.no_grad()
def evaluate(model, images, labels, batch_size=256):
    """(correct, summed cross-entropy) of the model in eval mode."""
    model.eval()
    correct, loss = 0, 0.0
    for b in range(0, len(labels), batch_size):
        x = torch.from_numpy(np.ascontiguousarray(images[b:b + batch_size]))
        y = torch.from_numpy(labels[b:b + batch_size])
        logits = model(x)
        correct += int((logits.argmax(1) == y).sum())
        loss += float(nn.functional.cross_entropy(logits.double(), y, reduction="sum"))
    return correct, loss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("--data-root", help="the dataset's directory (default: the run's data.root)")
    ap.add_argument("--test-file", help="packed runs: the test file (default: the run's data.test_file)")
    ap.add_argument("--test-limit", type=int, help="N test images, picked as the run's data.limit_subset says "
                    "(default: data.test_limit)")
    ap.add_argument("--save", help="also write the model's state_dict here (torch.save)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    try:
        model, config = load_snapshot(args.snapshot)
    except (ValueError, OSError, KeyError) as e:
        sys.exit(f"snapshot_to_torch: {e}")
    if args.save:
        torch.save(model.state_dict(), args.save)
    try:
        images, labels = test_set(config, args.data_root, args.test_limit, args.test_file)
    except (ValueError, OSError, KeyError) as e:
        sys.exit(f"snapshot_to_torch: {e}")
    correct, loss = evaluate(model, images, labels)
    n = len(labels)
    print(f"test accuracy: {100.0 * correct / n:.2f}% ({correct} of {n} correct), "
          f"loss {loss / n:.4f}")


if __name__ == "__main__":
    main()
