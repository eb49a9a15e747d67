#!/bin/sh
# One run of the Transformer training benchmark next to its PyTorch reference, on 1 and 2
# threads, f32 and bf16, plus the 2048^3 matmul figure that model_gflops is compared against.
# Every line is JSON; PyTorch's is followed by its CPU time per step (bench/torch_cpu_time.py),
# comparable with bench_transformer's cpu_ms_per_step. Usage: bench/transformer_vs_torch.sh [BUILD_DIR] [STEPS]
#   (PyTorch: Debian python3-torch 1.13 with libopenblas0-openmp, see ../shared/bench-ref)
set -eu
BUILD=${1:-build}
STEPS=${2:-10}
REF=${GRAFT_BENCH_REF:-$(dirname "$0")/../../shared/bench-ref}
"$BUILD/bench/bench_matmul" | grep '"n": 2048' || true
for t in 1 2; do
  OMP_NUM_THREADS=$t "$BUILD/bench/bench_transformer" --steps "$STEPS"
  OMP_NUM_THREADS=$t "$BUILD/bench/bench_transformer" --steps "$STEPS" --bf16
  if [ -f "$REF/transformer.py" ]; then
    /usr/bin/python3 -B "$(dirname "$0")/torch_cpu_time.py" "$REF/transformer.py" --threads $t --steps "$STEPS"
  fi
done
