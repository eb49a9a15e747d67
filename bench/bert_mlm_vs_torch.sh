#!/bin/sh
# bert_mlm side by side: graft's bench_bert_mlm and the PyTorch reference script
# (../shared/bench-ref/bert_mlm.py --mlm-gather 1) on the same thread counts, alternating, one
# JSON line each. Usage (from the repository root):
#   bench/bert_mlm_vs_torch.sh BUILD_DIR [THREADS...]     # default threads: 1 2
# PYTHON (default /usr/bin/python3) and REF (default ../shared/bench-ref/bert_mlm.py) override
# the reference; REF=none runs graft only; EXTRA="--dropout 0" is passed to both.
# CLOCK=cpu also runs the reference with its step timer reading process CPU time (all threads)
# instead of wall time (the script itself is unchanged): its step_ms_* are then comparable to
# graft's cpu_ms_per_step, which stays meaningful when other jobs share the cores.
set -eu
build=${1:?usage: bench/bert_mlm_vs_torch.sh BUILD_DIR [THREADS...]}
shift
[ $# -gt 0 ] || set -- 1 2
python=${PYTHON:-/usr/bin/python3}
ref=${REF:-../shared/bench-ref/bert_mlm.py}
extra=${EXTRA:-}
for n in "$@"; do
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=$n "$build/bench/bench_bert_mlm" --threads "$n" $extra
  [ "$ref" = none ] && continue
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=$n "$python" -B "$ref" --mlm-gather 1 --threads "$n" $extra
  if [ "${CLOCK:-wall}" = cpu ]; then
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$n "$python" -B -c 'import runpy, sys, time
time.perf_counter = time.process_time  # the timer _common.time_steps reads
sys.argv = sys.argv[1:]
sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0] if "/" in sys.argv[0] else ".")
runpy.run_path(sys.argv[0], run_name="__main__")' "$ref" --mlm-gather 1 --threads "$n" $extra |
      sed 's/^{"bench": "bert_mlm"/{"bench": "bert_mlm", "clock": "process_cpu"/'
  fi
done
