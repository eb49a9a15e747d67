#!/usr/bin/env python3
"""The date task, recurrent: graft and the PyTorch reference (bench/reference/seq2seq_dates.py)
one after the other on the same data, to 99% validation exact match, for several seeds; then
the attention-vs-none table by source length at a fixed step budget (graft).

  python3 bench/reference/dates_vs_torch.py BUILD_DIR [--seeds 1,2,3] [--threads 2]
      [--baseline-steps 400] [--work /tmp/dates-vs-torch]

Both sides: bi-LSTM encoder (H/2 = 64 per direction), Bahdanau decoder, embed 64, hidden 128,
batches of 64 sentences bucketed by source length, Adam lr 2e-3, clip 5, greedy validation on
the 500 dev pairs every 100 steps, stop at 0.99 (at most 3000 steps). The data of seed N is
`graft data prepare date --seed N` (the split `train seq2seq --task date --seed N` uses). Prints
one JSON line per run (standard library only; PYTHON is the interpreter with PyTorch, default
.venv-torch/bin/python) and a markdown table at the end.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def graft_run(graft, data, run_dir, seed, threads, attention, steps, target, length_bin):
    cmd = [graft, "train", "seq2seq", "--task", "tsv", "--tokenizer", "char",
           "--tsv-train", f"{data}/train.tsv", "--tsv-valid", f"{data}/dev.tsv", "--tsv-test", f"{data}/test.tsv",
           "--cell", "lstm", "--bidirectional", "--attention", attention, "--steps", str(steps),
           "--eval-every", "100", "--seed", str(seed), "--threads", str(threads),
           "--length-bin", str(length_bin), "--run-dir", run_dir, "--overwrite"]
    if target > 0:
        cmd += ["--target", str(target)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    with open(os.path.join(run_dir, "results.json")) as f:
        r = json.load(f)
    curve, tokens = [], 0
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            tokens += int(m.get("items", 0))
            if "eval_exact" in m:
                curve.append({"step": m["step"], "exact": m["eval_exact"], "wall_s": round(m["elapsed"], 2)})
    return {"framework": "graft", "seed": seed, "threads": threads, "attention": attention,
            "steps": r["steps"], "target_tokens": tokens, "reached_target_step": r["reached_target_step"],
            "reached_target_wall_s": round(r["reached_target_wall_s"], 2), "train_wall_s": round(r["train_wall_s"], 2),
            "process_wall_s": round(wall, 2), "test_exact": r["test_exact"], "by_length": r.get("by_length", []),
            "curve": curve, "command": " ".join(cmd)}


def torch_run(python, data, run_dir, seed, threads, attention, steps, target):
    cmd = [python, os.path.join(HERE, "seq2seq_dates.py"), "--data", data, "--seed", str(seed),
           "--threads", str(threads), "--attention", attention, "--steps", str(steps), "--target", str(target),
           "--run-dir", run_dir]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    r = json.loads(out)
    r["command"] = " ".join(cmd)
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=3000)
    p.add_argument("--baseline-steps", type=int, default=400, help="0: no attention-vs-none table")
    p.add_argument("--work", default="/tmp/dates-vs-torch")
    p.add_argument("--plot", default="", help="graft plot the first seed's two runs into PLOT-step.png / PLOT-time.png")
    p.add_argument("--python", default=os.environ.get("PYTHON", os.path.join(ROOT, ".venv-torch/bin/python")))
    a = p.parse_args()
    graft = os.path.join(a.build, "tools", "graft")
    os.makedirs(a.work, exist_ok=True)
    print(json.dumps({"cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t"),
                      "uptime_before": uptime()}), flush=True)
    rows = []
    for seed in (int(s) for s in a.seeds.split(",")):
        data_root = os.path.join(a.work, f"seed{seed}")
        subprocess.run([graft, "data", "prepare", "date", "--data-dir", data_root, "--seed", str(seed)],
                       check=True, stdout=subprocess.DEVNULL)
        data = os.path.join(data_root, "date")
        g = graft_run(graft, data, os.path.join(a.work, f"graft{seed}"), seed, a.threads, "bahdanau",
                      a.max_steps, 0.99, 0)
        print(json.dumps(g), flush=True)
        t = torch_run(a.python, data, os.path.join(a.work, f"torch{seed}"), seed, a.threads, "bahdanau",
                      a.max_steps, 0.99)
        print(json.dumps(t), flush=True)
        rows.append((seed, g, t))
    baseline = []
    if a.baseline_steps > 0:
        for seed in (int(s) for s in a.seeds.split(",")):
            data = os.path.join(a.work, f"seed{seed}", "date")
            for att in ("none", "bahdanau"):
                r = graft_run(graft, data, os.path.join(a.work, f"graft{seed}-{att}-{a.baseline_steps}"), seed,
                              a.threads, att, a.baseline_steps, 0.0, 5)
                print(json.dumps(r), flush=True)
                baseline.append(r)
    print(json.dumps({"uptime_after": uptime()}), flush=True)
    if a.plot and rows:
        seed = rows[0][0]
        for x in ("step", "time"):
            subprocess.run([graft, "plot", os.path.join(a.work, f"graft{seed}"), os.path.join(a.work, f"torch{seed}"),
                            "--labels", "graft,PyTorch", "--x", x, "--out", f"{a.plot}-{x}"],
                           check=True, stdout=subprocess.DEVNULL)

    print("\n| seed | graft steps to 99% | graft wall s | PyTorch steps to 99% | PyTorch wall s | wall ratio torch/graft | graft test exact | PyTorch test exact |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for seed, g, t in rows:
        ratio = t["reached_target_wall_s"] / g["reached_target_wall_s"] if g["reached_target_wall_s"] > 0 else float("nan")
        print(f"| {seed} | {g['reached_target_step']} | {g['reached_target_wall_s']:.1f} | {t['reached_target_step']} | "
              f"{t['reached_target_wall_s']:.1f} | {ratio:.2f} | {100 * g['test_exact']:.1f}% | {100 * t['test_exact']:.1f}% |")
    if baseline:
        bins = sorted({(b["from"], b["to"]) for r in baseline for b in r["by_length"]})
        print(f"\nTest exact match by source length after {a.baseline_steps} steps (graft):\n")
        print("| seed | attention | " + " | ".join(f"{lo}-{hi} chars" for lo, hi in bins) + " | all |")
        print("| --- | --- | " + " | ".join("---" for _ in bins) + " | --- |")
        for r in baseline:
            by = {(b["from"], b["to"]): b for b in r["by_length"]}
            cells = [f"{100 * by[k]['exact']:.1f}% ({by[k]['count']})" if k in by else "" for k in bins]
            print(f"| {r['seed']} | {r['attention']} | " + " | ".join(cells) + f" | {100 * r['test_exact']:.1f}% |")


if __name__ == "__main__":
    sys.exit(main())
