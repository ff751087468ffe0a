#!/usr/bin/env python3
"""PyTorch's side of bench/gpu_compare.sh: the training step of a ddp_train preset as PyTorch users
run it on a GPU, measured in images/s.

The model is the preset's PyTorch counterpart (scripts/snapshot_to_torch.py build_model: the CIFAR
ResNets of He et al. as ddp_train's resnet20/resnet56 presets build them, torchvision's resnet18,
resnet50 and mobilenet_v2 with the preset's stem: cifar for inputs of at most 64 px), in training
mode, channels_last, on one synthetic batch that stays on the device (N(0, 1) inputs, random
labels). A step: forward and cross-entropy (under torch.autocast(bfloat16) for bf16), backward, SGD
(momentum 0.9, Nesterov, weight decay 5e-4 as ddp_train's CIFAR configs; fused where this PyTorch
has it, else foreach), zero_grad(set_to_none=True). cudnn.benchmark = True; TF32 for cuDNN
convolutions as PyTorch defaults it (on); matmul TF32 as PyTorch defaults it (off) unless
--matmul-tf32 (gpu_compare.sh sets it for the fp32 rows: "TF32 on both sides"). The compiled peer is torch.compile(mode=...) of
forward + loss (its backward compiled by AOTAutograd), the optimizer step left eager (fused).

One measurement (the default), e.g. the CPU self-test that needs no GPU:

    python3 bench/torch_gpu_step.py --model resnet20 --device cpu --tiny

prints one JSON object ({"event": "run", ...}). --params prints the model's parameter count and
exits. --serve is gpu_compare.py's protocol: it prints {"event": "loaded", ...} (versions,
settings) and then answers one JSON line per command read from standard input:

    warm                     untimed steps (cuDNN's algorithm search) -> {"event": "ready"}
    compile MODE             torch.compile(mode=MODE), first steps  -> {"event": "compiled"} or
                                                                       {"event": "compile_failed"}
    run eager|compiled S R   a measurement of about S seconds, round R -> {"event": "run"}
    quit (or end of input)   exit

A measurement: 1 untimed step, 3 steps timed to size it, then max(5, S / their mean) steps timed
between two device synchronisations (images/s = batch x steps / that time).
"""
import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIMIZER = {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4}


def build_model(name, image, classes):
    """ddp_train's preset `name` in PyTorch, for square inputs of `image` px."""
    sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
    from snapshot_to_torch import build_model as preset_model

    # model.stem = auto: the cifar stem for images of at most 64 px (preset::stem_of).
    return preset_model(name, classes, "cifar" if image <= 64 else "imagenet")


def versions():
    import torch

    info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "python": platform.python_version(), "compile_available": hasattr(torch, "compile")}
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        info["torchvision"] = None
    try:
        info["torch_cudnn"] = torch.backends.cudnn.version()
    except Exception:  # no cuDNN in this build
        info["torch_cudnn"] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def attribute(obj, name):
    """getattr or None (torch.backends.cuda.matmul raises AssertionError for unknown names)."""
    try:
        return getattr(obj, name)
    except (AttributeError, AssertionError):
        return None


def tf32_settings(torch, matmul_on):
    """Turns TF32 on for float32 matmuls when asked (else leaves PyTorch's default) and returns
    what is in effect for matmuls and for cuDNN's convolutions. PyTorch >= 2.9 has a new switch
    (fp32_precision) and fails in Inductor's lowering when the old one (allow_tf32) was used as
    well, so only the new one is touched where it exists."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if attribute(matmul, "fp32_precision") is not None:
        if matmul_on:
            matmul.fp32_precision = "tf32"
        conv_precision = attribute(attribute(cudnn, "conv"), "fp32_precision")
        return (matmul.fp32_precision == "tf32",
                None if conv_precision is None else conv_precision == "tf32")
    if matmul_on:
        matmul.allow_tf32 = True
    return bool(matmul.allow_tf32), bool(cudnn.allow_tf32)


def make_optimizer(torch, params, device):
    """SGD as ddp_train's CIFAR configs: fused where this PyTorch has it, else foreach."""
    import inspect

    accepted = inspect.signature(torch.optim.SGD.__init__).parameters
    if device.type == "cuda" and "fused" in accepted:
        try:
            return torch.optim.SGD(params, fused=True, **OPTIMIZER), "fused"
        except (RuntimeError, ValueError, TypeError):
            pass
    if "foreach" in accepted:
        return torch.optim.SGD(params, foreach=True, **OPTIMIZER), "foreach"
    return torch.optim.SGD(params, **OPTIMIZER), "for-loop"


class Peer:
    """One model, its batch and optimizer; eager and (after compile()) compiled steps."""

    def __init__(self, args):
        import torch
        import torch.nn.functional as F

        self.torch = torch
        self.device = torch.device(args.device)
        self.batch = args.batch
        self.bf16 = args.precision == "bf16"
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True
        self.matmul_tf32, self.cudnn_tf32 = tf32_settings(torch, args.matmul_tf32)
        torch.manual_seed(1)
        model = build_model(args.model, args.image, args.classes)
        self.model = model.to(self.device).to(memory_format=torch.channels_last).train()
        self.params = sum(p.numel() for p in self.model.parameters())
        shape = (args.batch, 3, args.image, args.image)
        self.x = torch.randn(shape, device=self.device).contiguous(
            memory_format=torch.channels_last)
        self.y = torch.randint(0, args.classes, (args.batch,), device=self.device)
        self.opt, self.optimizer = make_optimizer(torch, self.model.parameters(), self.device)
        model, device_type, bf16 = self.model, self.device.type, self.bf16

        def loss(x, y):  # a closure over plain locals: what torch.compile traces best
            with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=bf16):
                return F.cross_entropy(model(x), y)

        self.loss = loss
        self.steps = {"eager": loss}
        self.compile_mode = None
        self.last_loss = None
        compiler = getattr(torch, "compiler", None)
        self.mark_step = getattr(compiler, "cudagraph_mark_step_begin", None)

    def step(self, side):
        if side == "compiled" and self.mark_step is not None:
            self.mark_step()  # a new iteration for CUDA graph trees (outputs of the last one die)
        loss = self.steps[side](self.x, self.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.last_loss = loss.detach()

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def warm(self, steps):
        for _ in range(steps):
            self.step("eager")
        self.sync()

    def compile(self, mode):
        """torch.compile(mode) of forward + loss, then 3 steps (compilation of forward and
        backward, CUDA graph recording); returns their seconds and what the compiler counted:
        graphs (more than 1: graph breaks) and CUDA graph skips (mode's graphs not used)."""
        self.steps["compiled"] = self.torch.compile(self.loss, mode=mode)
        self.compile_mode = mode
        t0 = time.perf_counter()
        for _ in range(3):
            self.step("compiled")
        self.sync()
        out = {"seconds": time.perf_counter() - t0}
        try:
            from torch._dynamo.utils import counters

            out["graphs"] = int(counters["stats"]["unique_graphs"])
            out["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
        except Exception:  # noqa: BLE001 - private counters: report them where they exist
            pass
        return out

    def measure(self, side, seconds, fixed_steps=0):
        self.step(side)
        self.sync()
        if fixed_steps > 0:
            steps = fixed_steps
        else:
            t = time.perf_counter()
            for _ in range(3):
                self.step(side)
            self.sync()
            per = (time.perf_counter() - t) / 3
            steps = max(5, min(100000, int(seconds / max(per, 1e-6))))
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step(side)
        self.sync()
        dt = time.perf_counter() - t0
        return {"steps": steps, "seconds": dt, "ms_per_step": 1e3 * dt / steps,
                "images_per_s": self.batch * steps / dt, "loss_last": float(self.last_loss)}

    def settings(self):
        return {"params": self.params, "optimizer": self.optimizer,
                "matmul_tf32": self.matmul_tf32, "cudnn_tf32": self.cudnn_tf32,
                "cudnn_benchmark": self.device.type == "cuda", "channels_last": True,
                "autocast": "bfloat16" if self.bf16 else None}


def emit(obj):
    print(json.dumps(obj), flush=True)


def serve(args):
    peer = Peer(args)
    row = {"model": args.model, "precision": args.precision, "batch": args.batch,
           "image": args.image}
    emit({"event": "loaded", **row, **versions(), **peer.settings()})
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return 0
        try:
            answer(peer, row, words, args)
        except Exception as e:  # noqa: BLE001 - reported to gpu_compare.py, which stops the row
            emit({"event": "error", **row, "reason": f"{line.strip()}: {type(e).__name__}: {e}"})


def answer(peer, row, words, args):
    """One command of the protocol (see the module's doc)."""
    if words[0] == "warm":
        peer.warm(args.warmup)
        emit({"event": "ready", **row})
    elif words[0] == "compile":
        mode = words[1] if len(words) > 1 else "max-autotune"
        try:
            emit({"event": "compiled", **row, "mode": mode, **peer.compile(mode)})
        except Exception as e:  # noqa: BLE001 - any failure of the compiler is reported
            peer.steps.pop("compiled", None)
            first = str(e).splitlines()[0] if str(e) else ""
            emit({"event": "compile_failed", **row, "mode": mode,
                  "reason": f"{type(e).__name__}: {first}"})
    elif words[0] == "run" and len(words) == 4 and words[1] in peer.steps:
        result = peer.measure(words[1], float(words[2]), args.steps)
        emit({"event": "run", "side": words[1], **row, "round": int(words[3]),
              "compile_mode": peer.compile_mode if words[1] == "compiled" else None, **result})
    else:
        emit({"event": "error", **row, "reason": f"unknown command {' '.join(words)!r}"})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True,
                   choices=["resnet20", "resnet56", "resnet18", "resnet50", "mobilenet_v2"])
    p.add_argument("--batch", type=int, default=0, help="default: 512 at 32 px, 128 above")
    p.add_argument("--image", type=int, default=32, help="side of the square inputs (px)")
    p.add_argument("--classes", type=int, default=0, help="default: 10 up to 64 px, else 1000")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--matmul-tf32", action="store_true", help="TF32 for float32 matmuls")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seconds", type=float, default=1.0, help="timed seconds per measurement")
    p.add_argument("--steps", type=int, default=0, help="timed steps (0: by --seconds)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps of 'warm'")
    p.add_argument("--tiny", action="store_true",
                   help="self-test: batch 2, 1 warm-up and 2 timed steps, no compile")
    p.add_argument("--params", action="store_true", help="print the parameter count and exit")
    p.add_argument("--serve", action="store_true", help="gpu_compare.py's protocol (see above)")
    args = p.parse_args(argv)
    if args.classes <= 0:
        args.classes = 10 if args.image <= 64 else 1000
    if args.batch <= 0:
        args.batch = 512 if args.image <= 64 else 128
    if args.tiny:
        args.batch, args.warmup, args.steps = 2, 1, 2
    if args.params:
        model = build_model(args.model, args.image, args.classes)
        print(sum(p.numel() for p in model.parameters()))
        return 0
    if args.serve:
        return serve(args)
    peer = Peer(args)
    peer.warm(args.warmup)
    emit({"event": "run", "side": "eager", "model": args.model, "precision": args.precision,
          "batch": args.batch, "image": args.image, "round": 0, **versions(), **peer.settings(),
          **peer.measure("eager", args.seconds, args.steps)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
