#include "health_check.hpp"

#include <torch/cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "executor/comm/mpi_communicator.hpp"
#include "executor/errors.hpp"
#include "executor/io/fs_util.hpp"
#include "executor/run/checkpointing.hpp"

namespace shardplan::executor {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Fault {
  std::string kind;  // hang | fail
  int rank = -1;
};

Fault parse_fault(const std::string& spec) {
  if (spec.empty()) return {};
  const auto colon = spec.find(':');
  Fault f{spec.substr(0, colon), -1};
  try {
    if (colon != std::string::npos) f.rank = std::stoi(spec.substr(colon + 1));
  } catch (const std::exception&) { f.rank = -1; }
  if ((f.kind != "hang" && f.kind != "fail") || f.rank < 0)
    throw InputError("--inject-fault: expected hang:RANK or fail:RANK, got '" + spec + "'");
  return f;
}

torch::Device pick_device(const std::string& want, int local_rank) {
  if (want != "auto" && want != "cpu" && want != "cuda")
    throw InputError("--device: expected auto, cpu or cuda, got '" + want + "'");
  const bool cuda = torch::cuda::is_available();
  if (want == "cuda" && !cuda) throw InputError("--device cuda: this LibTorch sees no CUDA device");
  if (want == "cpu" || !cuda) return torch::Device(torch::kCPU);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % torch::cuda::device_count()));
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// A matmul with the identity must give the matrix back, and A·Aᵀ must be symmetric.
nlohmann::json device_check(const torch::Device& dev, int rank, bool broken) {
  nlohmann::json r = {{"device", dev.str()}};
  const auto t0 = Clock::now();
  try {
    torch::manual_seed(1000 + static_cast<uint64_t>(rank));
    const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(dev);
    torch::Tensor a = torch::randn({256, 256}, opts);
    torch::Tensor back = a.matmul(torch::eye(256, opts));
    if (broken) back[0][0] += 1.0f;
    torch::Tensor gram = a.matmul(a.t());
    const bool ok = torch::allclose(back, a, 1e-5, 1e-6) && torch::allclose(gram, gram.t(), 1e-4, 1e-4) &&
                    torch::isfinite(gram).all().item<bool>();
    r["ok"] = ok;
    if (!ok) r["error"] = "a 256x256 matmul on " + dev.str() + " returned a wrong result";
  } catch (const std::exception& e) {
    r["ok"] = false;
    r["error"] = std::string("tensor op failed: ") + e.what();
  }
  r["seconds"] = since(t0);
  return r;
}

// Every rank contributes rank+1 in every element: the sum is n(n+1)/2 everywhere.
nlohmann::json allreduce_check(Communicator& world, const torch::Device& dev, double mib) {
  const int64_t numel = std::max<int64_t>(1, static_cast<int64_t>(mib * 1048576.0 / 4));
  torch::Tensor t = torch::full({numel}, static_cast<float>(world.rank() + 1), torch::TensorOptions().device(dev));
  const auto t0 = Clock::now();
  world.all_reduce(t, ReduceOp::sum);  // CommError on timeout: the caller aborts the job
  const double seconds = since(t0);
  const double n = world.size();
  const double want = n * (n + 1) / 2;
  const bool ok = torch::all(t == static_cast<float>(want)).item<bool>();
  nlohmann::json r = {{"ok", ok}, {"bytes", numel * 4}, {"seconds", seconds}};
  if (!ok) r["error"] = "all-reduce returned a wrong sum (expected " + std::to_string(want) + " in every element)";
  return r;
}

void print_rank(const nlohmann::json& r) {
  const auto& d = r["device_check"];
  const auto& c = r["allreduce_check"];
  std::fprintf(stderr, "health: rank %d (%s, %s): device %s (%.1f ms), all-reduce %s (%.1f MiB, %.1f ms)%s%s\n",
               r["rank"].get<int>(), r["host"].get<std::string>().c_str(), d["device"].get<std::string>().c_str(),
               d["ok"].get<bool>() ? "ok" : "FAILED", 1e3 * d["seconds"].get<double>(),
               c["ok"].get<bool>() ? "ok" : "FAILED", c["bytes"].get<double>() / 1048576.0,
               1e3 * c["seconds"].get<double>(),
               d.contains("error") ? ("; " + d["error"].get<std::string>()).c_str() : "",
               c.contains("error") ? ("; " + c["error"].get<std::string>()).c_str() : "");
}

}  // namespace

int run_health_check(MpiRuntime& runtime, const HealthOptions& o) {
  const Fault fault = parse_fault(o.inject_fault);
  if (!(o.comm_timeout_s > 0)) throw InputError("--comm-timeout: expected seconds > 0");
  if (!(o.allreduce_mib > 0)) throw InputError("--allreduce-mib: expected MiB > 0");
  const int rank = runtime.world_rank();
  const auto t0 = Clock::now();
  const torch::Device dev = pick_device(o.device, runtime.local_rank());
  nlohmann::json mine = {{"rank", rank}, {"host", hostname()}, {"pid", static_cast<int64_t>(::getpid())}};
  mine["device_check"] = device_check(dev, rank, fault.kind == "fail" && fault.rank == rank);
  MpiCommunicator world(MPI_COMM_WORLD, "world", o.comm_timeout_s);
  if (fault.kind == "hang" && fault.rank == rank) {
    std::fprintf(stderr, "health: rank %d: injected fault 'hang'\n", rank);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  mine["allreduce_check"] = allreduce_check(world, dev, o.allreduce_mib);
  mine["ok"] = mine["device_check"]["ok"].get<bool>() && mine["allreduce_check"]["ok"].get<bool>();
  const auto all = all_gather_strings(world, mine.dump());  // every rank sees every verdict
  nlohmann::json report = {{"schema", "shardplan.health/1"}, {"ranks", nlohmann::json::array()}};
  int failed = 0;
  for (const auto& s : all) {
    nlohmann::json r = nlohmann::json::parse(s);
    failed += r["ok"].get<bool>() ? 0 : 1;
    report["ranks"].push_back(std::move(r));
  }
  if (rank != 0) return failed ? 1 : 0;
  for (const auto& r : report["ranks"])
    if (!o.quiet || !r["ok"].get<bool>()) print_rank(r);
  report["ok"] = failed == 0;
  report["seconds"] = since(t0);
  if (!o.out.empty()) io::atomic_write_file(o.out, report.dump(2) + "\n");
  std::fprintf(stderr, "health: %s (%d of %zu rank(s) healthy, %.2f s)\n", failed ? "FAILED" : "ok",
               static_cast<int>(all.size()) - failed, all.size(), since(t0));
  return failed ? 1 : 0;
}

}  // namespace shardplan::executor
