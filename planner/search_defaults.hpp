#pragma once
// The search's defaults as the front ends show them: `shardplan plan`'s flag values and the GUI's
// fields. They are SearchSpace{}, Constraints{} and SearchOptions{} written back as text with the
// enum name tables, and "auto" where the front ends choose by model and device (context- and
// expert-parallel degrees; FP8 recipes when asked for: space_parse.hpp). One set: change a default in search.hpp
// and both front ends follow.
#include <string>

namespace shardplan::planner {

struct SearchDefaults {
  // SearchSpace
  std::string nodes, global_batch_sizes, micro_batch_sizes, zero_stages, schedules, virtual_stages, recomputes;
  std::string precisions, mixed_precision, attention, fusion, grad_accum_dtype, cp_kind, rank_order;
  // FP8 only when asked (an expert does not switch precision recipes on unasked): "auto" tries it.
  std::string fp8 = "none", context_parallel = "auto", expert_parallel = "auto";
  int seq_len = 0, packed_document_tokens = 0;
  int lora_rank = 0;
  double lora_alpha = 0, lora_dropout = 0;
  std::string lora_base;
  // Constraints and SearchOptions
  double memory_headroom = 0;
  int max_nodes = 0, max_tp = 0;
  double max_usd_per_hour = 0;
  std::string objective;
  int top_k = 0;
};

const SearchDefaults& search_defaults();

// A number as the front ends write it: "16", "0.05" (printf %g).
std::string number_text(double v);

}  // namespace shardplan::planner
