#pragma once
// `shardrun health`: a short job that checks every rank before a (re)launch, as HyperPod's
// health checks do. Each rank runs a small tensor op on its device and checks the result,
// then the world runs an all-reduce of a known pattern under the communication timeout and
// checks the sum. Rank 0 prints one line per rank (and writes --out JSON); exit 0 when every
// rank passed, 1 when a check failed; a dead or hung peer turns into a CommError (the caller
// aborts the job with exit 4), so the check never hangs.
#include <string>

#include "executor/comm/mpi_runtime.hpp"

namespace shardplan::executor {

struct HealthOptions {
  double comm_timeout_s = 30;
  double allreduce_mib = 4;     // payload of the all-reduce check
  std::string device = "auto";  // auto | cpu | cuda
  std::string out;              // JSON report (rank 0), optional
  // Testing: "hang:RANK" (the rank never joins the all-reduce) or "fail:RANK" (its device check
  // reports a wrong result).
  std::string inject_fault;
  bool quiet = false;
};

// Returns the exit code (0 healthy, 1 a check failed). Throws InputError for bad options
// (identical on every rank) and CommError when the all-reduce times out or fails.
int run_health_check(MpiRuntime& runtime, const HealthOptions& options);

}  // namespace shardplan::executor
