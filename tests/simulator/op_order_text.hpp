#pragma once
// A rank's pipeline op list in the references' notation (docs/split_backward_schedules.md §6):
// F / B / W / BW (a full backward) chunk.mb, and [F c.j&BW c'.j'] an overlapped pair.
#include <string>
#include <vector>

#include "simulator/pipeline_schedule.hpp"

namespace shardplan::testing {

inline std::string op_order_text(const std::vector<simulator::PipelineOp>& ops) {
  std::string s;
  auto one = [](const char* kind, int c, int j) { return kind + std::to_string(c) + "." + std::to_string(j); };
  for (const auto& o : ops) {
    s += s.empty() ? "" : " ";
    if (o.overlap_chunk >= 0) s += "[" + one("F", o.chunk, o.mb) + "&" + one("BW", o.overlap_chunk, o.overlap_mb) + "]";
    else s += one(o.weight ? "W" : o.full ? "BW" : o.backward ? "B" : "F", o.chunk, o.mb);
  }
  return s;
}

}  // namespace shardplan::testing
