#!/usr/bin/env bash
# Data-parallel scaling: bench/dp_scaling.sh BUILD_DIR [STEPS]
#
# For each workload of the PyTorch reference set — the Transformer (bench_transformer), BERT-mini
# MLM + NSP (bench_bert_mlm) and the LSTM + Bahdanau seq2seq (bench_lstm_seq2seq, the exact
# model) — in one run, one measurement after the other: graft on 1 rank x 1 thread, 1 rank x 2
# threads, 2 ranks x 1 thread (mpirun, all-reduce overlapped with backward) and 2 ranks with
# the all-reduce after backward; for the Transformer also PyTorch DDP (gloo) with 2 processes x
# 1 thread when .venv-torch exists (python3 -m venv .venv-torch && .venv-torch/bin/pip install
# torch numpy). One JSON line per workload: tokens_per_s (2 ranks), single_tokens_per_s,
# two_threads_tokens_per_s, efficiency = tokens_per_s / (2 x single), no_overlap_tokens_per_s,
# torch_ddp_tokens_per_s, ratio_vs_torch_ddp. The batch is the global one in every case.
# Needs an otherwise idle machine.
set -euo pipefail
build=${1:?usage: bench/dp_scaling.sh BUILD_DIR [STEPS]}
steps=${2:-6}
root=$(cd "$(dirname "$0")/.." && pwd)
mpi=(mpirun -np 2 --bind-to core -x OMP_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)

# tps KEY: the number after "KEY": on stdin's JSON line
tps() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" | head -n 1; }

measure() {  # measure WORKLOAD KEY EXE ARGS...
  local name=$1 key=$2 exe=$3; shift 3
  [[ -x $exe ]] || { echo "dp_scaling: $exe not built" >&2; exit 1; }
  local single two ranks no_overlap torch=null
  single=$(OMP_NUM_THREADS=1 "$exe" "$@" --threads 1 | tps "$key")
  two=$(OMP_NUM_THREADS=2 "$exe" "$@" --threads 2 | tps "$key")
  ranks=$("${mpi[@]}" "$exe" "$@" --threads 1 | tps "$key")
  no_overlap=$("${mpi[@]}" "$exe" "$@" --threads 1 --dp-no-overlap | tps "$key")
  if [[ $name == transformer && -x $root/.venv-torch/bin/torchrun ]]; then
    torch=$(OMP_NUM_THREADS=1 "$root/.venv-torch/bin/torchrun" --standalone --nproc_per_node 2 \
      "$root/bench/reference/ddp_transformer.py" --threads 1 --steps "$steps" 2>/dev/null | tps tgt_tokens_per_s)
    [[ -n $torch ]] || torch=null
  fi
  python3 - "$name" "$ranks" "$single" "$two" "$no_overlap" "$torch" <<'PY'
import json, sys
name = sys.argv[1]
r, s, t, n, d = (None if v in ("null", "") else float(v) for v in sys.argv[2:])
print(json.dumps({"workload": name, "ranks": 2, "tokens_per_s": r, "single_tokens_per_s": s,
                  "two_threads_tokens_per_s": t,
                  "efficiency": round(r / (2 * s), 3) if r and s else None,
                  "no_overlap_tokens_per_s": n, "torch_ddp_tokens_per_s": d,
                  "ratio_vs_torch_ddp": round(r / d, 3) if r and d else None}))
PY
}

measure transformer tgt_tokens_per_s "$build/bench/bench_transformer" --steps "$steps"
measure bert_mlm tokens_per_s "$build/bench/bench_bert_mlm" --steps "$steps"
measure lstm_seq2seq tgt_tokens_per_s "$build/bench/bench_lstm_seq2seq" --variant exact --steps "$((steps * 3))"
