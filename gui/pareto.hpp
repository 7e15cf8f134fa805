#pragma once
// 2-D Pareto front of plotted points (both axes minimised; negate one to maximise it).
#include <vector>

namespace shardplan::gui {

struct PlotPoint {
  int row = 0;  // source row of the candidates model
  double x = 0, y = 0;
};

// Indices into `pts` of the non-dominated points, sorted by x. A point is dominated when
// another is <= in both coordinates and < in one.
std::vector<int> pareto_front(const std::vector<PlotPoint>& pts);

}  // namespace shardplan::gui
