#!/usr/bin/env python3
"""The table of bench/gpu_compare.sh: its raw records (JSON lines) -> Markdown for BENCHMARKS.md.

    python3 bench/gpu_compare_table.py RAW.jsonl      (what gpu_compare.sh --from-raw RAW runs)

Per row (model, precision): the median images/s of each side over all its runs, the smallest and
largest in brackets, and the ratio of ddp_train's median to each peer's median (above 1:
ddp_train is faster); then every run's numbers. Standard library only: it runs where PyTorch is
not installed.

The records (one JSON object a line, "kind" says which):
  header   the run's settings and the GPU as nvidia-smi names it (gpu_compare.py writes it first)
  peer     PyTorch's versions and settings for a row (the server's "loaded" answer)
  run      one measurement: side (ours | eager | compiled), model, precision, batch, image, round,
           phase (eager: ours and eager only; compile: ours, eager and compiled), images_per_s,
           ms_per_step, steps, seconds; ddp_train's also carry gpu, versions, algorithms,
           batch_norm and, with --ours-variant, variant (its name)

With variants (the header's "variants": [[name, gpu_bench args], ...]) the table has a row per
(model, precision, variant), each with the same PyTorch figures, and says each variant's arguments.
  compile  torch.compile of a row: mode, status (ok | failed | timeout | skipped), seconds, reason
  note     a row or the run could not be measured as planned: text
  end      elapsed_s
"""
import json
import sys

MODEL_ORDER = ["resnet20", "resnet56", "resnet18", "resnet50", "mobilenet_v2"]
PRECISION_ORDER = ["fp32", "bf16"]
SIDES = ["ours", "eager", "compiled"]


def median(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def load(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except ValueError as e:
                raise SystemExit(f"gpu_compare_table: {path}:{number}: not JSON: {e}") from None
    return records


def _row_key(r):
    return (r["model"], r["precision"])


def _order(keys):
    def rank(k):
        m = MODEL_ORDER.index(k[0]) if k[0] in MODEL_ORDER else len(MODEL_ORDER)
        p = PRECISION_ORDER.index(k[1]) if k[1] in PRECISION_ORDER else len(PRECISION_ORDER)
        return (m, k[0], p)

    return sorted(keys, key=rank)


def images(v):
    return f"{v:,.0f}"


def cell(values):
    """'median (min-max)' of images/s; '-' without runs."""
    if not values:
        return "-"
    return f"{images(median(values))} ({images(min(values))}-{images(max(values))})"


def ratio(ours, peer):
    if not ours or not peer:
        return "-"
    return f"{median(ours) / median(peer):.2f}"


def _versions_line(header, ours_run, peer):
    parts = []
    gpu = (ours_run or {}).get("gpu") or (peer or {}).get("gpu") or header.get("gpu")
    if gpu:
        parts.append(gpu)
    if header.get("driver"):
        parts.append(f"driver {header['driver']}")
    if ours_run and ours_run.get("versions"):
        parts.append(f"ddp_train: {ours_run['versions']}")
    if peer:
        torch_part = f"PyTorch {peer.get('torch')} (CUDA {peer.get('torch_cuda')}"
        if peer.get("torch_cudnn"):
            c = int(peer["torch_cudnn"])
            # cuDNN >= 9 encodes major * 10000 + minor * 100 + patch, older ones major * 1000 + ...
            v = (c // 10000, c % 10000 // 100, c % 100) if c >= 90000 else (
                c // 1000, c % 1000 // 100, c % 100)
            torch_part += f", cuDNN {v[0]}.{v[1]}.{v[2]}"
        torch_part += f"), torchvision {peer.get('torchvision')}, Python {peer.get('python')}"
        parts.append(torch_part)
    return "; ".join(parts)


def _compile_cell(attempts):
    """The compiled column's 'with': the mode that ran and its compile time, or why none."""
    ok = [a for a in attempts if a.get("status") == "ok"]
    if ok:
        a = ok[-1]
        text = f"{a['mode']}, {a.get('seconds', 0):.0f} s"
        if a.get("cudagraph_skips"):
            text += ", CUDA graphs skipped"
        if a.get("graphs", 1) > 1:
            text += f", {a['graphs']} graphs"
        return text
    return "-"


def _compile_notes(key, attempts):
    notes = []
    for a in attempts:
        if a.get("status") == "ok":
            continue
        what = f"torch.compile(mode={a.get('mode')})"
        if a.get("status") == "timeout":
            notes.append(f"{what} did not finish within {a.get('seconds', 0):.0f} s; stopped")
        elif a.get("status") == "skipped":
            notes.append(f"{what} not run: {a.get('reason', '')}")
        else:
            notes.append(f"{what} failed: {a.get('reason', '')}")
    return [f"{key[0]} {key[1]}: {n}" for n in notes]


def _variant_text(name, header, runs):
    """`name` (`gpu_bench ARGS`: algorithms by ..., batch norm ...) for the settings line."""
    args = next((v[1] for v in header.get("variants", []) if v[0] == name), None)
    run = next((r for r in runs if r.get("variant") == name), {})
    text = f"**{name}**" + (f" (`{args}`)" if args else " (defaults)" if args == "" else "")
    said = [f"cuDNN algorithms by {run['algorithms']}"] if run.get("algorithms") else []
    said += [f"batch norm {run['batch_norm']}"] if run.get("batch_norm") else []
    return text + (": " + ", ".join(said) if said else "")


def render(records):
    header = next((r for r in records if r.get("kind") == "header"), {})
    runs = [r for r in records if r.get("kind") == "run"]
    peers = [r for r in records if r.get("kind") == "peer"]
    compiles = [r for r in records if r.get("kind") == "compile"]
    notes = [r for r in records if r.get("kind") == "note"]
    end = next((r for r in records if r.get("kind") == "end"), {})
    keys = _order({_row_key(r) for r in runs} | {_row_key(r) for r in compiles if "model" in r}
                  | {_row_key(r) for r in notes if "model" in r})

    ours_run = next((r for r in runs if r["side"] == "ours"), None)
    variants = [v[0] for v in header.get("variants", [])]
    for r in runs:  # variants only in the runs (a header from before them)
        if r.get("variant") and r["variant"] not in variants:
            variants.append(r["variant"])
    peer = peers[0] if peers else None
    out = ["## GPU side by side: ddp_train and PyTorch on the same GPU (bench/gpu_compare.sh)", ""]
    line = _versions_line(header, ours_run, peer)
    if line:
        out += [line + ".", ""]
    rounds = header.get("rounds")
    fp32_peer = next((p for p in peers if p.get("precision") == "fp32"), None)
    bf16_peer = next((p for p in peers if p.get("precision") == "bf16"), None)
    settings = [
        "Synthetic batches resident on the GPU on both sides, training mode (batch statistics), "
        "SGD with momentum 0.9, Nesterov, weight decay 5e-4"
        + (f" (PyTorch: {peer.get('optimizer')} SGD)" if peer else "") + ".",
        "fp32 rows: TF32 on both sides (ddp_train `--tf32`; PyTorch: cuDNN convolutions in TF32, "
        "its default"
        + (f", matmul TF32 {'on (set)' if fp32_peer.get('matmul_tf32') else 'off'}"
           if fp32_peer else "") + ").",
        "bf16 rows: ddp_train's bf16 convolutions and linear layers (`--precision bf16`); "
        "PyTorch `torch.autocast(bfloat16)`"
        + (f", matmul TF32 {'on' if bf16_peer.get('matmul_tf32') else 'off'}" if bf16_peer else "")
        + ".",
        "PyTorch eager: channels_last, `cudnn.benchmark = True`. torch.compile: forward + loss "
        "compiled (backward by AOTAutograd), optimizer eager; its mode and compile time per row.",
        f"ddp_train: `gpu_bench --no-upload`, cuDNN algorithms by "
        f"{(ours_run or {}).get('algorithms', 'heuristics')}"
        + (f", batch norm {ours_run['batch_norm']}" if (ours_run or {}).get("batch_norm") else "")
        + "." if not variants else
        "ddp_train: `gpu_bench --no-upload` as variants (a gpu_bench each, measured in the same "
        "rounds): " + "; ".join(_variant_text(v, header, runs) for v in variants) + ".",
        "images/s: median over the runs"
        + (f" ({rounds} interleaved rounds: ddp_train, eager, compiled; rows with torch.compile "
           "ran their rounds again with it)" if rounds else "")
        + ", smallest and largest in brackets; ours/peer = ratio of the medians (above 1: "
        "ddp_train is faster).",
    ]
    if header:
        per_run = (f"about {header['seconds']} s per run" if header.get("seconds") != "auto"
                   else "timed seconds per run sized to the budget (column s below)")
        took = f", took {end['elapsed_s']:.0f} s" if end.get("elapsed_s") is not None else ""
        settings.append(
            f"Measured {header.get('date', '?')} on {header.get('host', '?')}, source "
            f"{header.get('source', '?')}, {per_run}, budget {header.get('budget', 0):.0f} s"
            f"{took}.")
    out += [f"- {s}" for s in settings] + [""]

    out.append("| model | input, batch | precision | "
               + ("ddp_train variant | " if variants else "")
               + "ddp_train images/s | PyTorch eager | "
               "ours/eager | torch.compile | ours/compiled | compiled with |")
    out.append("|---|---|---|" + ("---|" if variants else "") + "---|---|---|---|---|---|")
    row_notes = []
    for key in keys:
        rr = [r for r in runs if _row_key(r) == key]
        by = {s: [r["images_per_s"] for r in rr if r["side"] == s] for s in SIDES}
        geometry = next(((r.get("image"), r.get("batch")) for r in rr), (None, None))
        attempts = [c for c in compiles if c.get("model") == key[0]
                    and c.get("precision") == key[1]]
        for v in variants or [None]:
            ours = by["ours"] if v is None else [
                r["images_per_s"] for r in rr if r["side"] == "ours" and r.get("variant") == v]
            out.append(
                f"| {key[0]} | "
                + (f"{geometry[0]}x{geometry[0]}, {geometry[1]}" if geometry[0] else "-")
                + f" | {key[1]} | " + (f"{v} | " if v is not None else "")
                + f"{cell(ours)} | {cell(by['eager'])} | "
                f"{ratio(ours, by['eager'])} | {cell(by['compiled'])} | "
                f"{ratio(ours, by['compiled'])} | {_compile_cell(attempts)} |")
        row_notes += _compile_notes(key, attempts)
        row_notes += [f"{key[0]} {key[1]}: {n['text']}" for n in notes
                      if n.get("model") == key[0] and n.get("precision") == key[1]]
    row_notes += [n["text"] for n in notes if "model" not in n]
    if row_notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in row_notes]

    out += ["", "### Every run", "",
            "| model | precision | phase | round | side | images/s | ms/step | steps | s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        side = r["side"] + (f" ({r['compile_mode']})" if r.get("compile_mode") else "") + (
            f" {r['variant']}" if r.get("variant") else "")
        out.append(f"| {r['model']} | {r['precision']} | {r.get('phase', '-')} | "
                   f"{r.get('round')} | {side} | {r['images_per_s']:.1f} | "
                   f"{r['ms_per_step']:.3f} | {r['steps']} | {r['seconds']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: gpu_compare_table.py RAW.jsonl")
    sys.stdout.write(render(load(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
