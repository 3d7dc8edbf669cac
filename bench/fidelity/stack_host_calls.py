#!/usr/bin/env python3
"""Counts the host calls DeepSpeed ZeRO-3 makes per rank of the group for
each per-parameter collective, from the structure of its source: the loops
`for i in range(self.world_size)` of partition_parameters.py, which run on
every rank once per parameter and collective (O(parameters x world) calls per
step). These are the counts of bench/fidelity/stacks.json's
`host_calls_per_rank` and `persistent_gather_calls_per_rank`
(docs/collective-model.md, "Stacks").

What is counted, per iteration of such a loop (one rank of the group):
  - every call in the loop's body and in the tests of its `if`s (`narrow`,
    `view`, `copy_`, `torch.distributed.get_rank`), each a call into PyTorch;
  - not Python's own list methods and builtins (`append`, `min`, `len`, ...):
    a fraction of a microsecond, against a PyTorch call's microseconds;
  - not the body of an `if` that compares the loop index with the rank
    (`if i == rank`): it runs once per collective, not per rank;
  - not an `else` branch: the padded tail of a parameter that does not divide
    by the world size (the last ranks' partitions only); the `if` body, a
    partition inside the parameter, is every other rank's path.
Then one call per rank is added for PyTorch's c10d (C10D_COPIES_PER_RANK):
ProcessGroupNCCL::allgather with a list of N outputs gathers into a flat
buffer and copies each output out of it (`outputTensors[i][j].copy_(
outputFlattened[i][j], true)`), reduce_scatter copies each of its N inputs
into a flat buffer first (`inputFlattened[i][j].copy_(inputTensors[i][j],
true)`) (torch/lib/c10d/ProcessGroupNCCL.cpp, 2021), one copy per rank
whatever DeepSpeed passes.

usage: bench/fidelity/stack_host_calls.py DEEPSPEED_GIT_DIR [--tag v0.3.15]
Prints one line per function and the JSON values for stacks.json; exit
status 1 naming the function when the source does not have the loops read.
"""
import argparse
import ast
import json
import subprocess
import sys

SOURCE = "deepspeed/runtime/zero/partition_parameters.py"
# ProcessGroupNCCL's copy of each of the N tensors of an all_gather or
# reduce_scatter list (see above).
C10D_COPIES_PER_RANK = 1
# Python's own calls: list methods and builtins, not PyTorch's.
PYTHON_CALLS = {"append", "extend", "min", "max", "len", "range", "int", "print"}


def call_name(call):
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "?"


def compares_index(test, index):
    """`if i == ...`: the test compares the loop index for equality."""
    return (isinstance(test, ast.Compare) and any(isinstance(o, ast.Eq) for o in test.ops)
            and any(isinstance(n, ast.Name) and n.id == index
                    for n in [test.left] + test.comparators))


def calls_per_iteration(stmts, index):
    """The PyTorch calls one iteration makes (the rules of the docstring)."""
    names = []
    for s in stmts:
        if isinstance(s, ast.If):
            names += [call_name(c) for c in ast.walk(s.test) if isinstance(c, ast.Call)]
            if not compares_index(s.test, index):
                names += calls_per_iteration(s.body, index)
            continue
        if isinstance(s, (ast.For, ast.While)):
            raise ValueError("a loop inside the per-rank loop is not counted")
        names += [call_name(c) for c in ast.walk(s) if isinstance(c, ast.Call)]
    return [n for n in names if n not in PYTHON_CALLS]


def world_loops(fn):
    """Every `for I in range(self.world_size)` of fn, with whether it sits in
    another loop (per parameter) or not (per collective)."""
    out = []

    def visit(node, depth):
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.For) and isinstance(child.iter, ast.Call)
                    and call_name(child.iter) == "range"
                    and "world_size" in ast.dump(child.iter)):
                out.append((child, depth > 0))
            visit(child, depth + (1 if isinstance(child, ast.For) else 0))

    visit(fn, 0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", help="a git directory of microsoft/DeepSpeed")
    ap.add_argument("--tag", default="v0.3.15")
    a = ap.parse_args()
    src = subprocess.run(["git", "--git-dir", a.repo, "show", "%s:%s" % (a.tag, SOURCE)],
                         capture_output=True, text=True)
    if src.returncode != 0:
        sys.exit("stack_host_calls.py: cannot read %s at %s: %s" % (SOURCE, a.tag, src.stderr.strip()))
    fns = {n.name: n for n in ast.walk(ast.parse(src.stdout)) if isinstance(n, ast.FunctionDef)}
    counts = {}
    # _allgather_param: one all_gather per parameter (fetch and prefetch);
    # _reduce_scatter_gradient: one reduce_scatter per parameter;
    # _allgather_params: the persistent parameters' gather after the step,
    # its per-parameter loop over the ranks copying each out.
    for name, nested in (("_allgather_param", False), ("_reduce_scatter_gradient", False),
                         ("_allgather_params", True)):
        if name not in fns:
            sys.exit("stack_host_calls.py: no function %s in %s at %s" % (name, SOURCE, a.tag))
        loops = [loop for loop, inner in world_loops(fns[name]) if inner == nested]
        if len(loops) != 1:
            sys.exit("stack_host_calls.py: %s has %d %s loops over the ranks, expected 1" % (
                name, len(loops), "per-parameter" if nested else "per-collective"))
        calls = calls_per_iteration(loops[0].body, loops[0].target.id)
        counts[name] = calls
        print("%-26s line %4d: %d calls per rank (%s)" % (
            name, loops[0].lineno, len(calls), ", ".join(calls)))
    gather = len(counts["_allgather_param"]) + C10D_COPIES_PER_RANK
    scatter = len(counts["_reduce_scatter_gradient"]) + C10D_COPIES_PER_RANK
    if gather != scatter:
        sys.exit("stack_host_calls.py: all-gather %d and reduce-scatter %d calls per rank differ: "
                 "one host_calls_per_rank cannot hold both" % (gather, scatter))
    print(json.dumps({"host_calls_per_rank": gather,
                      "persistent_gather_calls_per_rank": len(counts["_allgather_params"])}))


if __name__ == "__main__":
    main()
