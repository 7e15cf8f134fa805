#pragma once
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "json_fields.hpp"

namespace shardplan::simulator {

// Piecewise-linear in log10(x), clamped at both ends: efficiency (0, 1] of a kernel as a
// function of its size (FLOP for GEMMs, bytes for memory-bound ops); also used for other
// figures by size (bus bandwidth by bytes, an op's seconds per element by elements).
struct EfficiencyCurve {
  std::vector<double> log10_x;  // ascending
  std::vector<double> efficiency;
  [[nodiscard]] double at(double x) const;  // allocation-free
  // Caches the end points as sizes so that at() answers a size beyond either end without a
  // logarithm (the planner's hot path). Optional: call after the points are final; at() gives
  // the same values either way (the curve is flat beyond its ends).
  void seal();
  // Set by seal() (an aggregate still: curves are written as {log10_x, efficiency}).
  double sealed_front_x = 0, sealed_back_x = 0;  // 10^log10_x.front() / .back(); 0: not sealed
};

// A curve as the schema writes it: [[size, value], ...].
nlohmann::json to_json(const EfficiencyCurve& c);

// A curve of positive values ([[size, value], ...], sizes ascending, both > 0) at obj[key]:
// `pair` names a point in errors (e.g. "[bytes, bytes/s]"), `sizes` its first element ("sizes").
EfficiencyCurve parse_positive_curve(const nlohmann::json& obj, std::string_view key, std::string_view pair,
                                     std::string_view sizes, const JsonContext& ctx);

}  // namespace shardplan::simulator
