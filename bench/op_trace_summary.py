#!/usr/bin/env python3
"""Where a step's time goes, from `shardrun --trace` tables (shardplan.op_trace/1).

Groups each op's self time per step into GEMMs (aten::mm/addmm/bmm, shardrun::sgemm), the attention kernel
(SDPA / flash / cuDNN attention, forward and backward), the elementwise and reduction ops
(every other aten:: op: norms, RoPE, SwiGLU, residual adds, casts, the optimizer's updates) and
the rest (autograd nodes, shardrun's own functions). On a CUDA trace the device time between CUDA
events is summed (`cuda_self_seconds_per_step`), else the host time.

    python3 bench/op_trace_summary.py trace-a.json [trace-b.json ...] [--top 12]
"""
import argparse
import json
import sys

GEMMS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm",
         "shardrun::sgemm", "shardrun::sgemm_add"}  # the last two: shardrun's fp32 CPU GEMMs (executor/model/cpu_gemm.hpp)


def category(op):
    if op in GEMMS:
        return "gemm"
    if "attention" in op or "flash" in op:
        return "attention"
    if op.startswith("aten::"):
        return "elementwise"
    return "other"


def summarise(path, top):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"op_trace_summary: {path}: cannot read a JSON trace ({e})")
    if doc.get("schema") != "shardplan.op_trace/1":
        sys.exit(f"op_trace_summary: {path}: field 'schema': expected shardplan.op_trace/1")
    cuda = "cuda_self_seconds_per_step" in doc
    key = "cuda_self_seconds_per_step" if cuda else "self_seconds_per_step"
    totals, by_op = {}, {}
    for row in doc["ops"]:
        s = row.get(key, 0.0)
        c = category(row["op"])
        totals[c] = totals.get(c, 0.0) + s
        by_op[row["op"]] = by_op.get(row["op"], 0.0) + s
    whole = sum(totals.values()) or 1.0
    print(f"{path}: {doc['steps']} steps, {'device (CUDA events)' if cuda else 'host'} time "
          f"{whole * 1e3:.1f} ms per step")
    for c in ("gemm", "attention", "elementwise", "other"):
        v = totals.get(c, 0.0)
        print(f"  {c:<12} {v * 1e3:9.1f} ms  {100 * v / whole:5.1f} %")
    print("  largest ops: " + ", ".join(f"{op} {v * 1e3:.1f}" for op, v in
                                        sorted(by_op.items(), key=lambda kv: -kv[1])[:top]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    for p in a.traces:
        summarise(p, a.top)


if __name__ == "__main__":
    main()
