#pragma once
// `shardrun profile`: measure the machine it runs on (single rank or under mpirun) and write a
// hardware profile in the schema of hardware_profiles/ (measured: true, fitted efficiency
// curves, raw samples kept), usable as `--hardware measured.json` everywhere.
#include <string>

#include "executor/comm/mpi_runtime.hpp"

namespace shardplan::executor {

struct ProfileOptions {
  std::string out = "measured-profile.json";
  std::string base;             // profile the unmeasured figures come from (default: local-cpu-2core)
  std::string name;             // of the written profile (default: "<hostname>-measured")
  std::string dtypes;           // comma-separated (default: fp32,bf16; fp32,bf16,fp16 on CUDA)
  std::string device = "auto";  // auto | cpu | cuda
  bool quick = false;           // small grids and short timings (tests)
  bool quiet = false;
  double min_time_s = 0.05;  // per measurement
  int repeats = 1;           // passes over the kernels and the host overhead; each figure their median
  int threads = 0;           // per rank (0 = cores / ranks on the node)
  double comm_timeout_s = 60;
};

// Returns the exit code (0, or 130 when interrupted: nothing is written then). Throws
// InputError for bad options (identical on every rank).
int run_profile(MpiRuntime& runtime, const ProfileOptions& options);

// Set by SIGINT/SIGTERM; the profile stops (collectively) before its next measurement.
void request_profile_stop();

}  // namespace shardplan::executor
