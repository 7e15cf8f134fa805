#include "event_log.hpp"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace shardplan::executor::launch {

EventLog::EventLog(const std::string& path, bool quiet) : quiet_(quiet), start_(std::chrono::steady_clock::now()) {
  if (path.empty()) return;
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error(path + ": cannot open the event log for appending");
}

double EventLog::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void EventLog::emit(const std::string& event, nlohmann::json fields, const std::string& human) {
  nlohmann::json j = {
      {"event", event},
      {"unix_time_s", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"elapsed_s", elapsed_s()}};
  for (auto& [k, v] : fields.items()) j[k] = v;
  if (out_.is_open()) {
    out_ << j.dump() << "\n";
    out_.flush();
  }
  if (!quiet_ || event == "give_up") std::fprintf(stderr, "shardrun-launch: %s\n", human.c_str());
}

}  // namespace shardplan::executor::launch
