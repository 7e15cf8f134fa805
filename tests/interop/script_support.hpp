#pragma once
// Helpers of the interop tests that check generated shell lines: text files in and out, a fake
// command on PATH that records its argv, and the strings that break naive quoting.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "formats/shell_quote.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::testing::scripts {

inline void write_text(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream(path, std::ios::binary) << text;
  if (executable) ::chmod(path.c_str(), 0755);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "a\0b\0" -> {"a", "b"}: what fake_recorder writes.
inline std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '\0') out.push_back(std::exchange(cur, {}));
    else cur += c;
  }
  return out;
}

// A fake command `name` in <dir>/bin that records its arguments (NUL-separated) in $RECORD and
// exits 0.
inline void fake_recorder(const TempDir& dir, const std::string& name) {
  std::filesystem::create_directories(dir.path() / "bin");
  write_text(dir.file("bin/" + name),
             "#!/bin/bash\n: > \"$RECORD\"\nfor a in \"$@\"; do printf '%s\\0' \"$a\" >> \"$RECORD\"; done\n", true);
}

// `bash -n` of `script` written to <dir>/syntax_check.sh: a syntax check, nothing executed.
inline CommandResult bash_syntax(const TempDir& dir, const std::string& script) {
  const std::string path = dir.file("syntax_check.sh");
  write_text(path, script);
  return run_command("bash -n " + formats::shell_quote(path));
}

// Strings that break naive quoting. Payloads that would run something only touch the canary.
inline std::vector<std::string> hostile_strings(const std::string& canary) {
  return {"it's",
          "$(touch " + canary + ")",
          "`touch " + canary + "`",
          "; touch " + canary + " #",
          "x' ; touch " + canary + " ; echo 'y",
          "&& touch " + canary + " ||",
          "two  spaces and\ttab",
          "line1\nline2\n",
          "\"double\" and 'single' quotes",
          "'",
          "''",
          "\\",
          "$HOME ${PATH} $1 $@ $$",
          "*",
          "~",
          "!!",
          "-n",
          "a=b",
          "",
          "\xc3\x9c"
          "n"
          "\xc3\xaf"
          "c"
          "\xc3\xb8"
          "d"
          "\xc3\xa9"
          " \xe2\x9c\x93"};
}

}  // namespace shardplan::testing::scripts
