#include "session_store.hpp"

namespace shardplan::gui {

void save_session(QSettings& s, const Session& session) {
  s.beginGroup("session");
  s.setValue("inputs", QString::fromStdString(to_json(session.request).dump()));
  s.setValue("geometry", session.geometry);
  s.setValue("state", session.state);
  s.setValue("splitter", session.splitter);
  s.setValue("scatter_mode", session.scatter_mode);
  s.setValue("filter", session.filter);
  s.setValue("feasible_only", session.feasible_only);
  s.endGroup();
  s.sync();
}

Session load_session(QSettings& s) {
  Session out;
  s.beginGroup("session");
  const std::string inputs = s.value("inputs").toString().toStdString();
  if (!inputs.empty()) out.request = request_from_json(nlohmann::json::parse(inputs, nullptr, false));
  out.geometry = s.value("geometry").toByteArray();
  out.state = s.value("state").toByteArray();
  out.splitter = s.value("splitter").toByteArray();
  out.scatter_mode = s.value("scatter_mode", 0).toInt();
  out.filter = s.value("filter").toString();
  out.feasible_only = s.value("feasible_only", false).toBool();
  s.endGroup();
  return out;
}

}  // namespace shardplan::gui
