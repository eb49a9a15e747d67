#!/bin/sh
# Data-parallel training from the CLI on 2 MPI ranks (tests/nn/run_mpi.sh): the same losses as
# one process (train mlp, train transformer), and a rank killed mid-run stops the other one
# promptly, leaving a checkpoint that resumes on 2 ranks and on 1.
set -eu
G=$1
MPI="$(dirname "$0")/../nn/run_mpi.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export OMP_NUM_THREADS=1

losses() { sed -n 's/.*"loss":\([^,]*\),.*/\1/p' "$1/metrics.jsonl"; }
# same_losses A B: the runs' logged losses agree to 1e-4 relative, step by step
same_losses() {
  losses "$1" >"$d/a"; losses "$2" >"$d/b"
  test "$(wc -l <"$d/a")" -eq "$3" && test "$(wc -l <"$d/b")" -eq "$3"
  paste "$d/a" "$d/b" | awk '{ r = ($1 - $2) / ($1 == 0 ? 1 : $1); if (r < 0) r = -r;
    if (r > 1e-4) { print "loss " NR ": " $1 " vs " $2; bad = 1 } } END { exit bad }'
}

"$G" train mlp --steps 30 --batch 64 --threads 1 --run-dir "$d/m1" >"$d/out" 2>&1
sh "$MPI" "$G" train mlp --steps 30 --batch 64 --threads 1 --run-dir "$d/m2" >"$d/out" 2>&1
grep -q "data parallel: 2 ranks" "$d/out"
same_losses "$d/m1" "$d/m2" 30
# the same with the all-reduce after backward, in one-parameter buckets
sh "$MPI" "$G" train mlp --steps 30 --batch 64 --threads 1 --run-dir "$d/m3" --dp-no-overlap \
  --dp-bucket-mb 0.001 >"$d/out" 2>&1
grep -q "after backward" "$d/out"
same_losses "$d/m1" "$d/m3" 30

TF="train transformer --task reverse --steps 20 --batch 32 --dropout 0 --d-model 32 --heads 2
    --layers 1 --ffn 64 --train-size 400 --test-size 20 --threads 1"
# shellcheck disable=SC2086
"$G" $TF --run-dir "$d/t1" >"$d/out" 2>&1
# shellcheck disable=SC2086
sh "$MPI" "$G" $TF --run-dir "$d/t2" >"$d/out" 2>&1
same_losses "$d/t1" "$d/t2" 20
# rank 0 alone prints the results
test "$(grep -c '^20 steps in' "$d/out")" -eq 1

# kill -9 one rank once a checkpoint exists: mpirun (and the other rank) end within 30 s
# (a constant LR schedule, so that --steps may change on resume)
LONG="train mlp --steps 100000 --batch 64 --hidden 256 --threads 1 --checkpoint-every 20 --schedule constant"
# shellcheck disable=SC2086
sh "$MPI" "$G" $LONG --run-dir "$d/k" >"$d/kout" 2>&1 &
mpi_pid=$!
i=0
while [ ! -f "$d/k/checkpoint.json" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
test -f "$d/k/checkpoint.json"
victim=$(pgrep -f "^$G train mlp --steps 100000" | tail -n 1)
kill -9 "$victim"
i=0
while kill -0 "$mpi_pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$mpi_pid" 2>/dev/null; then echo "mpirun still running 30 s after a rank died" >&2; exit 1; fi
rc=0; wait "$mpi_pid" || rc=$?
test "$rc" -ne 0
step=$(sed -n 's/.*"step": \([0-9]*\).*/\1/p' "$d/k/checkpoint.json")
test "$step" -ge 20
cp -r "$d/k" "$d/k1"
# resume on 2 ranks and, from the same checkpoint, on 1
END=$((step + 20))
sh "$MPI" "$G" train mlp --steps $END --batch 64 --hidden 256 --threads 1 --checkpoint-every 20 \
  --schedule constant --run-dir "$d/k" --resume >"$d/out" 2>&1
grep -q "after $END steps" "$d/out"
"$G" train mlp --steps $END --batch 64 --hidden 256 --threads 1 --checkpoint-every 20 \
  --schedule constant --run-dir "$d/k1" --resume >"$d/out" 2>&1
grep -q "after $END steps" "$d/out"
same_losses "$d/k" "$d/k1" "$END"
# an error on one rank only (rank 0 cannot write metrics.jsonl, a directory here) ends every
# rank at once through MPI_Abort instead of leaving rank 1 waiting in a collective
mkdir -p "$d/e/metrics.jsonl"
rc=0
timeout 60 sh "$MPI" "$G" train mlp --steps 50 --threads 1 --run-dir "$d/e" >"$d/out" 2>&1 || rc=$?
test "$rc" -ne 0 && test "$rc" -ne 124
grep -q "graft: error (rank 0 of 2)" "$d/out"
echo "dp smoke: ok"
