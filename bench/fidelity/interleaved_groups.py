#!/usr/bin/env python3
"""What a micro-batch group N < P costs interleaved 1F1B: memory and bubble.

Megatron-LM's interleaved schedule runs each chunk on N consecutive
micro-batches (`microbatch_group_size_per_vp_stage`, default and minimum P;
megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches) and
starts rank r with (P - r - 1)*2 + (V - 1)*N warm-up forwards. Llama 3's
schedule lets N be set freely (Dubey et al. 2024, Sec. 3.3.2, Fig. 6).
fsdp-pipeline plans N = P (lib/Transforms/PipelineSchedule.cpp).

For P ranks, V chunks per rank and m micro-batches, each N dividing m, this
script builds each rank's order with N in place of P (chunk (k mod N*V) / N,
micro-batch (k / (N*V))*N + k mod N) and runs the ranks in order against each
other: a forward needs the previous virtual stage's forward of its
micro-batch, a backward its own forward and the next virtual stage's
backward; a forward takes 1 unit, a backward 2, a transfer none. Where
Megatron's warm-up deadlocks (N < P), each rank stalled on a backward gets
one more warm-up forward until the ranks run through (with in-order ranks a
deadlock does not depend on the op times). Printed per N: the warm-up
forwards added (the most on any rank), the chunk forwards rank 1 holds at its
peak, and the bubble (1 - m*V*3 / the step's units).

Usage: interleaved_groups.py [P V m ...] (default: 4 2 8, 8 2 16 and
Llama-3.1-405B's 8,192-GPU layout 16 8 32).
"""
import sys


def order(P, r, m, V, N, warm):
    total = m * V
    warm = min(warm, total)

    def part(k, backward):
        chunk = (k % (N * V)) // N
        return (V - 1 - chunk if backward else chunk,
                (k // (N * V)) * N + k % N, backward)

    parts = [part(k, False) for k in range(warm)]
    for k in range(total - warm):
        parts += [part(warm + k, False), part(k, True)]
    return parts + [part(k, True) for k in range(total - warm, total)]


def run(P, m, V, N, warms):
    """(peak chunk forwards per rank, step units), or the ranks stalled on a
    backward when the orders deadlock."""
    orders = [order(P, r, m, V, N, warms[r]) for r in range(P)]
    pos, clock, finish = [0] * P, [0] * P, {}
    moved = True
    while moved:
        moved = False
        for r in range(P):
            while pos[r] < len(orders[r]):
                chunk, mb, backward = orders[r][pos[r]]
                vs = chunk * P + r
                if backward:
                    deps = [("F", vs, mb)]
                    if vs < P * V - 1:
                        deps.append(("B", vs + 1, mb))
                else:
                    deps = [("F", vs - 1, mb)] if vs > 0 else []
                if any(d not in finish for d in deps):
                    break
                start = max([clock[r]] + [finish[d] for d in deps])
                clock[r] = start + (2 if backward else 1)
                finish[("B" if backward else "F", vs, mb)] = clock[r]
                pos[r] += 1
                moved = True
    stalled = [r for r in range(P)
               if pos[r] < len(orders[r]) and orders[r][pos[r]][2]]
    if any(pos[r] < len(orders[r]) for r in range(P)):
        return None, stalled
    peaks = []
    for parts in orders:
        live = peak = 0
        for _, _, backward in parts:
            live += -1 if backward else 1
            peak = max(peak, live)
        peaks.append(peak)
    return (peaks, max(clock)), None


def main(argv):
    cases = [tuple(map(int, argv[i:i + 3])) for i in range(0, len(argv), 3)]
    if not cases or any(len(c) != 3 for c in cases):
        cases = [(4, 2, 8), (8, 2, 16), (16, 8, 32)]
    print("| P | V | m | N | warm-up forwards added (most) "
          "| rank 1's chunk forwards in flight | bubble |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for P, V, m in cases:
        for N in (n for n in range(1, m + 1) if m % n == 0):
            megatron = [(P - r - 1) * 2 + (V - 1) * N for r in range(P)]
            if N == P == m:  # Megatron: every forward first when m = P
                megatron = [m * V] * P
            warms = list(megatron)
            while True:
                result, stalled = run(P, m, V, N, warms)
                if result:
                    break
                for r in stalled:
                    warms[r] += 1
            peaks, units = result
            added = max(w - w0 for w, w0 in zip(warms, megatron))
            print(f"| {P} | {V} | {m} | {N} | {added} | "
                  f"{peaks[1 % P]} of {m * V} | "
                  f"{1 - m * V * 3 / units:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
