#pragma once
// SessionStore: the inputs, the window layout and the chart choices saved in QSettings and
// restored at the next start.
#include <QByteArray>
#include <QSettings>

#include "plan_request.hpp"

namespace shardplan::gui {

struct Session {
  PlanRequest request;
  QByteArray geometry, state, splitter;  // QWidget / QMainWindow / QSplitter blobs
  int scatter_mode = 0;
  QString filter;
  bool feasible_only = false;
};

void save_session(QSettings& s, const Session& session);
// Defaults for whatever is missing.
Session load_session(QSettings& s);

}  // namespace shardplan::gui
