#include "pareto.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace shardplan::gui {

std::vector<int> pareto_front(const std::vector<PlotPoint>& pts) {
  std::vector<int> order(pts.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (pts[a].x != pts[b].x) return pts[a].x < pts[b].x;
    return pts[a].y < pts[b].y;
  });
  std::vector<int> front;
  double best_y = std::numeric_limits<double>::infinity();
  for (int i : order) {
    if (pts[i].y < best_y) {
      front.push_back(i);
      best_y = pts[i].y;
    }
  }
  return front;
}

}  // namespace shardplan::gui
