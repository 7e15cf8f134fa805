#!/usr/bin/env python3
"""Measure the kernel-level figures a GPU hardware profile holds, on the GPU at hand.

What hardware_profiles/*.json describe per device, measured through PyTorch (the library the
frameworks in runs/published.json train with), each as a table a profile can take as it is:
  gemm_bf16          bf16 GEMM efficiency by FLOPs (square and transformer-layer shapes)
  gemm_fp8           FP8 e4m3 GEMM (torch._scaled_mm, per-tensor scales, bf16 out) by FLOPs
  copy               device-to-device copy efficiency by bytes moved (read + written)
  flash_attention    fused attention (F.scaled_dot_product_attention, the flash backend where it
                     runs) forward and backward efficiency by sequence length, head dim 64 / 128,
                     causal and not; FLOPs as FlashAttention-2 counts them (Dao 2023, §4.1):
                     forward 4 b h s^2 d (halved when causal), backward 2.5 x forward
  launch             host time per tiny kernel launched back to back (the per-kernel overhead)
Efficiency = achieved rate / the datasheet peak passed in (--peak-bf16-tflops ...).

Method (the device README's METHOD.md): CUDA events around each timed region (short kernels
timed in back-to-back batches), warm-up first, the median of repeats, inputs rotated over several
buffers where one set would sit in L2, random (never zero) data. The first recorded figures
(bench/results/gpu-2026-11-26/) timed one call per event pair: below ~1e11 FLOP and ~100 MB they
include the host's dispatch gap, and are lower bounds of the kernels' rates.

  python3 bench/gpu_kernels.py --out gpu_kernels.json
  python3 bench/gpu_kernels.py --dry       # tiny sizes on the CPU: checks the script only
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# NVIDIA H100 SXM5 datasheet (dense): bf16 989.5 TFLOP/s, fp8 1978.9 TFLOP/s, HBM3 3.35 TB/s.
H100_SXM = {"bf16": 989.5, "fp8": 1978.9, "hbm_GBps": 3350.0}


def timer(dry):
    """Returns time_median(fn, repeats) in seconds per call: CUDA events on a GPU, perf_counter on
    the CPU. Each sample times `inner` calls back to back, enough for ~0.5 ms of device work, so
    that a short kernel is not timed with the host's dispatch gap before it (one call between two
    events measures the launch, not the kernel, below ~50 us)."""
    def sample(fn, inner):
        if dry:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            return (time.perf_counter() - t0) / inner
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / inner

    def run(fn, repeats, warmup=3):
        for _ in range(warmup):
            fn()
        once = sample(fn, 1)
        inner = max(1, min(200, math.ceil(5e-4 / max(once, 1e-7))))
        return statistics.median(sample(fn, inner) for _ in range(repeats))
    return run


def rotation(bytes_per_set, l2_bytes):
    """How many input sets to rotate so that a set is not in L2 when it is read again."""
    return max(1, min(8, math.ceil(3 * l2_bytes / max(bytes_per_set, 1))))


def gemm_shapes(dry):
    if dry:
        return [(64, 64, 64), (128, 256, 64)]
    square = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192, 16384)]
    # (tokens, out, in) of Llama-style layers at 4k / 8k tokens per micro-batch: QKV, O, MLP up, down
    layer = [(t, o, i) for t in (2048, 8192) for (o, i) in
             ((12288, 4096), (4096, 4096), (28672, 8192), (8192, 28672), (10240, 8192), (2560, 2048))]
    return square + layer


def measure_gemm(dev, dtype_name, dry, time_median, l2_bytes, peak_tflops):
    rows = []
    fp8 = dtype_name == "fp8"
    if fp8 and (dry or not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm")):
        return rows
    for m, n, k in gemm_shapes(dry):
        elem = 1 if fp8 else 2
        sets = rotation((m * k + k * n) * elem, l2_bytes)
        a = [torch.randn(m, k, device=dev, dtype=torch.bfloat16 if not dry else torch.float32) for _ in range(sets)]
        b = [torch.randn(n, k, device=dev, dtype=torch.bfloat16 if not dry else torch.float32) for _ in range(sets)]
        if fp8:
            a = [x.to(torch.float8_e4m3fn) for x in a]
            b = [x.to(torch.float8_e4m3fn) for x in b]  # (n, k) row-major = (k, n) column-major
            one = torch.ones((), device=dev, dtype=torch.float32)
            state = {"i": 0}

            def fn():
                i = state["i"] = (state["i"] + 1) % sets
                torch._scaled_mm(a[i], b[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            state = {"i": 0}

            def fn():
                i = state["i"] = (state["i"] + 1) % sets
                torch.matmul(a[i], b[i].t())
        seconds = time_median(fn, 5 if dry else 20)
        flop = 2.0 * m * n * k
        tflops = flop / seconds / 1e12
        rows.append({"m": m, "n": n, "k": k, "flop": flop, "seconds": seconds, "TFLOPs": tflops,
                     "efficiency": tflops / peak_tflops})
        del a, b
    return rows


def measure_copy(dev, dry, time_median, l2_bytes, peak_GBps):
    rows = []
    sizes = [1 << p for p in ((12, 16, 20) if dry else (12, 14, 16, 18, 20, 22, 24, 26, 28, 30))]
    for nbytes in sizes:
        sets = rotation(2 * nbytes, l2_bytes)
        src = [torch.randn(nbytes // 4, device=dev) for _ in range(sets)]
        dst = [torch.empty_like(s) for s in src]
        state = {"i": 0}

        def fn():
            i = state["i"] = (state["i"] + 1) % sets
            dst[i].copy_(src[i])
        seconds = time_median(fn, 5 if dry else 30)
        moved = 2.0 * nbytes  # read + written
        gbps = moved / seconds / 1e9
        rows.append({"bytes_moved": moved, "seconds": seconds, "GBps": gbps, "efficiency": gbps / peak_GBps})
        del src, dst
    return rows


def measure_attention(dev, dry, time_median, peak_tflops):
    rows = []
    if not hasattr(F, "scaled_dot_product_attention"):
        return rows
    dtype = torch.float32 if dry else torch.bfloat16
    seqs = (64, 128) if dry else (512, 1024, 2048, 4096, 8192, 16384)
    for causal in (True, False):
        for d in (64, 128):
            for s in seqs:
                heads = 4096 // d if not dry else 2
                batch = max(1, (16384 if not dry else 128) // s)  # ~16k tokens a call
                q, k, v = (torch.randn(batch, heads, s, d, device=dev, dtype=dtype, requires_grad=True)
                           for _ in range(3))
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                grad = torch.randn_like(out)

                def fwd():
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                def fwd_bwd():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.autograd.grad(o, (q, k, v), grad)
                t_f = time_median(fwd, 3 if dry else 15)
                t_fb = time_median(fwd_bwd, 3 if dry else 15)
                t_b = max(t_fb - t_f, 1e-9)
                flop_f = 4.0 * batch * heads * s * s * d * (0.5 if causal else 1.0)
                flop_b = 2.5 * flop_f
                rows.append({"causal": causal, "head_dim": d, "seq_len": s, "batch": batch, "heads": heads,
                             "forward_seconds": t_f, "backward_seconds": t_b,
                             "forward_efficiency": flop_f / t_f / 1e12 / peak_tflops,
                             "backward_efficiency": flop_b / t_b / 1e12 / peak_tflops})
                del q, k, v, out, grad
    return rows


def measure_launch(dev, dry):
    x = torch.randn(16, device=dev)
    n = 200 if dry else 5000
    for _ in range(100):
        x.add_(1.0)
    if not dry:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    if not dry:
        torch.cuda.synchronize()
    return {"launches": n, "seconds_per_launch": (time.perf_counter() - t0) / n}


def print_table(title, rows, cols):
    print(f"\n{title}")
    print("  ".join(f"{c:>14s}" for c in cols))
    for r in rows:
        print("  ".join(f"{r[c]:>14.4g}" if isinstance(r[c], float) else f"{str(r[c]):>14s}" for c in cols))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu_kernels.json")
    ap.add_argument("--dry", action="store_true", help="tiny sizes on the CPU (checks the script)")
    ap.add_argument("--peak-bf16-tflops", type=float, default=H100_SXM["bf16"])
    ap.add_argument("--peak-fp8-tflops", type=float, default=H100_SXM["fp8"])
    ap.add_argument("--peak-hbm-GBps", type=float, default=H100_SXM["hbm_GBps"])
    ap.add_argument("--only", default="launch,copy,gemm_bf16,gemm_fp8,flash_attention")
    args = ap.parse_args()
    dry = args.dry
    if not dry and not torch.cuda.is_available():
        sys.exit("gpu_kernels.py: no CUDA device visible to PyTorch (use --dry to check the script on a CPU)")
    dev = torch.device("cpu" if dry else "cuda")
    torch.manual_seed(0)
    props = None if dry else torch.cuda.get_device_properties(0)
    l2 = 1 << 20 if dry else getattr(props, "L2_cache_size", 50 << 20)
    result = {"schema": "shardplan.gpu-kernels/1", "torch": torch.__version__,
              "cuda": torch.version.cuda, "device": "cpu (dry run)" if dry else props.name,
              "multiprocessors": None if dry else props.multi_processor_count, "L2_bytes": l2,
              "peaks": {"bf16_TFLOPs": args.peak_bf16_tflops, "fp8_TFLOPs": args.peak_fp8_tflops,
                        "hbm_GBps": args.peak_hbm_GBps}}
    tm = timer(dry)
    only = set(args.only.split(","))
    if "launch" in only:
        result["launch"] = measure_launch(dev, dry)
        print(f"launch: {result['launch']['seconds_per_launch'] * 1e6:.2f} us per tiny kernel", flush=True)
    if "copy" in only:
        result["copy"] = measure_copy(dev, dry, tm, l2, args.peak_hbm_GBps)
        print_table("copy (device to device)", result["copy"], ["bytes_moved", "GBps", "efficiency"])
    if "gemm_bf16" in only:
        result["gemm_bf16"] = measure_gemm(dev, "bf16", dry, tm, l2, args.peak_bf16_tflops)
        print_table("GEMM bf16", result["gemm_bf16"], ["m", "n", "k", "flop", "TFLOPs", "efficiency"])
    if "gemm_fp8" in only:
        result["gemm_fp8"] = measure_gemm(dev, "fp8", dry, tm, l2, args.peak_fp8_tflops)
        print_table("GEMM fp8 e4m3 (_scaled_mm)", result["gemm_fp8"], ["m", "n", "k", "flop", "TFLOPs", "efficiency"])
    if "flash_attention" in only:
        result["flash_attention"] = measure_attention(dev, dry, tm, args.peak_bf16_tflops)
        print_table("scaled_dot_product_attention (bf16)", result["flash_attention"],
                    ["causal", "head_dim", "seq_len", "forward_efficiency", "backward_efficiency"])
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    import os
    os.replace(args.out + ".tmp", args.out)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
