#pragma once
// EventLog: the launcher's record of a job — one JSON object per line (appended and flushed
// as each event happens, so a crash of the launcher loses nothing already logged) plus a human
// progress line on stderr per event.
//   {"event": "launch"|"exit"|"health"|"relaunch"|"give_up"|"done"|"interrupted",
//    "unix_time_s": ..., "elapsed_s": ..., ...event fields}
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace shardplan::executor::launch {

class EventLog {
 public:
  // Empty path: no file. Throws std::runtime_error when the file cannot be opened.
  EventLog(const std::string& path, bool quiet);
  void emit(const std::string& event, nlohmann::json fields, const std::string& human);
  [[nodiscard]] double elapsed_s() const;

 private:
  std::ofstream out_;
  bool quiet_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace shardplan::executor::launch
