"""graft against PyTorch 2 on every workload of the speed issue, alternating, one JSON line each.

Run through bench/vs_torch.sh BUILD_DIR. Each pair runs graft's benchmark, then the PyTorch
reference script of ../shared/bench-ref with the same threads and precision, and prints
  {"workload", "threads", "precision", "graft", "torch", "unit", "ratio", "graft_rss_mib",
   "torch_rss_mib"}
with ratio = graft / torch where higher is better (tokens/s, GFLOP/s) and torch / graft where
lower is (µs/op), so a ratio > 1 always means graft is ahead. Lines with "torch": null are
graft-only figures the issue asks for (trace replay, model FLOP/s vs matmul, busy machine).
Standard library only; PyTorch runs in the interpreter given by --python (a venv with torch).
"""
import argparse
import json
import os
import subprocess
import sys
import time


def run_json(cmd, threads, env_extra=None):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.update(env_extra or {})
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON line from {' '.join(cmd)}")
    return lines


def emit(workload, threads, precision, graft, torch, unit, graft_rss=None, torch_rss=None,
         lower_is_better=False, **extra):
    ratio = None
    if graft is not None and torch:
        ratio = round(torch / graft if lower_is_better else graft / torch, 3)
    row = {"workload": workload, "threads": threads, "precision": precision, "graft": graft,
           "torch": torch, "unit": unit, "ratio": ratio, "graft_rss_mib": graft_rss,
           "torch_rss_mib": torch_rss}
    row.update(extra)
    print(json.dumps(row), flush=True)


class Hog:
    """One CPU-bound process beside the benchmark (the busy-machine case)."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--python", required=True, help="a Python with PyTorch 2")
    ap.add_argument("--ref", required=True, help="the bench-ref folder")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    a = ap.parse_args()
    b = os.path.join(a.build, "bench")
    threads = [int(t) for t in a.threads.split(",")]
    only = set(filter(None, a.only.split(",")))
    want = lambda w: not only or w in only
    torch = lambda script, *args: [a.python, "-B", os.path.join(a.ref, script), *args]

    matmul_gflops = {}
    if want("matmul"):
        g = {l["name"]: l for l in run_json([f"{b}/bench_matmul"], max(threads))}
        for t in threads:
            r = run_json(torch("matmul_gflops.py", "--threads", str(t), "--sizes", "1024,2048"), t)[0]
            for n in (1024, 2048):
                gl = g.get(f"matmul_f32_{n}_t{t}")
                gv = gl["value"] if gl else None
                matmul_gflops[(t, n)] = gv
                emit(f"matmul_{n}", t, "f32", gv, r["results"][str(n)]["gflops_median"], "GFLOP/s",
                     onednn=gl.get("reference") if gl else None)

    for t in threads:
        for prec in ("f32", "bf16"):
            if want("transformer"):
                g = run_json([f"{b}/bench_transformer", "--threads", str(t)] +
                             (["--bf16"] if prec == "bf16" else []), t)[-1]
                r = run_json(torch("transformer.py", "--threads", str(t), "--amp",
                                   "bf16" if prec == "bf16" else "none"), t)[0]
                emit("transformer", t, prec, g["tgt_tokens_per_s"], r["tgt_tokens_per_s"],
                     "tgt tokens/s", g["peak_rss_mib"], r["rss_peak_mib"])
                mm = matmul_gflops.get((t, 2048))
                if prec == "f32" and mm:
                    emit("transformer_model_flops_vs_matmul", t, prec, g["model_gflops"], None,
                         "GFLOP/s", matmul_gflops_2048=mm, ratio_vs_matmul=round(g["model_gflops"] / mm, 3))
            if want("bert_mlm"):
                g = run_json([f"{b}/bench_bert_mlm", "--threads", str(t)] +
                             (["--bf16"] if prec == "bf16" else []), t)[-1]
                r = run_json(torch("bert_mlm.py", "--mlm-gather", "1", "--threads", str(t), "--amp",
                                   "bf16" if prec == "bf16" else "none"), t)[0]
                emit("bert_mini_mlm_nsp", t, prec, g["tokens_per_s"], r["tokens_per_s"], "tokens/s",
                     g["rss_peak_mib"], r["rss_peak_mib"])
        if want("lstm_seq2seq"):
            g = run_json([f"{b}/bench_lstm_seq2seq", "--threads", str(t), "--variant", "exact"], t)[-1]
            r = run_json(torch("lstm_seq2seq.py", "--threads", str(t)), t)[0]
            emit("lstm_seq2seq", t, "f32", g["tgt_tokens_per_s"], r["tgt_tokens_per_s"], "tgt tokens/s",
                 g["peak_rss_mib"], r["rss_peak_mib"])
    if want("overhead"):
        g = {l["name"]: l for l in run_json([f"{b}/bench_overhead"], 1)}
        r = run_json(torch("op_overhead.py", "--threads", "1"), 1)[0]
        emit("op_overhead_fwd_bwd", 1, "f32", g["overhead_chain_fwd_bwd"]["value"],
             r["results"]["chain_fwd_bwd_us_per_op"], "us/op", lower_is_better=True)
    if want("trace_replay"):
        for l in run_json([f"{b}/bench_trace_replay"], max(threads)):
            if "ratio_default_replay_vs_default_eager" in l:
                emit("trace_replay_" + l["name"].removeprefix("trace_replay_"), max(threads), "f32",
                     l["value"], None, "us/step",
                     ratio_default_replay_vs_default_eager=l["ratio_default_replay_vs_default_eager"])
            if l["name"] == "trace_replay_transformer_time":
                emit("trace_replay_transformer", max(threads), "f32", l["value"], None, "ms/step",
                     eager_ms=l["reference"], ratio_eager_vs_replay=l["ratio"],
                     replay_onednn_ms=l["replay_onednn"], ratio_eager_vs_replay_onednn=l["ratio_onednn"])
    if want("busy_machine") and 2 in threads:
        # graft on 1 and on 2 threads, each beside one CPU-bound process: 2 must not be slower
        with Hog():
            one = run_json([f"{b}/bench_lstm_seq2seq", "--threads", "1", "--variant", "exact"], 1)[-1]
            two = run_json([f"{b}/bench_lstm_seq2seq", "--threads", "2", "--variant", "exact"], 2)[-1]
            fixed = run_json([f"{b}/bench_lstm_seq2seq", "--threads", "2", "--variant", "exact"], 2,
                             {"GRAFT_ADAPT_THREADS": "0"})[-1]
        emit("busy_machine_lstm_2_vs_1_threads", 2, "f32", two["tgt_tokens_per_s"], None,
             "tgt tokens/s", one_thread=one["tgt_tokens_per_s"],
             ratio_2_vs_1=round(two["tgt_tokens_per_s"] / one["tgt_tokens_per_s"], 3),
             two_threads_governor_off=fixed["tgt_tokens_per_s"],
             ratio_2_vs_1_governor_off=round(fixed["tgt_tokens_per_s"] / one["tgt_tokens_per_s"], 3))


if __name__ == "__main__":
    main()
