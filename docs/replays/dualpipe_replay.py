#!/usr/bin/env python3
# Replays DualPipe.step of deepseek-ai/DualPipe dualpipe.py (@ 3da1bbe) with torch stubbed out and
# prints each rank's op list in shardplan's notation (tests/simulator/op_order_text.hpp): F, B, W and
# BW (a full backward) chunk.mb, [F c.j&BW c'.j'] an overlapped pair; chunk = the direction
# (phase ^ is_in_second_half, dualpipe.py:91), W's popped FIFO as WeightGradStore does (utils.py).
#
#   python3 docs/replays/dualpipe_replay.py PATH/TO/dualpipe/dualpipe.py P M
#
# tests/simulator/test_dualpipe.cpp holds its p = 4, m = 8 output; on 2026-11-29 simulator::dualpipe_order
# matched it for p in 2..10 and 25 (p, m) pairs (docs/split_backward_schedules.md §2.6).
import collections, importlib.util, sys, types
torch = types.ModuleType("torch"); nn = types.ModuleType("torch.nn"); dist = types.ModuleType("torch.distributed")
class Module:
    def __init__(self): pass
nn.Module = Module; nn.ModuleList = list
torch.is_grad_enabled = lambda: True; torch.stack = lambda x: x
torch.nn = nn; torch.distributed = dist; torch.Tensor = object
dist.ProcessGroup = object; dist.P2POp = object
sys.modules.update({"torch": torch, "torch.nn": nn, "torch.distributed": dist})
pkg = types.ModuleType("dualpipe"); comm = types.ModuleType("dualpipe.comm"); utils = types.ModuleType("dualpipe.utils")
comm.TENSOR_SHAPES = 1; comm.TENSOR_DTYPE = 1
class WGS:
    enabled = False
utils.WeightGradStore = WGS; utils.run_backward = None; utils.scatter = lambda x, n, d: x; utils.gather = None
pkg.comm = comm
sys.modules.update({"dualpipe": pkg, "dualpipe.comm": comm, "dualpipe.utils": utils})
spec = importlib.util.spec_from_file_location("dualpipe_ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)

def ops_of(p, m, r):
    self = ref.DualPipe.__new__(ref.DualPipe)
    self.rank = r; self.num_ranks = p
    self.is_first_rank = r == 0; self.is_last_rank = r == p - 1
    self.is_in_second_half = r >= p // 2
    self.is_middle_rank = r in (p // 2 - 1, p // 2)
    out = []; f = [0, 0]; b = [0, 0]; pending = collections.deque()
    def d(phase): return phase ^ self.is_in_second_half
    def fwd(phase, recv=True, send=True):
        c = d(phase); out.append("F%d.%d" % (c, f[c])); f[c] += 1
    def bwd(phase, enable_zb=False, recv=True, send=True):
        c = d(phase)
        if enable_zb: out.append("B%d.%d" % (c, b[c])); pending.append((c, b[c]))
        else: out.append("BW%d.%d" % (c, b[c]))
        b[c] += 1
    def pair(phase0, phase1, recv0=True):
        c0, c1 = d(phase0), d(phase1)
        out.append("[F%d.%d&BW%d.%d]" % (c0, f[c0], c1, b[c1])); f[c0] += 1; b[c1] += 1
    def weight():
        c, j = pending.popleft(); out.append("W%d.%d" % (c, j))
    self._forward_chunk = fwd; self._backward_chunk = bwd; self._forward_backward_chunk = pair
    self._weight_chunk = weight
    for n in ("_recv_forward", "_send_forward", "_send_backward", "_commit_and_wait_comm", "_reset_states"):
        setattr(self, n, lambda *a, **k: None)
    self.forward_only = False; self.loss_chunks = []; self.batch_dim = 0
    class Q:
        def empty(self_): return not pending
    WGS.funcs_queue = Q()
    self.step(num_chunks=m, criterion=lambda *a: 0)
    return " ".join(out)

p, m = int(sys.argv[2]), int(sys.argv[3])
for r in range(p): print(r, ops_of(p, m, r))
