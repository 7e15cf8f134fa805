// Communicator::all_to_all_v on the MPI backend, under mpirun: uneven counts (zero rows
// included, a rank sending nothing at all) on 2 and 3 ranks against a reference every rank
// computes locally, for float rows of shape (2, 3), int64 and bf16 rows; the call is counted
// in CommStats. A rank that hangs or dies before joining an all-to-all ends every rank within
// the collective timeout (CommError -> MPI_Abort, as shardrun does). Communicator::
// reduce_scatter and all_reduce (pairwise exchanges built on the same all-to-all,
// comm/mpi_pairwise.hpp) on 2 and 3 ranks, fp32 and bf16, empty, small, uneven and
// rendezvous-sized buffers, blocking and asynchronous, against the sums every rank computes
// locally; the all-reduce's max (MPI's own) beside them; a bf16 sum over 3 ranks rounded once.
//
// The ranks are this test binary itself, started by mpirun with SHARDPLAN_A2A_WORKER set and
// a filter selecting AllToAllWorker.Run (skipped in an ordinary test run).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "executor/comm/mpi_communicator.hpp"
#include "executor/comm/mpi_runtime.hpp"
#include "executor/errors.hpp"
#include "harness.hpp"

namespace shardplan::testing {
namespace all_to_all_test {  // named, not anonymous: the files share a unity-build unit

using executor::Communicator;
using executor::MpiCommunicator;

// Rows rank `src` sends to rank `dst` in round `round`: 0 to 3, zeros included; in round 2
// rank 0 sends nothing at all.
int64_t rows(int src, int dst, int round) {
  if (round == 2 && src == 0) return 0;
  return (src * 3 + dst * 5 + round * 7 + 1) % 4;
}

// The value of element e of row i that `src` sends to `dst`: identifies all four.
double value(int src, int dst, int64_t i, int64_t e) { return src * 1000 + dst * 100 + i * 10 + e; }

// One all_to_all_v of `dtype` rows shaped `row_shape` in round `round`, checked against the
// reference built locally from rows() and value().
void check_round(Communicator& comm, int round, torch::ScalarType dtype, std::vector<int64_t> row_shape) {
  const int me = comm.rank(), P = comm.size();
  int64_t row = 1;
  for (int64_t d : row_shape) row *= d;
  std::vector<int64_t> send(static_cast<size_t>(P)), recv(static_cast<size_t>(P));
  std::vector<double> in_values, expected;
  for (int p = 0; p < P; ++p) {
    send[static_cast<size_t>(p)] = rows(me, p, round);
    recv[static_cast<size_t>(p)] = rows(p, me, round);
    for (int64_t i = 0; i < rows(me, p, round); ++i)
      for (int64_t e = 0; e < row; ++e) in_values.push_back(value(me, p, i, e));
    for (int64_t i = 0; i < rows(p, me, round); ++i)
      for (int64_t e = 0; e < row; ++e) expected.push_back(value(p, me, i, e));
  }
  auto shape = [&](int64_t n) {
    std::vector<int64_t> s{n};
    s.insert(s.end(), row_shape.begin(), row_shape.end());
    return s;
  };
  const int64_t n_in = static_cast<int64_t>(in_values.size()) / row,
                n_out = static_cast<int64_t>(expected.size()) / row;
  torch::Tensor in = torch::tensor(in_values, torch::kDouble).to(dtype).reshape(shape(n_in));
  torch::Tensor out = torch::full(shape(n_out), -1.0, torch::TensorOptions().dtype(dtype));
  const auto calls = comm.stats().calls;
  const double bytes = comm.stats().bytes;
  comm.all_to_all_v(out, in, send, recv);
  EXPECT_EQ(comm.stats().calls, calls + 1);
  EXPECT_EQ(comm.stats().bytes, bytes + static_cast<double>(in.nbytes()));
  const torch::Tensor want = torch::tensor(expected, torch::kDouble).to(dtype).reshape(shape(n_out));
  EXPECT_TRUE(torch::equal(out, want)) << "rank " << me << " round " << round << " dtype " << dtype << "\n"
                                       << out << "\nexpected\n"
                                       << want;
}

// Element e of block j of rank `src`'s reduce-scatter input: small integers, exact in bf16 and
// in any order of summation.
double rs_value(int src, int j, int64_t e) { return (src + 1) * (j + 2) + e % 7; }

void check_reduce_scatter(Communicator& comm, torch::ScalarType dtype, int64_t n, bool async) {
  const int me = comm.rank(), P = comm.size();
  std::vector<double> in_values, expected(static_cast<size_t>(n), 0.0);
  for (int j = 0; j < P; ++j)
    for (int64_t e = 0; e < n; ++e) in_values.push_back(rs_value(me, j, e));
  for (int src = 0; src < P; ++src)
    for (int64_t e = 0; e < n; ++e) expected[static_cast<size_t>(e)] += rs_value(src, me, e);
  // Large buffers go as (rows, 4096) matrices, as sequence parallelism hands them over: the
  // blocks are the flat ranges all the same.
  const bool rows = n % 4096 == 0 && n > 0;
  const std::vector<int64_t> in_shape = rows ? std::vector<int64_t>{P * n / 4096, 4096} : std::vector<int64_t>{P * n};
  const std::vector<int64_t> out_shape = rows ? std::vector<int64_t>{n / 4096, 4096} : std::vector<int64_t>{n};
  const torch::Tensor in = torch::tensor(in_values, torch::kDouble).to(dtype).reshape(in_shape);
  const torch::Tensor in_before = in.clone();
  torch::Tensor out = torch::full(out_shape, -1.0, torch::TensorOptions().dtype(dtype));
  const auto calls = comm.stats().calls;
  if (async) {
    comm.reduce_scatter_async(out, in)->wait();
  } else {
    comm.reduce_scatter(out, in);
  }
  EXPECT_EQ(comm.stats().calls, calls + 1);
  const torch::Tensor want = torch::tensor(expected, torch::kDouble).to(dtype).reshape(out_shape);
  EXPECT_TRUE(torch::equal(out, want)) << "rank " << me << " of " << P << ", n " << n << ", dtype " << dtype;
  EXPECT_TRUE(torch::equal(in, in_before)) << "rank " << me << ": reduce_scatter changed its input";
}

void check_all_reduce(Communicator& comm, torch::ScalarType dtype, int64_t n, bool async) {
  const int me = comm.rank(), P = comm.size();
  std::vector<double> values, expected(static_cast<size_t>(n), 0.0), largest(static_cast<size_t>(n), -1e9);
  for (int64_t e = 0; e < n; ++e) values.push_back(rs_value(me, static_cast<int>(e % 5), e));
  for (int src = 0; src < P; ++src)
    for (int64_t e = 0; e < n; ++e) {
      const double v = rs_value(src, static_cast<int>(e % 5), e);
      expected[static_cast<size_t>(e)] += v;
      largest[static_cast<size_t>(e)] = std::max(largest[static_cast<size_t>(e)], v);
    }
  torch::Tensor t = torch::tensor(values, torch::kDouble).to(dtype);
  torch::Tensor m = t.clone();
  if (async) {
    comm.all_reduce_async(t)->wait();
  } else {
    comm.all_reduce(t);
  }
  comm.all_reduce(m, executor::ReduceOp::max);
  EXPECT_TRUE(torch::equal(t, torch::tensor(expected, torch::kDouble).to(dtype)))
      << "all_reduce sum: rank " << me << " of " << P << ", n " << n << ", dtype " << dtype;
  EXPECT_TRUE(torch::equal(m, torch::tensor(largest, torch::kDouble).to(dtype)))
      << "all_reduce max: rank " << me << " of " << P << ", n " << n << ", dtype " << dtype;
}

// A 16-bit sum over three or more ranks is taken in fp32 and rounded once: rank 0 adds 1, each
// other rank 2^-8. bf16 keeps 8 significant bits, so 1 + 2^-8 rounds back to 1 (a tie, to even)
// and a sum rounded after every add stays 1; rounded once it is 1 + (P-1) 2^-8 (P = 3: 1 + 2^-7).
void check_16bit_sum_rounds_once(Communicator& comm, bool all_reduce) {
  const int me = comm.rank(), P = comm.size();
  if (P < 3) return;
  const int64_t n = 4096;  // over the pairwise threshold (4 KiB)
  const double mine = me == 0 ? 1.0 : std::ldexp(1.0, -8);
  const double want_value = 1.0 + (P - 1) * std::ldexp(1.0, -8);
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  torch::Tensor out = all_reduce ? torch::full({n}, mine, bf16) : torch::empty({n}, bf16);
  if (all_reduce) {
    comm.all_reduce(out);
  } else {
    comm.reduce_scatter(out, torch::full({P * n}, mine, bf16));
  }
  EXPECT_TRUE(torch::equal(out, torch::full({n}, want_value, bf16)))
      << (all_reduce ? "all_reduce" : "reduce_scatter") << " rank " << me << " of " << P << ": "
      << out.slice(0, 0, 4).to(torch::kFloat) << " want " << want_value;
}

// The body of each mpirun rank.
TEST(AllToAllWorker, Run) {
  const char* mode = std::getenv("SHARDPLAN_A2A_WORKER");
  if (mode == nullptr) GTEST_SKIP() << "runs only as an mpirun rank of the AllToAll tests";
  executor::MpiRuntime runtime(nullptr, nullptr);
  const double timeout = 3.0;
  MpiCommunicator world(MPI_COMM_WORLD, "world", timeout);
  const std::string m = mode;
  if (m == "pairwise") {
    for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16})
      for (bool async : {false, true}) {
        for (int64_t n : {int64_t{0}, int64_t{5}, int64_t{1} << 18}) check_reduce_scatter(world, dtype, n, async);
        // One element (MPI's path), 2049 and 3001 (uneven blocks), 2^18 + 1 (rendezvous-sized).
        for (int64_t n : {int64_t{1}, int64_t{2049}, int64_t{3001}, (int64_t{1} << 18) + 1})
          check_all_reduce(world, dtype, n, async);
      }
    check_16bit_sum_rounds_once(world, false);
    check_16bit_sum_rounds_once(world, true);
    return;
  }
  if (m == "uneven") {
    for (int round = 0; round < 3; ++round) {
      check_round(world, round, torch::kFloat, {2, 3});
      check_round(world, round, torch::kLong, {});
      check_round(world, round, torch::kBFloat16, {5});
    }
    return;
  }
  // hang / die: one healthy all-to-all, then rank 1 never joins the second one.
  check_round(world, 0, torch::kFloat, {2});
  if (world.rank() == 1) {
    std::cerr << "rank 1: " << m << " before the all-to-all\n" << std::flush;
    if (m == "die") std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(120));  // far past the timeout; ended by the abort
    return;
  }
  try {
    check_round(world, 1, torch::kFloat, {2});
  } catch (const executor::CommError& e) {
    std::cerr << "rank " << world.rank() << ": " << e.what() << "\n" << std::flush;
    executor::MpiRuntime::abort(4);  // as shardrun does: nobody waits
  }
  ADD_FAILURE() << "rank " << world.rank() << ": the all-to-all returned although rank 1 never joined";
}

struct WorkerRun {
  int exit_code = 0;
  std::string output;
  double seconds = 0;
};

WorkerRun run_workers(int ranks, const std::string& mode) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto t0 = std::chrono::steady_clock::now();
  const CommandResult c = run_command(
      "SHARDPLAN_A2A_WORKER=" + mode + " timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
      std::to_string(ranks) + " " + quote(self) + " --gtest_filter=AllToAllWorker.Run --gtest_color=no");
  return {c.status, c.out, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

TEST(AllToAll, UnevenCountsMatchTheLocalReferenceOnTwoAndThreeRanks) {
  for (int ranks : {2, 3}) {
    const WorkerRun r = run_workers(ranks, "uneven");
    EXPECT_EQ(r.exit_code, 0) << ranks << " ranks:\n" << r.output;
    EXPECT_EQ(count_of(r.output, "[  PASSED  ] 1 test"), static_cast<size_t>(ranks)) << r.output;
  }
}

TEST(PairwiseCollectives, ReduceScatterAndAllReduceSumOnTwoAndThreeRanks) {
  for (int ranks : {2, 3}) {
    const WorkerRun r = run_workers(ranks, "pairwise");
    EXPECT_EQ(r.exit_code, 0) << ranks << " ranks:\n" << r.output;
    EXPECT_EQ(count_of(r.output, "[  PASSED  ] 1 test"), static_cast<size_t>(ranks)) << r.output;
  }
}

TEST(AllToAll, ARankThatHangsBeforeTheAllToAllEndsEveryRankWithinTheTimeout) {
  const WorkerRun r = run_workers(3, "hang");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all_to_all_v on group 'world' timed out after"), std::string::npos) << r.output;
  // Bounded by the 3 s timeout plus start-up, not by rank 1's 120 s sleep or the 300 s limit.
  EXPECT_LT(r.seconds, 60.0) << r.output;
}

TEST(AllToAll, ARankThatDiesBeforeTheAllToAllEndsEveryRankWithinTheTimeout) {
  const WorkerRun r = run_workers(3, "die");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1: die before the all-to-all"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 60.0) << r.output;
}

}  // namespace all_to_all_test
}  // namespace shardplan::testing
