#!/bin/sh
# graft against PyTorch 2 (PyPI) on every speed workload, one JSON line per pair (bench/vs_torch.py),
# with the CPU model and `uptime` before and after. Usage (repository root):
#   bench/vs_torch.sh BUILD_DIR [--threads 1,2] [--only matmul,transformer,bert_mlm,lstm_seq2seq,overhead,trace_replay,busy_machine]
# PYTHON: the interpreter with PyTorch (default .venv-torch/bin/python:
#   python3 -m venv .venv-torch && .venv-torch/bin/pip install torch numpy); REF: ../shared/bench-ref.
set -eu
build=${1:?usage: bench/vs_torch.sh BUILD_DIR [options of bench/vs_torch.py]}
shift
here=$(dirname "$0")
python=${PYTHON:-$here/../.venv-torch/bin/python}
ref=${REF:-$here/../../shared/bench-ref}
[ -x "$python" ] || { echo "vs_torch.sh: no PyTorch interpreter at $python (set PYTHON)" >&2; exit 2; }
printf '{"cpu": "%s", "uptime_before": "%s"}\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(uptime)"
python3 -B "$here/vs_torch.py" "$build" --python "$python" --ref "$ref" "$@"
printf '{"uptime_after": "%s"}\n' "$(uptime)"
