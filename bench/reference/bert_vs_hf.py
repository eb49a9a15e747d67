#!/usr/bin/env python3
"""BERT pretraining, graft against Hugging Face on the same examples, then fine-tuning from each.

  python3 bench/reference/bert_vs_hf.py BUILD_DIR [--size mini] [--steps 4000] [--batch 32]
      [--threads 2] [--finetune-steps 2000] [--finetune-lr 3e-4] [--work runs/bert-vs-hf]
      [--tasks wordnet-lexname,wordnet-gloss-match] [--no-hf] [--graft-run DIR [--export DIR]]

1. `graft train bert-pretrain --export WORK/export` pretrains on `graft data prepare english-text`
   and writes its examples, batch order and initial weights (tools/bert_export.h);
2. bench/reference/bert_pretrain_hf.py trains transformers.BertForPreTraining on that export
   (same examples, batches, initial weights, optimizer and schedule);
3. `graft train bert-finetune --task T` fine-tunes on each task of --tasks, at the same budget,
   from graft's pretrained encoder (--init), from Hugging Face's (--init-hf), and from random
   weights of the same config (--init-weights random).
--no-hf skips step 2 and the fine-tuning from HF's encoder; --graft-run DIR skips step 1 and
fine-tunes from an existing `graft train bert-pretrain` run directory instead.
Prints one JSON line per run (pretraining: held-out MLM / NSP accuracy and wall time; fine-tuning:
dev and test accuracy), `uptime` before and after, and a markdown table. WORK must not hold an
earlier export (graft refuses to write into a used directory). PYTHON: the interpreter with
PyTorch and transformers (default .venv-torch/bin/python).
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


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def run(cmd):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return last_json(out), time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build")
    p.add_argument("--size", default="mini")
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--corpus", default=os.path.join(ROOT, "datasets", "english-text", "corpus.txt"))
    p.add_argument("--max-bytes", type=int, default=0, help="graft's --max-bytes (0: the whole corpus)")
    p.add_argument("--finetune-steps", type=int, default=2000)
    p.add_argument("--finetune-lr", type=float, default=3e-4)
    p.add_argument("--tasks", default="wordnet-lexname", help="comma-separated bert-finetune --task values")
    p.add_argument("--no-hf", action="store_true", help="no Hugging Face pretraining or fine-tuning from it")
    p.add_argument("--graft-run", default="", help="an existing bert-pretrain run directory: no pretraining")
    p.add_argument("--export", default="", help="the export HF trains on (default: WORK/export)")
    p.add_argument("--finetune-size", type=int, default=0, help="--train-size of the fine-tuning (0: all)")
    p.add_argument("--test-size", type=int, default=0, help="--test-size of the fine-tuning (0: all)")
    p.add_argument("--work", default=os.path.join(ROOT, "runs", "bert-vs-hf"))
    a = p.parse_args()
    graft = os.path.join(a.build, "tools", "graft")
    python = os.environ.get("PYTHON", os.path.join(ROOT, ".venv-torch", "bin", "python"))
    export, g_dir, h_dir = (os.path.join(a.work, x) for x in ("export", "graft", "hf"))
    export = a.export or export
    threads = ["--threads", str(a.threads)]
    print(json.dumps({"uptime_before": uptime()}), flush=True)

    rows = []
    if a.graft_run:
        g_dir = a.graft_run
    else:
        cmd = [graft, "train", "bert-pretrain", "--size", a.size, "--corpus", a.corpus, "--steps", str(a.steps),
               "--batch", str(a.batch), "--eval-every", str(a.eval_every), "--seed", str(a.seed),
               "--max-bytes", str(a.max_bytes), "--export", export, "--run-dir", g_dir, *threads]
        g, wall = run(cmd)
        rows.append({"run": "pretrain", "framework": "graft", "steps": g["steps"], "wall_s": round(wall, 1),
                     "eval_mlm_accuracy": g["eval_mlm_accuracy"], "eval_nsp_accuracy": g["eval_nsp_accuracy"],
                     "eval_loss": g["eval_loss"], "command": " ".join(cmd)})
        print(json.dumps(rows[-1]), flush=True)
    if not a.no_hf:
        cmd = [python, os.path.join(HERE, "bert_pretrain_hf.py"), "--export", export, "--run-dir", h_dir, *threads]
        h, wall = run(cmd)
        rows.append({"run": "pretrain", "framework": "transformers " + h["transformers"], "steps": h["steps"],
                     "wall_s": round(wall, 1), "eval_mlm_accuracy": h["eval_mlm_accuracy"],
                     "eval_nsp_accuracy": h["eval_nsp_accuracy"], "eval_loss": h["eval_loss"], "command": " ".join(cmd)})
        print(json.dumps(rows[-1]), flush=True)

    inits = [("graft-pretrained", ["--init", g_dir])]
    if not a.no_hf:
        inits.append(("hf-pretrained", ["--init-hf", os.path.join(h_dir, "model")]))
    inits.append(("random", ["--init", g_dir, "--init-weights", "random"]))
    for task in a.tasks.split(","):
        ft = [graft, "train", "bert-finetune", "--task", task, "--steps", str(a.finetune_steps),
              "--lr", str(a.finetune_lr), "--train-size", str(a.finetune_size), "--test-size", str(a.test_size),
              "--seed", str(a.seed), *threads]
        for name, init in inits:
            cmd = ft + init + ["--run-dir", os.path.join(a.work, f"finetune-{task}-{name}")]
            r, wall = run(cmd)
            rows.append({"run": "finetune", "task": task, "encoder": name, "steps": r["steps"], "wall_s": round(wall, 1),
                         "dev_accuracy": r["dev_accuracy"], "test_accuracy": r["test_accuracy"], "command": " ".join(cmd)})
            print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"uptime_after": uptime()}), flush=True)

    print("\n| pretraining | steps | wall s | held-out MLM accuracy | NSP accuracy | loss |")
    print("| --- | --- | --- | --- | --- | --- |")
    for x in rows:
        if x["run"] == "pretrain":
            print(f"| {x['framework']} | {x['steps']} | {x['wall_s']} | {x['eval_mlm_accuracy']} | "
                  f"{x['eval_nsp_accuracy']} | {x['eval_loss']} |")
    print("\n| fine-tuning task | from | steps | dev accuracy | test accuracy |")
    print("| --- | --- | --- | --- | --- |")
    for x in rows:
        if x["run"] == "finetune":
            print(f"| {x['task']} | {x['encoder']} | {x['steps']} | {x['dev_accuracy']} | {x['test_accuracy']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
