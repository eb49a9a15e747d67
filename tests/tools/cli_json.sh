#!/bin/sh
# `graft ops --json` and `graft devices --json` parse as JSON (python3's json.load) and say the
# same as the text output of `graft ops` / `graft devices`: the same ops in the same order with
# the same devices, differentiable flag and gradcheck-case count, the same summary counts (with
# a filter and --missing too), and the same devices with the same availability and memory.
set -eu
G=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export OMP_NUM_THREADS=1

check_ops() {  # ARGS...: graft ops ARGS... vs graft ops ARGS... --json
  "$G" ops "$@" >"$d/ops.txt"
  "$G" ops "$@" --json >"$d/ops.json"
  python3 - "$d/ops.txt" "$d/ops.json" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read().splitlines()
j = json.load(open(sys.argv[2]))
header = text[0].split()
assert header[:2] == ["op", "devices"], header
rows = []
for line in text[2:]:  # after the header and the rule
    if not line.strip():
        break
    # columns are separated by 2+ spaces; devices may be "cpu, opencl"
    cells = re.split(r"\s{2,}", line.strip())
    assert len(cells) == 4, cells
    rows.append(cells)
summary = [l for l in text if re.match(r"^\d+ ops, ", l)]
assert len(summary) == 1, summary
n_ops, n_diff, n_without = map(int, re.match(r"^(\d+) ops, (\d+) differentiable, (\d+) without", summary[0]).groups())
ops = j["ops"]
assert isinstance(ops, list)
assert len(ops) == len(rows) == j["count"] == n_ops, (len(ops), len(rows), j["count"], n_ops)
assert j["differentiable"] == n_diff == sum(o["differentiable"] for o in ops)
assert j["without_gradcheck_cases"] == n_without == sum(o["gradcheck_cases"] == 0 for o in ops)
assert j["opencl_backend"] == ("OpenCL back-end not available" not in summary[0])
for o, (name, devices, diff, cases) in zip(ops, rows):
    assert o["name"] == name, (o, name)
    assert (", ".join(o["devices"]) or "none") == devices, (o, devices)
    assert o["differentiable"] == (diff == "yes"), (o, diff)
    want = f"yes ({o['gradcheck_cases']})" if o["gradcheck_cases"] else "NO"
    assert "gradcheck_cases_error" in o or cases == want, (o, cases)
print(f"ops: {len(ops)} agree")
EOF
}
check_ops
check_ops cross
check_ops --missing

"$G" devices >"$d/dev.txt"
"$G" devices --json >"$d/dev.json"
python3 - "$d/dev.txt" "$d/dev.json" <<'EOF'
import json, re, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()]
devs = json.load(open(sys.argv[2]))["devices"]
assert len(devs) == len(lines), (devs, lines)
assert devs[0]["name"] == "cpu" and devs[0]["kind"] == "cpu" and devs[0]["available"]
for dev, line in zip(devs, lines):
    name, state = line.split()[:2]
    assert dev["name"] == name, (dev, line)
    assert dev["kind"] == name.split(":")[0], (dev, line)
    assert dev["available"] == (state == "available"), (dev, line)
    if dev["available"]:
        assert dev["memory_bytes"] > 0, dev
        assert f"{dev['memory_bytes'] >> 20} MiB" in line, (dev, line)
    else:
        assert dev["reason"] in line, (dev, line)
    if dev["kind"] == "opencl" and dev["available"]:
        assert dev["device"] in line and f"{dev['compute_units']} compute units" in line, (dev, line)
print(f"devices: {len(devs)} agree")
EOF
# a bad flag is still a usage error
rc=0; "$G" ops --json=nonsense >/dev/null 2>&1 || rc=$?
test "$rc" -eq 2
echo "cli json: ok"
