#pragma once
// `shardplan validate --runs FILE` / `--suite published`: recorded runs (shardplan.runs/1)
// against the simulator, printed as a table with statistics per source.
#include <string>

namespace shardplan::cli {

struct RecordedValidateOptions {
  std::string runs_file;  // resolved path
  std::string json, plot;
  std::string only;  // comma-separated run names or sources; empty = all
};

int run_validate_recorded(const RecordedValidateOptions& o);

}  // namespace shardplan::cli
