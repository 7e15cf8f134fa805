"""Measurement (not a test): the host cost per rank of DeepSpeed 0.3.13-0.4.0's per-tensor ZeRO-3
collectives, the term simulator/zero3_fetch.cpp charges as kPyPerRankGatherS / kPyPerRankReduceS.

DeepSpeed's _allgather_param (partition_parameters.py, 0.3.13-0.4.0) builds the all-gather's output
list in a Python loop over the n ranks of the group: one flat.narrow() view per rank and a
torch.distributed.get_rank(group=...) call per iteration to find its own slot. The gradient
reduce-scatter (_reduce_scatter_gradient) builds its n input views the same way: per rank the
slot's bounds, grad.view(-1).narrow(). Those loops run
on the host between a torch.cuda.synchronize() and the collective, so nothing hides them.

Run with Debian's python3-torch:   /usr/bin/python3 bench/zero3_host_loop.py [ranks]
Prints microseconds per rank for each loop (best of 7 repeats of 20 loops).
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def best_per_rank_us(fn, n, loops=20, repeats=7):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - t0) / loops / n)
    return best * 1e6


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2240
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    group = dist.new_group([0])
    part = 1  # one element per rank: the loop's cost, not the copy's
    flat = torch.zeros(n * part, dtype=torch.float16)
    mine = torch.zeros(part, dtype=torch.float16)

    def gather_views():  # _allgather_param's loop
        parts = []
        for i in range(n):
            parts.append(flat.narrow(0, part * i, part))
            if i == dist.get_rank(group=group):
                parts[i].data.copy_(mine.data, non_blocking=True)
        return parts

    def reduce_views():  # _reduce_scatter_gradient's loop: n input views of the gradient
        inputs = []
        for i in range(n):
            start = i * part
            end = start + part
            if start < flat.numel() and end <= flat.numel():
                inputs.append(flat.view(-1).narrow(0, start, part))
        return inputs

    print(f"torch {torch.__version__}, {n} ranks")
    print(f"all-gather output views (narrow + get_rank): {best_per_rank_us(gather_views, n):.2f} us per rank")
    print(f"reduce-scatter input views (view + narrow): {best_per_rank_us(reduce_views, n):.2f} us per rank")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
