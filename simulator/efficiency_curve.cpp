#include "efficiency_curve.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace shardplan::simulator {

double EfficiencyCurve::at(double x) const {
  if (log10_x.empty()) return 1.0;
  if (sealed_back_x > 0) {  // sealed: the clamped ends need no logarithm
    if (x <= sealed_front_x) return efficiency.front();
    if (x >= sealed_back_x) return efficiency.back();
  }
  const double lx = std::log10(std::max(x, 1e-30));
  if (lx <= log10_x.front()) return efficiency.front();
  if (lx >= log10_x.back()) return efficiency.back();
  std::size_t i = 1;
  while (log10_x[i] < lx) ++i;
  const double t = (lx - log10_x[i - 1]) / (log10_x[i] - log10_x[i - 1]);
  return efficiency[i - 1] + t * (efficiency[i] - efficiency[i - 1]);
}

void EfficiencyCurve::seal() {
  if (log10_x.empty()) return;
  // Rounded inwards by a hair so that a sealed answer is never one the logarithm would not give.
  sealed_front_x = std::pow(10.0, log10_x.front()) * (1.0 - 1e-12);
  sealed_back_x = std::pow(10.0, log10_x.back()) * (1.0 + 1e-12);
}

nlohmann::json to_json(const EfficiencyCurve& c) {
  nlohmann::json a = nlohmann::json::array();
  for (std::size_t i = 0; i < c.log10_x.size(); ++i) a.push_back({std::pow(10.0, c.log10_x[i]), c.efficiency[i]});
  return a;
}

EfficiencyCurve parse_positive_curve(const nlohmann::json& obj, std::string_view key, std::string_view pair,
                                     std::string_view sizes, const JsonContext& ctx) {
  const nlohmann::json& arr = require(obj, key, ctx);
  if (!arr.is_array() || arr.empty()) ctx.fail(key, "a non-empty array of " + std::string(pair) + " pairs");
  EfficiencyCurve c;
  for (const auto& p : arr) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number() || !(p[0].get<double>() > 0) ||
        !(p[1].get<double>() > 0))
      ctx.fail(key, std::string(pair) + " pairs of positive numbers");
    const double lx = std::log10(p[0].get<double>());
    if (!c.log10_x.empty() && lx <= c.log10_x.back()) ctx.fail(key, std::string(sizes) + " in ascending order");
    c.log10_x.push_back(lx);
    c.efficiency.push_back(p[1].get<double>());
  }
  c.seal();
  return c;
}

}  // namespace shardplan::simulator
