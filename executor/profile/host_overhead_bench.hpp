#pragma once
// The host time of the executor's own model beyond its kernels (simulator/host_overhead.hpp):
// shardrun's Transformer (model/transformer.hpp, the code training runs) at micro shapes
// (hidden 32, 4 heads, sequence 64, vocabulary 64: kernels take under a tenth of the time),
// forward and forward + backward of one micro-batch, autograd on, as training runs it:
//   block (Llama and GPT-2 style): (t(3 blocks) - t(1 block)) / 2
//   adapter: (t(3 Llama blocks, LoRA r4 on all 7 linears) - t(3 blocks)) / 21
//   MoE expert: (t(3 MoE blocks, 8 experts) - t(3 MoE blocks, 2 experts)) / 18
//   MoE layer: (t(3 MoE blocks) - t(1 MoE block)) / 2 at 2 experts, less 2 experts
// Every rank measures at once, as in the kernel benchmarks; times are the slowest rank's.
#include "kernel_bench.hpp"
#include "simulator/host_overhead.hpp"

namespace shardplan::executor {

simulator::HostOverhead bench_host_overhead(const BenchContext& ctx);

// Per part and pass, the median over several measurements.
simulator::HostOverhead median_of_passes(const std::vector<simulator::HostOverhead>& passes);

}  // namespace shardplan::executor
