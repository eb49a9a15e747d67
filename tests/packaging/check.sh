#!/bin/sh
# Packaging check: graft used as a library by someone else's program.
#
#   (a) stages `meson install` of an already-built tree into a temporary DESTDIR, checks what
#       was installed (versioned SONAME, graft.pc's flags, graft_config.h), builds hello.cpp
#       with nothing but `c++ hello.cpp $(pkg-config --cflags --libs graft)` and runs it;
#   (b) only with GRAFT_TEST_SUBPROJECT=1: a parent Meson project in a temporary directory
#       with graft as subprojects/graft (a shallow clone of this checkout's HEAD) builds and
#       runs the same program. That is a second build of the whole library: many CPU minutes
#       (GRAFT_TEST_JOBS sets ninja's -j, default 1).
#
# usage: sh tests/packaging/check.sh [BUILD_DIR]     (default: build, already compiled)
# Prints "packaging: ok ..." lines; exits non-zero with "packaging: FAIL: ..." on a failure.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/graft-packaging.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

fail() { echo "packaging: FAIL: $*" >&2; exit 1; }
ok() { echo "packaging: ok: $*"; }

# hello's output must show the gradient 2x of sum(x^2) at x = [1, 2, 3] and the fused x^2.
check_hello_output() {  # $1: file with hello's stdout
  grep -q '^x.grad = .*2.*4.*6' "$1" || { cat "$1" >&2; fail "$2: wrong gradient"; }
  grep -q '^square = .*1.*4.*9' "$1" || { cat "$1" >&2; fail "$2: wrong fused square"; }
}

# ---- (a) meson install into a DESTDIR, then plain pkg-config
stage=$tmp/stage
meson install -C "$build" --no-rebuild --destdir "$stage" --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install into $stage"; }
pc=$(find "$stage" -name graft.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no graft.pc installed"
libdir=$(dirname "$(dirname "$pc")")

# The files a user's build needs: headers (the generated one too), the library and its links.
incdir=$(find "$stage" -type d -path '*/include/graft' | head -n 1)
for h in graft.h graft_config.h autograd/tensor.h autograd/fuse.h nn/module.h ops/error.h; do
  [ -f "$incdir/$h" ] || fail "header $h not installed under $incdir"
done
real=$(find "$libdir" -maxdepth 1 -name 'libgraft.so.*.*.*' -type f | head -n 1)
{ [ -n "$real" ] && [ -s "$real" ]; } || fail "no (or an empty) libgraft.so.X.Y.Z in $libdir"
soname=$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
case $soname in libgraft.so.[0-9]*) ;; *) fail "SONAME of $(basename "$real") is '$soname'" ;; esac
[ "$(readlink "$libdir/$soname")" = "$(basename "$real")" ] || fail "$soname does not link to $(basename "$real")"
[ -e "$libdir/libgraft.so" ] || fail "no libgraft.so development link"
ok "installed $(basename "$real") (SONAME $soname), headers in ${incdir#"$stage"}"

# graft.pc names prefix=/usr/local (or whatever the build was configured with) while the files
# sit under $stage: PKG_CONFIG_SYSROOT_DIR puts $stage in front of its -I and -L paths.
user_pkg_config_path=${PKG_CONFIG_PATH:-}
PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
PKG_CONFIG_SYSROOT_DIR=$stage
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
cflags=$(pkg-config --cflags graft) || fail "pkg-config --cflags graft"
libs=$(pkg-config --libs graft) || fail "pkg-config --libs graft"
static_libs=$(pkg-config --static --libs graft) || fail "pkg-config --static --libs graft"
for f in -std=c++20 -fopenmp; do
  case " $cflags " in *" $f "*) ;; *) fail "pkg-config --cflags graft lacks $f: $cflags" ;; esac
done
case " $libs " in *" -fopenmp "*) ;; *) fail "pkg-config --libs graft lacks -fopenmp: $libs" ;; esac
case "$libs $static_libs" in *libdnnl.so*) fail "graft.pc hard-codes a libdnnl path: $static_libs" ;; esac
case " $static_libs " in *" -ldnnl "*) ;; *) fail "pkg-config --static --libs graft lacks -ldnnl" ;; esac
ok "pkg-config --cflags --libs graft: $cflags $libs"

# The user's build, flags from pkg-config only; compiling and linking apart, as build systems
# do, so that the link sees only --libs (which must bring libgomp for fuse.h's OpenMP loops).
# shellcheck disable=SC2086  # the flags are meant to split
${CXX:-c++} -c -o "$tmp/hello.o" "$here/hello.cpp" $cflags >"$tmp/cxx.log" 2>&1 ||
  { cat "$tmp/cxx.log" >&2; fail "c++ -c hello.cpp \$(pkg-config --cflags graft)"; }
# shellcheck disable=SC2086
${CXX:-c++} -o "$tmp/hello" "$tmp/hello.o" $libs >"$tmp/ld.log" 2>&1 ||
  { cat "$tmp/ld.log" >&2; fail "c++ hello.o \$(pkg-config --libs graft)"; }
readelf -d "$tmp/hello" | grep -q "NEEDED.*\[$soname\]" || fail "hello does not need $soname"
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/hello" >"$tmp/hello.out" 2>&1 ||
  { cat "$tmp/hello.out" >&2; fail "hello (pkg-config build) exited non-zero"; }
check_hello_output "$tmp/hello.out" "pkg-config build"
ok "hello built with pkg-config runs: $(tr '\n' ' ' <"$tmp/hello.out")"

# ---- (b) graft as a Meson subproject of a parent project
if [ "${GRAFT_TEST_SUBPROJECT:-0}" != 1 ]; then
  echo "packaging: skipped: subproject build (set GRAFT_TEST_SUBPROJECT=1; many CPU minutes)"
  exit 0
fi
parent=$tmp/parent
mkdir -p "$parent/subprojects"
cp "$here/parent/meson.build" "$here/hello.cpp" "$parent/"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  git clone --quiet --depth 1 "file://$root" "$parent/subprojects/graft" || fail "git clone $root"
else
  ln -s "$root" "$parent/subprojects/graft"
fi
# dependency('graft') would take an installed graft.pc first (the staged one of (a) too):
# --force-fallback-for makes it use the subproject. buildtype=plain (no -O) compiles fastest;
# this checks that it builds, not how fast it runs.
unset PKG_CONFIG_SYSROOT_DIR
PKG_CONFIG_PATH=$user_pkg_config_path
meson setup "$parent/b" "$parent" --buildtype=plain --force-fallback-for=graft >"$tmp/setup.log" 2>&1 ||
  { cat "$tmp/setup.log" >&2; fail "meson setup of the parent project"; }
# As a subproject graft builds the library alone: no tools, tests, examples or benchmarks.
# Prints "name (folder of the meson.build that defines it)" per target.
targets=$(meson introspect --targets "$parent/b" | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    print(t["name"] + "(" + os.path.basename(os.path.dirname(t["defined_in"])) + ")")' | tr '\n' ' ')
for t in $targets; do
  case $t in "hello(parent)" | "graft(graft)" | "graft_ops(graft)" | "opencl_kernels(graft)") ;;
    *) fail "the subproject defines the extra target $t" ;;
  esac
done
case " $targets " in *" graft(graft) "*) ;; *) fail "the parent did not build graft as a subproject" ;; esac
ninja -C "$parent/b" -j "${GRAFT_TEST_JOBS:-1}" >"$tmp/ninja.log" 2>&1 ||
  { tail -n 40 "$tmp/ninja.log" >&2; fail "ninja in the parent project"; }
"$parent/b/hello" >"$tmp/hello-sub.out" 2>&1 ||
  { cat "$tmp/hello-sub.out" >&2; fail "hello (subproject build) exited non-zero"; }
check_hello_output "$tmp/hello-sub.out" "subproject build"
ok "hello built with graft as a Meson subproject runs (targets: $targets)"
