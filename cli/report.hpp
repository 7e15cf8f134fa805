#pragma once
// Human-readable tables of a Prediction.
#include <ostream>

#include "simulator/parallel_config.hpp"
#include "simulator/prediction.hpp"

namespace shardplan::cli {

void print_prediction(std::ostream& out, const simulator::Prediction& p, const simulator::ParallelConfig& cfg);

}  // namespace shardplan::cli
