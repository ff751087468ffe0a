#!/usr/bin/python3
"""PyTorch 1.13 DDP on gloo with 2 processes, 1 thread each, 256 samples per rank per step, the same
LeNet and VGG-style nets as ddp_train, synthetic CIFAR-shaped data: images/s over all ranks.
Run with Debian's python3-torch (and libopenblas0): /usr/bin/python3 bench/torch_ddp.py [--steps 40]
[--model lenet|vgg|all]. bench/ddp_scaling.sh runs it alternately with ddp_train."""
import argparse, os, time
import torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp


def lenet():
    return nn.Sequential(nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84),
                         nn.ReLU(), nn.Linear(84, 10))


def vgg():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4096, 512), nn.ReLU(), nn.Linear(512, 10))


def worker(rank, world, name, steps, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29533"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel({"lenet": lenet, "vgg": vgg}[name]())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,))
    loss_fn = nn.CrossEntropyLoss()
    for i in range(steps + 5):
        if i == 5:
            dist.barrier()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    dist.barrier()
    if rank == 0:
        out.put(world * 256 * steps / (time.perf_counter() - t0))
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--model", choices=("lenet", "vgg", "all"), default="all")
    a = ap.parse_args()
    print(f"command: /usr/bin/python3 bench/torch_ddp.py --steps {a.steps} --world {a.world} (torch {torch.__version__})")
    ctx = mp.get_context("spawn")
    for name in ("lenet", "vgg") if a.model == "all" else (a.model,):
        q = ctx.Queue()
        mp.spawn(worker, args=(a.world, name, a.steps, q), nprocs=a.world, join=True)
        print(f"{name:8s} PyTorch DDP gloo, {a.world} processes x 1 thread: {q.get():10.0f} img/s")
