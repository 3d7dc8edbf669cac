"""Compares the reports of one model planned with each prefetch mode.

Usage: check-schedules.py PREFIX  (reads PREFIX-{none,fsdp1,fsdp2,auto}.json,
reports written by fsdp-opt --fsdp-pipeline="... cluster=... report=...").
Prints one line per property with True/False, and the numbers.
"""
import json
import sys

prefix = sys.argv[1]
r = {m: json.load(open(f"{prefix}-{m}.json")) for m in ("none", "fsdp1", "fsdp2", "auto")}
t = {m: r[m]["predicted_step_time_s"] for m in r}
lb = r["auto"]["lower_bound_s"]
for m in r:
    print(f"{m}: {t[m]:.6f} s, lower bound {r[m]['lower_bound_s']:.6f} s, "
          f"schedule {r[m].get('schedule')}")
print("auto <= fsdp1", t["auto"] <= t["fsdp1"])
print("auto <= fsdp2", t["auto"] <= t["fsdp2"])
print("fsdp2 < none", t["fsdp2"] < t["none"])
print("every mode >= lower bound", all(t[m] >= r[m]["lower_bound_s"] * (1 - 1e-12) for m in r))
print("auto within 5% of the lower bound", t["auto"] <= 1.05 * lb)
