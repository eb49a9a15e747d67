#!/bin/sh
# Runs the same benchmarks from two build directories one after the other, A then B, for each
# benchmark in turn (so a slow spell of the machine hits both), and prints each JSON line with
# the build it came from: {"build": "A", ...}. For comparing two configurations of one tree,
# e.g. the portable default against -Dnative=true:
#   meson setup build-native -Dnative=true && ninja -C build-native
#   bench/compare_builds.sh build build-native
# Environment: GRAFT_BENCH_ROUNDS (default 1) repeats the A/B pair; BENCHES overrides the list.
set -eu
a=$1 b=$2
rounds=${GRAFT_BENCH_ROUNDS:-1}
benches=${BENCHES:-"elementwise matmul optim_step rnn lstm_seq2seq:--threads:1:--steps:10 transformer:--threads:1:--steps:10 transformer:--threads:2:--steps:10"}
for dir in "$a" "$b"; do
  [ -x "$dir/tools/graft" ] || { echo "compare_builds: $dir/tools/graft is not built" >&2; exit 2; }
  echo "{\"build\": \"$dir\", \"version\": \"$("$dir/tools/graft" version | grep '^CPU kernels:' | cut -d'(' -f1 | sed 's/ *$//')\"}"
done
echo "{\"uptime\": \"$(uptime | sed 's/.*load/load/')\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\"}"
r=0
while [ "$r" -lt "$rounds" ]; do
  for spec in $benches; do
    name=${spec%%:*}
    args=$(echo "$spec" | sed -n 's/^[^:]*://p' | tr ':' ' ' | sed 's/=/ /g')
    for dir in "$a" "$b"; do
      exe=$dir/bench/bench_$name
      [ -x "$exe" ] || { echo "compare_builds: no $exe" >&2; exit 2; }
      # shellcheck disable=SC2086
      "$exe" $args 2>/dev/null | grep '^{' | sed "s|^{|{\"build\": \"$dir\", |"
    done
  done
  r=$((r + 1))
done
echo "{\"uptime\": \"$(uptime | sed 's/.*load/load/')\"}"
