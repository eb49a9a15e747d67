#!/usr/bin/env bash
# Builds the safetensors fuzzer (libFuzzer + ASan + UBSan; see tests/fuzz/meson.build) and
# fuzzes the parser for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR]      # defaults: 60, <repo>/build-fuzz
#
# New inputs go to BUILD_DIR/fuzz-corpus (the seeds in tests/fuzz/corpus are only read);
# a crashing input is saved as BUILD_DIR/fuzz-artifacts/crash-* and the script exits non-zero.
# Env: JOBS (ninja -j, default 2), FUZZ_FORKS (parallel fuzzing processes, default 1).
# BUILD_DIR is set up with the default compiler unless it exists; clang++ must be on PATH
# (Debian: apt-get install clang libclang-rt-dev).
set -euo pipefail

secs=${1:-60}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${2:-$root/build-fuzz}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" -Dfuzz=true -Dbuildtype=debugoptimized
else
  meson configure "$build" -Dfuzz=true
fi
ninja -C "$build" -j"${JOBS:-2}" tests/fuzz/fuzz_safetensors

work=$build/fuzz-corpus/safetensors
artifacts=$build/fuzz-artifacts/
mkdir -p "$work" "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fork_args=()
if [ "${FUZZ_FORKS:-1}" -gt 1 ]; then fork_args=(-fork="$FUZZ_FORKS"); fi
exec "$build/tests/fuzz/fuzz_safetensors" "${fork_args[@]}" \
  -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict="$root/tests/fuzz/safetensors.dict" -artifact_prefix="$artifacts" \
  -print_final_stats=1 "$work" "$root/tests/fuzz/corpus"
