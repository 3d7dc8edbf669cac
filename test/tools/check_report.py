#!/usr/bin/env python3
"""Checks one number of a planner report (fsdp-opt ... report=PATH) against an expected value.

Usage: check_report.py REPORT.json KEY EXPECTED [REL_TOL]
KEY is a dotted path into the report (e.g. per_rank.model_state_bytes); EXPECTED
a number or a Python expression over the report's values `params`, `N` (world
size), `padded` (the sum of the units' padded numel) and `unit` (each unit's
padded numel by name, e.g. unit['root']). REL_TOL defaults to 0
(exact). Prints "OK KEY = value (expected ...)" or "FAIL ..." and exits 1.
"""
import json
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)
value = report
for part in sys.argv[2].split("."):
    value = value[part]
env = {"params": report["params"], "N": report["world_size"],
       "padded": sum(u.get("padded_numel", u["numel"]) for u in report["units"]),
       "unit": {u["name"]: u.get("padded_numel", u["numel"]) for u in report["units"]}}
expected = eval(sys.argv[3], {"__builtins__": {}}, env)
tol = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
err = abs(value - expected) / abs(expected) if expected else abs(value)
ok = err <= tol
print(f"{'OK' if ok else 'FAIL'} {sys.argv[2]} = {value} (expected {expected}, relative error {err:.3g}, tolerance {tol})")
sys.exit(0 if ok else 1)
