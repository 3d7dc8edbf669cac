#!/usr/bin/env python3
"""Compares one pipeline stage's module in two fsdp-opt outputs.

Usage: same_stage.py FULL.mlir SCREEN.mlir

SCREEN is fsdp-pipeline's pp-plan=fattest output: one nested @stage<s>
module and `fsdp.pp_screen = s`. Prints the stage and whether its module
text (ops, attributes, the recorded memory plan) is identical to the
@stage<s> of FULL, the same pipeline with every stage planned.
"""
import re
import sys


def stage_module(text, s):
    """The lines of `module @stage<s>` up to its closing brace."""
    lines = text.split("\n")
    start = [i for i, l in enumerate(lines)
             if re.match(r"\s*module @stage%d\b" % s, l)]
    if len(start) != 1:
        sys.exit("expected one module @stage%d, found %d" % (s, len(start)))
    i = start[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    for j in range(i + 1, len(lines)):
        if lines[j] == indent + "}":
            return lines[i : j + 1]
    sys.exit("module @stage%d is not closed" % s)


def main():
    full, screen = (open(p).read() for p in sys.argv[1:3])
    m = re.search(r"fsdp\.pp_screen = (\d+)", screen)
    if not m:
        sys.exit("no fsdp.pp_screen in " + sys.argv[2])
    s = int(m.group(1))
    stages = len(re.findall(r"^\s*module @stage\d+", screen, re.M))
    a, b = stage_module(full, s), stage_module(screen, s)
    print("screened stage %d of %d nested module(s): %s (%d lines)"
          % (s, stages, "identical" if a == b else "differs", len(a)))


if __name__ == "__main__":
    main()
