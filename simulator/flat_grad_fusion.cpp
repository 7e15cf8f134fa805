#include "flat_grad_fusion.hpp"

namespace shardplan::simulator {

FlatGradFusion flat_grad_fusion(const ModelSpec& model, const ParallelConfig& cfg, bool lora) {
  FlatGradFusion f;
  if (cfg.zero_stage >= 2 || lora) return f;
  f.linears = cfg.precision == Precision::fp32;
  f.embedding = !model.tied_embeddings;
  f.head = f.linears && f.embedding;
  return f;
}

bool linear_into_flat(const LinearDesc& lin, const ParallelConfig& cfg, const FlatGradFusion& f) {
  const bool sp_column = cfg.sequence_parallel && cfg.tp > 1 && lin.split == TpSplit::column;
  return f.linears && !sp_column;
}

double linears_into_flat(const std::vector<LinearDesc>& linears, const ParallelConfig& cfg, const FlatGradFusion& f) {
  double elements = 0;
  for (const auto& lin : linears)
    if (linear_into_flat(lin, cfg, f)) elements += lin.weight_local(cfg.tp);
  return elements;
}

}  // namespace shardplan::simulator
