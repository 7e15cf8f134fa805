#pragma once
// A fresh, uniquely named directory under the system temp dir for one test (ctest runs tests in
// parallel), removed with everything in it when the test ends.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace shardplan::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "shardplan_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` inside the directory; returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = file(name);
    std::ofstream(p) << text;
    return p;
  }
  std::string write_json(const std::string& name, const nlohmann::json& j) const { return write(name, j.dump(2)); }

 private:
  std::filesystem::path path_;
};

}  // namespace shardplan::testing
