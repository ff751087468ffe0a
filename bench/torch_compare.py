#!/usr/bin/python3
"""PyTorch reference for ddp_bench: the same two nets, the same step, the same table.

Runs LeNet and the VGG-style net of bench/train_bench.cpp in train mode on fixed synthetic
CIFAR-10-shaped data (3x32x32 ~ N(0,1), 10 classes), batch 256, SGD lr 0.01 momentum 0.9, at each
requested thread count (torch.set_num_threads), and prints images/s in ddp_bench's table format.

Use the Debian interpreter, which has python3-torch (1.13):

    /usr/bin/python3 bench/torch_compare.py --model all --threads 1,2 --seconds 3 [--csv]

Before measuring it checks that libopenblas0 is installed and that the BLAS torch actually loaded is
OpenBLAS: Debian's torch does its nn.Linear matrix products through libblas.so.3, which falls back
to the (many times slower) reference BLAS without it, which would flatter ddp_train.
"""

import argparse
import os
import platform
import shlex
import socket
import subprocess
import sys
import time

MODELS = ("lenet", "vgg")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="all", choices=("lenet", "vgg", "all"))
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts, e.g. 1,2")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--steps", type=int, default=0, help="timed steps (0: run for --seconds)")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="timed seconds per model and thread count")
    p.add_argument("--min-steps", type=int, default=3)
    p.add_argument("--csv", action="store_true",
                   help="also print csv,torch,model,threads,batch,steps,ms_mean,ms_median,"
                        "images_per_s,gflops lines")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    try:
        a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    except ValueError:
        p.error(f"--threads {a.threads!r}: expected a comma-separated list of integers")
    if not a.threads or min(a.threads) < 1:
        p.error("--threads: every thread count must be >= 1")
    if a.batch < 1:
        p.error("--batch must be >= 1")
    return a


def openblas_status():
    """(ok, message): is libopenblas0 installed and is it the BLAS this process loaded?"""
    msgs = []
    ok = True
    try:
        st = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", "libopenblas0"],
                            capture_output=True, text=True, check=False)
        installed = st.returncode == 0 and st.stdout.startswith("install ok installed")
        if installed:
            msgs.append("libopenblas0 " + st.stdout.split()[-1] + " installed")
        else:
            ok = False
            msgs.append("WARNING: libopenblas0 is NOT installed: torch's BLAS calls (nn.Linear) "
                        "fall back to the reference BLAS and the torch figures are too low; "
                        "install it: apt-get install libopenblas0")
    except FileNotFoundError:
        msgs.append("dpkg-query not found: cannot check for libopenblas0")
    # Which BLAS did the process map? (torch is imported by now)
    blas = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "blas" in os.path.basename(path):
                    blas.add(os.path.realpath(path))
    except OSError:
        pass
    if blas:
        msgs.append("BLAS loaded: " + ", ".join(sorted(blas)))
        if not any("openblas" in b for b in blas):
            ok = False
            msgs.append("WARNING: the BLAS loaded is not OpenBLAS (reference BLAS?); check "
                        "update-alternatives --display libblas.so.3-x86_64-linux-gnu")
    return ok, msgs


def build(name, nn):
    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10))


def forward_flops(model, nn, shape=(3, 32, 32)):
    """Per-sample forward FLOPs counted as ddp_train's layers count them (2 x multiply-adds for
    conv/linear, one per window element for pooling)."""
    c, h, w = shape
    total = 0.0
    for m in model:
        if isinstance(m, nn.Conv2d):
            k, r, s = m.out_channels, m.kernel_size[0], m.kernel_size[1]
            oh = (h + 2 * m.padding[0] - r) // m.stride[0] + 1
            ow = (w + 2 * m.padding[1] - s) // m.stride[1] + 1
            total += 2.0 * k * oh * ow * c * r * s
            c, h, w = k, oh, ow
        elif isinstance(m, nn.MaxPool2d):
            kk = m.kernel_size
            oh, ow = h // kk, w // kk
            total += float(c * oh * ow * kk * kk)
            h, w = oh, ow
        elif isinstance(m, nn.Linear):
            total += 2.0 * m.in_features * m.out_features
    return total


def run_one(torch, nn, name, threads, a, x, y):
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    model = build(name, nn).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()  # mean over the batch: the 1/batch gradient scale

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    loss_first = step()
    for _ in range(1, a.warmup):
        step()
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        loss_last = step()
        times.append(time.perf_counter() - t0)
        done = len(times)
        if (done >= a.steps) if a.steps > 0 else (
                done >= a.min_steps and time.perf_counter() - start >= a.seconds):
            break
    total = sum(times)
    srt = sorted(times)
    flops = forward_flops(model, nn)
    img_s = a.batch * len(times) / total
    return dict(model=name, threads=torch.get_num_threads(), batch=a.batch, steps=len(times),
                mean_ms=1e3 * total / len(times), median_ms=1e3 * srt[len(srt) // 2],
                min_ms=1e3 * srt[0], img_s=img_s, gflops=3.0 * flops * img_s / 1e9,
                params=sum(p.numel() for p in model.parameters()), mflop=flops / 1e6,
                loss_first=loss_first, loss_last=loss_last)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    a = parse_args()
    command = " ".join(shlex.quote(s) for s in [sys.executable] + sys.argv)
    try:
        import torch
        from torch import nn
    except ImportError:
        sys.exit("torch_compare.py: cannot import torch with " + sys.executable +
                 "; run it with /usr/bin/python3 (Debian's python3-torch)")
    torch.set_num_interop_threads(1)

    print("torch_compare: training-step throughput, synthetic CIFAR-10 (3x32x32, 10 classes)")
    print("command : " + command)
    print(f"host    : {socket.gethostname()}, {cpu_model()}, {os.cpu_count()} CPUs online")
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        capability = "?"
    print(f"torch   : {torch.__version__}, mkldnn (oneDNN) "
          f"{'on' if torch.backends.mkldnn.is_available() else 'off'}, "
          f"CPU capability {capability}")
    env = [f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                                            "OMP_PLACES") if k in os.environ]
    print("env     : " + (", ".join(env) if env else "(no OpenMP variables set)"))
    ok, msgs = openblas_status()
    for m in msgs:
        print("blas    : " + m)
    print("step    : forward, cross-entropy, backward, SGD (lr 0.01, momentum 0.9), train mode")
    if a.steps > 0:
        print(f"timing  : {a.warmup} warm-up steps, then {a.steps} timed steps")
    else:
        print(f"timing  : {a.warmup} warm-up steps, then timed steps for {a.seconds:.1f} s "
              f"(at least {a.min_steps})")

    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)

    results = []
    for name in (MODELS if a.model == "all" else (a.model,)):
        rs = [run_one(torch, nn, name, t, a, x, y) for t in a.threads]
        f = rs[0]
        print(f"\nmodel {name}: {f['params']} parameters, {f['mflop']:.2f} MFLOP forward per "
              "sample (training ~3x)")
        print(f"  {'threads':>7} {'batch':>6} {'steps':>6} {'ms/step':>10} {'median ms':>10} "
              f"{'min ms':>10} {'images/s':>11} {'GFLOP/s':>9} {'loss':>10}")
        for r in rs:
            print(f"  {r['threads']:7d} {r['batch']:6d} {r['steps']:6d} {r['mean_ms']:10.3f} "
                  f"{r['median_ms']:10.3f} {r['min_ms']:10.3f} {r['img_s']:11.1f} "
                  f"{r['gflops']:9.2f} {r['loss_first']:4.3f}->{r['loss_last']:.3f}")
        print("  command: " + command)
        results += rs
    if a.csv:
        print()
        for r in results:
            print(f"csv,torch,{r['model']},{r['threads']},{r['batch']},{r['steps']},"
                  f"{r['mean_ms']:.4f},{r['median_ms']:.4f},{r['img_s']:.2f},{r['gflops']:.3f}")
        if not ok:
            print("csv,warning,openblas")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
