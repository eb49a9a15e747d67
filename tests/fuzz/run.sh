#!/usr/bin/env bash
# Builds the libFuzzer targets (libFuzzer + ASan + UBSan; see tests/fuzz/meson.build) and fuzzes
# each for a bounded time, one after the other, SECONDS split evenly between them.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR]      # defaults: 100, <repo>/build-fuzz
#
# New inputs go to BUILD_DIR/fuzz-corpus/<target> (the seeds in tests/fuzz/corpus/<target> are
# only read); a crashing, leaking, timing-out or out-of-memory input is saved as
# BUILD_DIR/fuzz-artifacts/<target>/crash-* (leak-*, timeout-*, oom-*) and the script, after
# running the other targets, exits non-zero.
# Env: FUZZ_TARGETS (space-separated names, default all: safetensors wordpiece corpus
# run_metadata config_json), JOBS (ninja -j, default 2), FUZZ_FORKS (parallel fuzzing processes
# per target, default 1), FUZZ_RUNS (stop each target after this many executions instead).
# BUILD_DIR is set up with the default compiler unless it exists; clang++ must be on PATH
# (Debian: apt-get install clang libclang-rt-dev).
set -euo pipefail

secs=${1:-100}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${2:-$root/build-fuzz}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac

all_targets="safetensors wordpiece corpus run_metadata config_json"
targets=()
for t in ${FUZZ_TARGETS:-$all_targets}; do
  # config_json exists once tools/train_flags.cpp does (see meson.build)
  if [ "$t" = config_json ] && [ ! -f "$root/tools/train_flags.cpp" ]; then continue; fi
  targets+=("$t")
done

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dfuzz=true -Dbuildtype=debugoptimized -Dnative=true
else
  meson configure "$build" -Dfuzz=true
fi
ninja -C "$build" -j"${JOBS:-2}" "${targets[@]/#/tests/fuzz/fuzz_}"

each=$(( secs / ${#targets[@]} ))
[ "$each" -ge 1 ] || each=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fork_args=()
if [ "${FUZZ_FORKS:-1}" -gt 1 ]; then fork_args=(-fork="$FUZZ_FORKS"); fi
limit_args=(-max_total_time="$each")
if [ -n "${FUZZ_RUNS:-}" ]; then limit_args=(-runs="$FUZZ_RUNS"); fi

status=0 failed=()
for t in "${targets[@]}"; do
  # Per target: the longest input worth trying and any extra limits.
  extra=(-max_len=4096)
  case $t in
    run_metadata) extra=(-max_len=1024 -malloc_limit_mb=1024) ;;
    config_json) extra=(-max_len=2048) ;;
  esac
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  work=$build/fuzz-corpus/$t
  artifacts=$build/fuzz-artifacts/$t/
  mkdir -p "$work" "$artifacts"
  echo "=== fuzz_$t: ${limit_args[*]}"
  if ! "$build/tests/fuzz/fuzz_$t" "${fork_args[@]}" "${limit_args[@]}" "${extra[@]}" \
      -timeout=10 -rss_limit_mb=2048 "${dict[@]}" -artifact_prefix="$artifacts" \
      -print_final_stats=1 "$work" "$root/tests/fuzz/corpus/$t"; then
    status=1 failed+=("$t")
  fi
done
if [ "$status" -ne 0 ]; then
  echo "fuzz: findings in ${failed[*]}; inputs under $build/fuzz-artifacts/" >&2
fi
exit "$status"
