#pragma once
// Megatron-Core's --pipeline-model-parallel-layout string (e.g. "E|(t*16|)*2,L"): read into a
// partition and written from one. The grammar is PipelineParallelLayerLayout.parse_str_to_list
// (megatron/core/transformer/pipeline_parallel_layer_layout.py:282-321 at NVIDIA/Megatron-LM
// d98e8a64ddf34856e74b24714e3bedb2f5a39553): commas are cosmetic, "(...)*n" then "x*n" unroll,
// '|' separates chunks, E = embedding, t = transformer block, L = loss (final norm, output layer,
// loss), m = MTP layer. Chunk i is virtual stage i / pp of pipeline rank i % pp (:49-55), the
// order of ParallelConfig::partition.
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::interop {

// Transformer blocks per chunk of `layout` over `pp` ranks (pp x virtual stages entries), checked
// as Megatron checks it (validate_layer_layout, :86-151): E first and L last, once each; and as
// shardplan models it: E in the first chunk, L in the last, every other chunk with a block, no m.
// `num_layers` > 0: the blocks must number that. InputError naming `flag` otherwise.
std::vector<int> parse_megatron_layout(std::string_view layout, int pp, long long num_layers, std::string_view flag);

// The layout string of a partition (blocks per chunk, in model order): the embedding on the first
// chunk, the loss on the last, runs of equal middle chunks as "(t*k|)*n".
std::string megatron_layout(const std::vector<int>& chunks);

}  // namespace shardplan::interop
