#pragma once
// Human-readable tables of a Prediction.
#include <ostream>

#include "simulator/parallel_config.hpp"
#include "simulator/prediction.hpp"

namespace shardplan::cli {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // bytes, for the reports

void print_prediction(std::ostream& out, const simulator::Prediction& p, const simulator::ParallelConfig& cfg);

}  // namespace shardplan::cli
