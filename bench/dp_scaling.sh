#!/usr/bin/env bash
# Data-parallel scaling: bench/dp_scaling.sh BUILD_DIR [STEPS]
#
# For the Transformer workload of ../shared/bench-ref (bench_transformer), in one run and one
# after the other: graft on 1 rank x 1 thread, 1 rank x 2 threads, 2 ranks x 1 thread (mpirun,
# gradients overlapped with backward) and 2 ranks without overlap, then PyTorch DDP (gloo)
# with 2 processes x 1 thread when .venv-torch exists (python3 -m venv .venv-torch &&
# .venv-torch/bin/pip install torch numpy). Prints one JSON line with tokens_per_s (2 ranks),
# single_tokens_per_s, two_threads_tokens_per_s, efficiency = tokens_per_s / (2 x single),
# no_overlap_tokens_per_s, torch_ddp_tokens_per_s and the ratio graft / DDP.
# Needs an otherwise idle machine: every figure shares its cores with nothing else.
set -euo pipefail
build=${1:?usage: bench/dp_scaling.sh BUILD_DIR [STEPS]}
steps=${2:-6}
root=$(cd "$(dirname "$0")/.." && pwd)
b=$build/bench/bench_transformer
[[ -x $b ]] || { echo "dp_scaling: $b not built" >&2; exit 1; }
mpi=(mpirun -np 2 --bind-to core -x OMP_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)

tps() { sed -n 's/.*"tgt_tokens_per_s": \([0-9.]*\).*/\1/p'; }
single=$(OMP_NUM_THREADS=1 "$b" --steps "$steps" --threads 1 | tps)
two_threads=$(OMP_NUM_THREADS=2 "$b" --steps "$steps" --threads 2 | tps)
ranks=$("${mpi[@]}" "$b" --steps "$steps" --threads 1 | tps)
no_overlap=$("${mpi[@]}" "$b" --steps "$steps" --threads 1 --dp-no-overlap | tps)
torch=null
if [[ -x $root/.venv-torch/bin/torchrun ]]; then
  torch=$(OMP_NUM_THREADS=1 "$root/.venv-torch/bin/torchrun" --standalone --nproc_per_node 2 \
    "$root/bench/reference/ddp_transformer.py" --threads 1 --steps "$steps" 2>/dev/null | tps)
  [[ -n $torch ]] || torch=null
fi
python3 - "$ranks" "$single" "$two_threads" "$no_overlap" "$torch" <<'PY'
import json, sys
r, s, t, n, d = (None if v == "null" else float(v) for v in sys.argv[1:])
print(json.dumps({"workload": "transformer", "ranks": 2, "tokens_per_s": r,
                  "single_tokens_per_s": s, "two_threads_tokens_per_s": t,
                  "efficiency": round(r / (2 * s), 3), "no_overlap_tokens_per_s": n,
                  "torch_ddp_tokens_per_s": d,
                  "ratio_vs_torch_ddp": round(r / d, 3) if d else None}))
PY
