#!/usr/bin/env python3
"""Checks that no unit is all-gathered while its previous gathered copy is live.

Usage: check-regather.py SCHEDULED.mlir
Reads the scheduled step (fsdp-opt output) line by line: `%f = fsdp.all_gather
@unit ... async`, `%g = fsdp.wait %f`, `fsdp.free %g`. For every all-gather of
a unit gathered before, the previous copy's free must come earlier. Prints
"N all-gathers, R re-gathers, each after its previous copy's free", or the
first violation, and exits 1 on one.
"""
import re
import sys

gather = re.compile(r"^\s*(%\w+) = fsdp\.all_gather @([\w.]+) .*\basync\b")
wait = re.compile(r"^\s*(%\w+) = fsdp\.wait (%\w+)")
free = re.compile(r"^\s*fsdp\.free (%\w+)")
unit_of_future, unit_of_buffer = {}, {}
live = {}  # unit -> line of its live copy's gather
gathers = regathers = 0
for n, line in enumerate(open(sys.argv[1]), 1):
    if m := gather.match(line):
        unit = m.group(2)
        gathers += 1
        if unit in live:
            print(f"line {n}: @{unit} gathered while its copy from line "
                  f"{live[unit]} is live")
            sys.exit(1)
        if unit in unit_of_buffer.values():
            regathers += 1
        unit_of_future[m.group(1)] = unit
        live[unit] = n
    elif (m := wait.match(line)) and m.group(2) in unit_of_future:
        unit_of_buffer[m.group(1)] = unit_of_future[m.group(2)]
    elif (m := free.match(line)) and m.group(1) in unit_of_buffer:
        live.pop(unit_of_buffer[m.group(1)], None)
print(f"{gathers} all-gathers, {regathers} re-gathers, each after its previous "
      "copy's free")
