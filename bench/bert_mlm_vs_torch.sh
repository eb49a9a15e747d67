#!/bin/sh
# bert_mlm side by side: graft's bench_bert_mlm and the PyTorch reference script
# (../shared/bench-ref/bert_mlm.py --mlm-gather 1) on the same thread counts, alternating, one
# JSON line each. Usage (from the repository root):
#   bench/bert_mlm_vs_torch.sh BUILD_DIR [THREADS...]     # default threads: 1 2
# PYTHON (default /usr/bin/python3) and REF (default ../shared/bench-ref/bert_mlm.py) override
# the reference; set REF=none to run graft only.
set -eu
build=${1:?usage: bench/bert_mlm_vs_torch.sh BUILD_DIR [THREADS...]}
shift
[ $# -gt 0 ] || set -- 1 2
python=${PYTHON:-/usr/bin/python3}
ref=${REF:-../shared/bench-ref/bert_mlm.py}
for n in "$@"; do
  OMP_NUM_THREADS=$n "$build/bench/bench_bert_mlm" --threads "$n"
  if [ "$ref" != none ]; then
    OMP_NUM_THREADS=$n "$python" -B "$ref" --mlm-gather 1 --threads "$n"
  fi
done
