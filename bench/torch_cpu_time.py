#!/usr/bin/python3
"""Runs a ../shared/bench-ref script and also reports its process CPU time per timed step.

On a shared, oversubscribed host wall time mostly measures the neighbours; CPU time (all
threads of the process) is the steadier figure, and bench_transformer reports the same one.
Usage: /usr/bin/python3 -B bench/torch_cpu_time.py ../shared/bench-ref/transformer.py [args...]
Prints the script's own JSON line, then {"name": "torch_cpu_time", "cpu_ms_per_step": ...}.
"""
import json
import os
import runpy
import sys
import time

sys.dont_write_bytecode = True
script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))
import _common  # noqa: E402

cpu = []
plain_time_steps = _common.time_steps


def time_steps(step, warmup, steps):
    def measured():
        c0 = time.process_time()
        step()
        cpu.append(time.process_time() - c0)
    out = plain_time_steps(measured, warmup, steps)
    del cpu[:warmup]
    return out


_common.time_steps = time_steps
runpy.run_path(script, run_name="__main__")
print(json.dumps({"name": "torch_cpu_time", "script": os.path.basename(script),
                  "cpu_ms_per_step": round(1e3 * sum(cpu) / max(1, len(cpu)), 1)}))
