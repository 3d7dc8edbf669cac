"""Compares the advisor's depth extrapolation with the full-depth plans.

Reads fsdp-sweep's advisor JSON (--json) of a run whose ranked layouts were all
planned again at full depth (--top at least the number of fitting layouts):
each such layout carries `extrapolated` (the step, device bytes and peak bytes
its extrapolated report predicted, include/fsdp/Sweep/AdvisorDepth.h) beside
the full plan's report. Prints the number compared (of them with pipeline
parallelism, and those whose depths were planned again per micro-batch:
`pp_gather`) and the largest relative errors of the step, the device bytes
and the peak, and exits 1 (naming the layout) when one exceeds the tolerance.

usage: check-extrapolation.py ADVISOR.json TOLERANCE
"""
import json
import sys

KEYS = ("predicted_step_time_s", "device_bytes", "peak_bytes")


def main():
    doc = json.load(open(sys.argv[1]))
    tol = float(sys.argv[2])
    worst = {key: (0.0, None) for key in KEYS}
    compared = pipelined = regathered = 0
    for l in doc["layouts"]:
        e = l.get("extrapolated")
        if not isinstance(e, dict):
            continue
        compared += 1
        pipelined += l["pp"] > 1
        regathered += "pp_gather" in e
        for key in KEYS:
            err = abs(e[key] / l[key] - 1)
            if err > worst[key][0]:
                name = "%d GPUs tp %d pp %d %s %s %s m=%d k=%d" % (
                    l["gpus"], l["tp"], l["pp"], l.get("pp_schedule", ""),
                    l["strategy"], l["activation_checkpoint"],
                    l["micro_batch_size"], l["micro_batches"])
                worst[key] = (err, "%s: %s extrapolated from layers %s %.6g, full %.6g" % (
                    name, key, e["layers"], e[key], l[key]))
    print("compared %d layouts (%d with pp > 1, %d planned again per micro-batch): "
          "step within %.3g%%, device bytes within %.3g%%, peak within %.3g%%" % (
              compared, pipelined, regathered,
              *(100 * worst[key][0] for key in KEYS)))
    bad = [w for w in worst.values() if w[0] > tol]
    for w in bad:
        print("over %.3g%%: %s" % (100 * tol, w[1]))
    if compared == 0 or bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
