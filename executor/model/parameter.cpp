#include "parameter.hpp"

#include "executor/errors.hpp"

namespace shardplan::executor {

namespace {

std::vector<int64_t> parts_of(const ShardSpec& spec, int64_t full) {
  return spec.segments.empty() ? std::vector<int64_t>{full} : spec.segments;
}

}  // namespace

std::vector<int64_t> shard_shape(const std::vector<int64_t>& full_shape, const ShardSpec& spec, int tp) {
  std::vector<int64_t> shape = full_shape;
  if (spec.replicated()) return shape;
  const int64_t n = spec.padded > 0 ? spec.padded : full_shape[static_cast<size_t>(spec.dim)];
  EXECUTOR_CHECK(n % tp == 0, "sharded dimension does not divide by tp");
  shape[static_cast<size_t>(spec.dim)] = n / tp;
  return shape;
}

torch::Tensor take_shard(const torch::Tensor& full, const ShardSpec& spec, int rank, int tp) {
  if (spec.replicated() || tp == 1) {
    if (spec.padded > 0 && spec.padded > full.size(spec.dim)) {
      std::vector<int64_t> pad_shape(full.sizes().begin(), full.sizes().end());
      pad_shape[static_cast<size_t>(spec.dim)] = spec.padded - full.size(spec.dim);
      return torch::cat({full, torch::zeros(pad_shape, full.options())}, spec.dim);
    }
    return full.clone();
  }
  torch::Tensor src = full;
  if (spec.padded > 0 && spec.padded > full.size(spec.dim)) {
    std::vector<int64_t> pad_shape(full.sizes().begin(), full.sizes().end());
    pad_shape[static_cast<size_t>(spec.dim)] = spec.padded - full.size(spec.dim);
    src = torch::cat({full, torch::zeros(pad_shape, full.options())}, spec.dim);
  }
  std::vector<torch::Tensor> pieces;
  int64_t offset = 0;
  for (int64_t part : parts_of(spec, src.size(spec.dim))) {
    EXECUTOR_CHECK(part % tp == 0, "a fused segment does not divide by tp");
    const int64_t each = part / tp;
    pieces.push_back(src.narrow(spec.dim, offset + rank * each, each));
    offset += part;
  }
  return torch::cat(pieces, spec.dim).contiguous();
}

torch::Tensor merge_shards(const std::vector<torch::Tensor>& shards, const ShardSpec& spec,
                           const std::vector<int64_t>& full_shape) {
  EXECUTOR_CHECK(!shards.empty(), "merge_shards: no shards");
  const int tp = static_cast<int>(shards.size());
  torch::Tensor full;
  if (spec.replicated() || tp == 1) {
    full = shards.front();
  } else {
    const int64_t padded = spec.padded > 0 ? spec.padded : full_shape[static_cast<size_t>(spec.dim)];
    std::vector<torch::Tensor> pieces;
    int64_t local_offset = 0;
    for (int64_t part : parts_of(spec, padded)) {
      const int64_t each = part / tp;
      for (const auto& s : shards) pieces.push_back(s.narrow(spec.dim, local_offset, each));
      local_offset += each;
    }
    full = torch::cat(pieces, spec.dim);
  }
  if (!spec.replicated() || spec.padded > 0) {
    const int d = spec.dim < 0 ? 0 : spec.dim;
    full = full.narrow(d, 0, full_shape[static_cast<size_t>(d)]);
  }
  return full.contiguous();
}

}  // namespace shardplan::executor
