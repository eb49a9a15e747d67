#!/usr/bin/env python3
"""Bible EN->ES Transformer: graft and the PyTorch reference (bench/reference/transformer_bible.py)
one after the other, the same steps on the same token batches, each test set scored by
`graft bleu` (one BLEU code path for both).

  python3 bench/reference/bible_vs_torch.py BUILD_DIR [--steps 1250] [--threads 2]
      [--test-size 500] [--init layers|xavier] [--seed 1] [--only graft|torch]
      [--work runs/bible-vs-torch] [--plot docs/results/NAME]

graft trains first (`train transformer --task bible --tokenizer sentencepiece`, the flags below)
and writes its SentencePiece models and vocabularies into its run directory; the reference then
reads those (so both sides see the same ids), trains the same model for the same steps and
greedily decodes the same test pairs. Both write metrics.jsonl in nn::Trainer's format, so
`--plot` draws them with `graft plot` (by step and by wall time). Prints one JSON line per side
(standard library only; PYTHON is the interpreter with PyTorch and sentencepiece, default
.venv-torch/bin/python), `uptime` before and after, and a markdown table at the end. The
datasets come from `graft data prepare bible-en-es --data-dir datasets`.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MODEL = ["--d-model", "256", "--heads", "4", "--layers", "3", "--ffn", "1024", "--dropout", "0.1"]


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def tokens_and_rate(run_dir):
    """Target tokens over all steps, and target tokens/s after the first step (set-up excluded)."""
    steps = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if "loss" in m and "items" in m:
                steps.append(m)
    total = sum(int(m["items"]) for m in steps)
    span = steps[-1]["elapsed"] - steps[0]["elapsed"]
    return total, (total - int(steps[0]["items"])) / max(span, 1e-9), steps[-1]["loss"]


def bleu(graft, hyp, ref):
    out = subprocess.run([graft, "bleu", hyp, ref], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["bleu"]


def run_graft(a, graft, g_dir, ref):
    cmd = [graft, "train", "transformer", "--task", "bible", "--data-dir", a.data_dir, "--tokenizer", "sentencepiece",
           "--vocab-size", "8000", "--max-tokens", "4096", *MODEL, "--pre-norm", "--warmup", "400",
           "--lr-scale", "0.32", "--train-size", "30008", "--steps", str(a.steps), "--eval-every", "0",
           "--test-size", str(a.test_size), "--beam", str(a.beam), "--threads", str(a.threads),
           "--init", a.init, "--seed", str(a.seed), "--run-dir", g_dir, "--overwrite"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    with open(os.path.join(g_dir, "results.json")) as f:
        r = json.load(f)
    tokens, rate, loss = tokens_and_rate(g_dir)
    row = {"framework": "graft", "steps": r["steps"], "target_tokens": tokens, "train_wall_s": round(r["train_wall_s"], 1),
           "tokens_per_s_after_first": round(rate), "final_train_loss": round(loss, 3),
           "test_bleu_greedy": round(bleu(graft, os.path.join(g_dir, "test_greedy.txt"), ref), 2),
           "process_wall_s": round(wall, 1), "command": " ".join(cmd)}
    if a.beam > 1:
        row[f"test_bleu_beam{a.beam}"] = round(bleu(graft, os.path.join(g_dir, f"test_beam{a.beam}.txt"), ref), 2)
    return row


def run_torch(a, graft, python, data, g_dir, t_dir, ref):
    cmd = [python, os.path.join(HERE, "transformer_bible.py"), "--data", data, "--vocab-from", g_dir,
           "--train-size", "30008", "--steps", str(a.steps), "--lr-scale", "0.32", "--threads", str(a.threads),
           "--init", a.init, "--seed", str(a.seed), "--test-size", str(a.test_size), "--run-dir", t_dir]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    r = json.loads(out.strip().splitlines()[-1])
    tokens, rate, loss = tokens_and_rate(t_dir)
    return {"framework": "torch", "torch": r["torch"], "steps": r["steps"], "target_tokens": tokens,
            "train_wall_s": r["train_wall_s"], "tokens_per_s_after_first": round(rate), "final_train_loss": round(loss, 3),
            "test_bleu_greedy": round(bleu(graft, os.path.join(t_dir, "test_greedy.txt"), ref), 2),
            "process_wall_s": round(wall, 1), "command": " ".join(cmd)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "datasets"))
    p.add_argument("--steps", type=int, default=1250)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--test-size", type=int, default=500)
    p.add_argument("--beam", type=int, default=4, help="graft's second test decoding (greedy first)")
    p.add_argument("--init", choices=("xavier", "layers"), default="layers", help="both sides' stack weights")
    p.add_argument("--seed", type=int, default=1, help="both sides' seed")
    p.add_argument("--only", choices=("both", "graft", "torch"), default="both",
                   help="run one side (torch needs a graft run's vocabularies in WORK/graft)")
    p.add_argument("--work", default=os.path.join(ROOT, "runs", "bible-vs-torch"))
    p.add_argument("--plot", default="", help="NAME: graft plot writes NAME-step.png and NAME-time.png")
    a = p.parse_args()
    graft = os.path.join(a.build, "tools", "graft")
    python = os.environ.get("PYTHON", os.path.join(ROOT, ".venv-torch", "bin", "python"))
    data = os.path.join(a.data_dir, "bible-en-es")
    ref = os.path.join(data, "test.tsv")
    g_dir, t_dir = os.path.join(a.work, "graft"), os.path.join(a.work, "torch")
    rows = []

    print(json.dumps({"uptime_before": uptime()}), flush=True)
    if a.only != "torch":
        rows.append(run_graft(a, graft, g_dir, ref))
        print(json.dumps(rows[-1]), flush=True)
    if a.only != "graft":
        rows.append(run_torch(a, graft, python, data, g_dir, t_dir, ref))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"uptime_after": uptime()}), flush=True)

    if a.plot and len(rows) == 2:
        for x in ("step", "time"):
            subprocess.run([graft, "plot", g_dir, t_dir, "--labels", "graft,PyTorch", "--x", x,
                            "--out", f"{a.plot}-{x}"], check=True, stdout=subprocess.DEVNULL)
    print("\n| | steps | target tokens | train wall s | tokens/s after step 1 | train loss at the end | test BLEU greedy |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for x in rows:
        print(f"| {x['framework']} | {x['steps']} | {x['target_tokens']:,} | {x['train_wall_s']} | "
              f"{x['tokens_per_s_after_first']:,} | {x['final_train_loss']} | {x['test_bleu_greedy']} |")
    if len(rows) == 2:
        print(f"\ngraft / PyTorch train wall time: {rows[0]['train_wall_s'] / rows[1]['train_wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
