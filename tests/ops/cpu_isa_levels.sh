#!/bin/sh
# The CPU kernel copies of a portable build (ops/cpu/cpu_kernels.h): each one this CPU can run
# passes the op table (every op's fast kernels through cpu_backend() against the reference ones,
# gradchecks; the kernel suite test_ops calls graft::cpu::, the baseline copy, directly), GRAFT_CPU_ISA
# picks it and `graft version` names it, a bad GRAFT_CPU_ISA is a clear error, and no code outside
# the ISA namespaces uses an instruction beyond x86-64 (an inline function kept from an AVX
# object, or a static initialiser of one, would crash older CPUs when the library loads).
# Usage: cpu_isa_levels.sh GRAFT_EXE TEST_GRAFT LIBGRAFT_SO
set -eu
graft=$1 test_graft=$2 lib=$3
fail() { echo "FAIL: $*" >&2; exit 1; }

line=$("$graft" version | grep '^CPU kernels:') || fail "graft version prints no 'CPU kernels:' line"
echo "$line"
default=$(echo "$line" | sed 's/^CPU kernels: \([a-z0-9]*\) .*/\1/')
levels=$(echo "$line" | sed 's/.*this CPU and build: \([a-z0-9 ]*\);.*/\1/')
if [ "$levels" = native ]; then
  echo "a -Dnative / -Dmarch build has one kernel copy: nothing to compare"
  exit 77  # meson: skipped
fi
case " $levels " in *" baseline "*) ;; *) fail "no baseline copy in '$levels'" ;; esac
case " $levels " in *" $default "*) ;; *) fail "default '$default' is not in '$levels'" ;; esac
best=$(echo "$levels" | awk '{print $NF}')
[ "$default" = "$best" ] || fail "default copy '$default' is not the best this CPU runs ('$best')"

# A bad name and a level this CPU cannot run are errors that name what there is.
if out=$(GRAFT_CPU_ISA=sse9 "$graft" version 2>&1); then fail "GRAFT_CPU_ISA=sse9 accepted"; fi
echo "$out" | grep -q "not a CPU kernel copy" || fail "GRAFT_CPU_ISA=sse9: $out"
case " $levels " in
  *" avx512 "*) ;;
  *)
    if out=$(GRAFT_CPU_ISA=avx512 "$graft" version 2>&1); then fail "avx512 accepted on this CPU"; fi
    echo "$out" | grep -q "cannot run it" || fail "GRAFT_CPU_ISA=avx512: $out" ;;
esac

# Every copy but the default (the other suites run that one): the op table.
for isa in $levels; do
  GRAFT_CPU_ISA=$isa "$graft" version | grep -q "^CPU kernels: $isa " ||
    fail "GRAFT_CPU_ISA=$isa: graft version names another copy"
  [ "$isa" = "$default" ] && continue
  echo "== $isa"
  GRAFT_CPU_ISA=$isa "$test_graft" --minimal --test-case='*op table*' ||
    fail "op table with GRAFT_CPU_ISA=$isa"
done

# Disassembly. Each function has a level: the ISA copy its name belongs to (a graft ISA namespace
# or an xsimd architecture type: 1 AVX2, 2 AVX-512), else what its code uses (0 none, 1 VEX or
# the BMI/MOVBE/LZCNT of x86-64-v3, 2 EVEX registers). An inline function that a baseline and
# an ISA object both emit keeps one body: the link order must make it the lowest. So no function
# may call (directly or through the PLT) one of a higher level than its own, and no static
# initialiser (run when the library loads, on any CPU) may use AVX at all.
command -v objdump >/dev/null || { echo "no objdump: disassembly check skipped"; exit 0; }
objdump -d -C --no-show-raw-insn "$lib" | awk '
  # functions are keyed by address: local clones in different objects may share a name
  function ns(f) {
    if (f ~ /::avx512::|xsimd::avx512/) return 2
    if (f ~ /::avx2::|xsimd::avx|xsimd::fma3/) return 1
    return -1
  }
  function level(a) { return ns(name[a]) >= 0 ? ns(name[a]) : code[a] }
  # a PLT call: the level of the highest-level function of that name (there is one global)
  function target_level(t) { return t in plt ? maxl[plt[t]] + 0 : level(t) }
  /^[0-9a-f]+ <.*>:$/ {
    cur = $1; nm = $0; sub(/^[0-9a-f]+ </, "", nm); sub(/>:$/, "", nm)
    name[cur] = nm; code[cur] = 0; n_fn++; next
  }
  /^ *[0-9a-f]+:\t/ {
    split($0, fld, "\t"); ins = fld[2]; m = ins; sub(/ .*/, "", m)
    l = 0
    if (ins ~ /%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])/) l = 2
    else if (m ~ /^v[a-z0-9]+$/ && m !~ /^ver[rw]$/ && m !~ /^vm(call|launch|resume|xoff|read|write|ptrld|ptrst|clear|xon|run|load|save|mcall|func)/ ||
             m ~ /^(andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|movbe)$/) l = 1
    if (l > code[cur]) code[cur] = l
    if (m ~ /^(call|jmp)/ && match(ins, /[0-9a-f]+ <[^+]*(\+0x[0-9a-f]+)?>$/)) {
      op = substr(ins, RSTART); t = op; sub(/ .*/, "", t)
      tn = op; sub(/^[0-9a-f]+ </, "", tn); sub(/>$/, "", tn); sub(/\+0x[0-9a-f]+$/, "", tn)
      if (tn ~ /@plt$/) { t = "plt:" tn; sub(/@plt$/, "", tn); plt[t] = tn }
      else { t = sprintf("%016s", t); gsub(/ /, "0", t) }
      if (t != cur) edges[cur "\001" t] = 1
    }
  }
  END {
    bad = 0
    for (a in name) if ((l = level(a)) > maxl[name[a]]) maxl[name[a]] = l
    for (a in code)
      if (code[a] > 0 && ns(name[a]) < 0) {
        shared++
        if (name[a] ~ /^_GLOBAL__sub_I|__static_initialization/) { print "static initialiser with AVX: " name[a]; bad++ }
      }
    for (e in edges) {
      split(e, p, "\001")
      if (!(p[2] in plt) && !(p[2] in name)) continue  # not a function start (a jump inside one)
      if ((lt = target_level(p[2])) > level(p[1])) {
        print "level " level(p[1]) " " name[p[1]] " calls level " lt " " (p[2] in plt ? plt[p[2]] : name[p[2]]); bad++
      }
    }
    printf "disassembly: %d functions, %d outside the ISA copies with AVX code, %d violations\n", n_fn, shared, bad
    exit bad > 0
  }' >"${TMPDIR:-/tmp}/cpu_isa_levels.$$" || {
  cut -c1-400 "${TMPDIR:-/tmp}/cpu_isa_levels.$$" | head -20 >&2
  rm -f "${TMPDIR:-/tmp}/cpu_isa_levels.$$"
  fail "code of one ISA level reachable from a lower one"
}
tail -1 "${TMPDIR:-/tmp}/cpu_isa_levels.$$"
rm -f "${TMPDIR:-/tmp}/cpu_isa_levels.$$"
echo "cpu_isa_levels: OK ($levels; default $default)"
