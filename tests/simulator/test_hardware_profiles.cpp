// Tests of the hardware profiles (hardware_profiles/*.json): every built-in loads with sane SI
// figures, every figure has a source, "base" overlays (including a quantity given in another
// unit), one-line input errors, EfficiencyCurve interpolation, and the atomic file writer.
#include "simulator/hardware_profile.hpp"

#include <gtest/gtest.h>

#include "support/input_error.hpp"

#include <unistd.h>
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"

namespace shardplan::simulator {
namespace hardware_profiles_test {  // named, not anonymous: the files share a unity-build unit

using testing::input_error_of;

namespace fs = std::filesystem;

std::string profile_path(const std::string& name) { return data_dir() + "/hardware_profiles/" + name + ".json"; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

using shardplan::testing::TempDir;

const std::vector<std::string> kBuiltins{"g5.48xlarge",   "gaudi2-hls2", "p4d.24xlarge",
                                         "p4de.24xlarge", "p5.48xlarge", "trn1.32xlarge"};

// ----- built-in profiles --------------------------------------------------------------------

TEST(HardwareProfiles, BuiltinNames) {
  const auto names = builtin_hardware_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& n : kBuiltins) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n << " missing";
  EXPECT_GE(names.size(), kBuiltins.size());
}

TEST(HardwareProfiles, EveryBuiltinLoadsWithPositiveFigures) {
  for (const auto& n : builtin_hardware_names()) {
    SCOPED_TRACE(n);
    HardwareProfile hw;
    ASSERT_NO_THROW(hw = load_hardware(n));
    EXPECT_EQ(hw.name, n);
    EXPECT_EQ(hw.source_file, profile_path(n));
    EXPECT_FALSE(hw.measured);
    EXPECT_FALSE(hw.device.name.empty());
    EXPECT_GT(hw.device.memory_bytes, 1e9);
    // Loose floors that still catch a unit slip (GB/s vs B/s, TFLOP/s vs FLOP/s); the local CPU
    // profile (one core per rank) is the smallest.
    EXPECT_GT(hw.device.memory_bandwidth_Bps, 1e9);
    EXPECT_GT(hw.device.peak(Precision::bf16), 1e10);
    EXPECT_GT(hw.device.peak(Precision::fp32), 0);
    EXPECT_GE(hw.device.kernel_launch_s, 0);
    const auto& rm = hw.device.runtime_memory;
    EXPECT_LT(rm.context_bytes + 8 * rm.communicator_bytes + rm.library_workspace_bytes, hw.device.memory_bytes);
    EXPECT_GT(hw.node.devices_per_node, 0);
    EXPECT_GT(hw.node.intra.bandwidth_Bps, 0);
    EXPECT_GT(hw.node.intra.latency_s, 0);
    EXPECT_GT(hw.node.intra.efficiency, 0);
    EXPECT_LE(hw.node.intra.efficiency, 1);
    EXPECT_GT(hw.network.bandwidth_Bps, 0);
    EXPECT_GT(hw.network.latency_s, 0);
    EXPECT_GT(hw.network.efficiency, 0);
    EXPECT_LE(hw.network.efficiency, 1);
    EXPECT_GT(hw.host.memory_bytes, 0);
    EXPECT_GT(hw.host.memory_bandwidth_Bps, 0);
    EXPECT_GT(hw.host.link_bandwidth_Bps, 0);
    EXPECT_GT(hw.host.cpu_cores, 0);
    EXPECT_GE(hw.price.usd_per_hour, 0);
    EXPECT_FALSE(hw.device.gemm_efficiency.log10_x.empty());
    EXPECT_FALSE(hw.device.memory_efficiency.log10_x.empty());
    // Curves rise with size (bigger kernels are at least as efficient).
    for (const EfficiencyCurve* c : {&hw.device.gemm_efficiency, &hw.device.memory_efficiency})
      EXPECT_TRUE(std::is_sorted(c->efficiency.begin(), c->efficiency.end()));
  }
}

// The one unit variant of `base` present in `obj`, as (suffix, value).
std::pair<std::string, double> unit_variant(const nlohmann::json& obj, const std::string& base) {
  std::pair<std::string, double> out;
  int found = 0;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() <= base.size() + 1 || !k.starts_with(base + "_")) continue;
    const std::string suffix = k.substr(base.size() + 1);
    // "memory_" also prefixes "memory_bandwidth_GBps": only plain unit suffixes count.
    if (suffix.find('_') != std::string::npos && suffix != "bytes_per_s") continue;
    out = {suffix, it->get<double>()};
    ++found;
  }
  EXPECT_EQ(found, 1) << base;
  return out;
}

double bytes_scale(const std::string& u) {
  if (u == "bytes") return 1;
  if (u == "KiB") return 1024.0;
  if (u == "MiB") return 1024.0 * 1024;
  if (u == "GiB") return 1024.0 * 1024 * 1024;
  if (u == "KB") return 1e3;
  if (u == "MB") return 1e6;
  if (u == "GB") return 1e9;
  if (u == "TB") return 1e12;
  ADD_FAILURE() << "unexpected bytes unit " << u;
  return 0;
}
double bandwidth_scale(const std::string& u) {
  if (u == "GBps") return 1e9;
  if (u == "GiBps") return 1024.0 * 1024 * 1024;
  if (u == "MBps") return 1e6;
  if (u == "TBps") return 1e12;
  if (u == "Gbps") return 1e9 / 8;
  if (u == "bytes_per_s") return 1;
  ADD_FAILURE() << "unexpected bandwidth unit " << u;
  return 0;
}
double seconds_scale(const std::string& u) {
  if (u == "s") return 1;
  if (u == "ms") return 1e-3;
  if (u == "us") return 1e-6;
  if (u == "ns") return 1e-9;
  ADD_FAILURE() << "unexpected time unit " << u;
  return 0;
}

void expect_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::abs(expected)) << "expected " << expected;
}

TEST(HardwareProfiles, SiConversionsFromJson) {
  // Spot values computed here from the files' own numbers and units.
  {
    const auto j = read_json_file(profile_path("p4d.24xlarge"));
    const auto hw = load_hardware("p4d.24xlarge");
    ASSERT_TRUE(j["device"].contains("memory_MiB"));
    EXPECT_EQ(hw.device.memory_bytes, j["device"]["memory_MiB"].get<double>() * 1048576.0);
    EXPECT_EQ(hw.device.memory_bytes, 40960.0 * (1 << 20));
    EXPECT_EQ(hw.network.bandwidth_Bps, j["network"]["bandwidth_Gbps"].get<double>() * 1e9 / 8);
    EXPECT_EQ(hw.network.bandwidth_Bps, 50e9);  // 400 Gb/s
    expect_rel(hw.network.latency_s, j["network"]["latency_us"].get<double>() * 1e-6);
    expect_rel(hw.device.kernel_launch_s, j["device"]["kernel_launch_us"].get<double>() * 1e-6);
    EXPECT_EQ(hw.device.peak(Precision::bf16), j["device"]["peak_TFLOPs"]["bf16"].get<double>() * 1e12);
    EXPECT_EQ(hw.device.runtime_memory.context_bytes,
              j["device"]["runtime_memory"]["context_MiB"].get<double>() * 1048576.0);
    EXPECT_EQ(hw.device.runtime_memory.communicator_bytes,
              j["device"]["runtime_memory"]["communicator_MiB"].get<double>() * 1048576.0);
    EXPECT_EQ(hw.host.memory_bytes, 1152.0 * 1073741824.0);
    EXPECT_EQ(hw.node.topology, IntraTopology::switch_fabric);
  }
  {
    // trn1: device memory in GiB, intra-node bandwidth in GiB/s.
    const auto j = read_json_file(profile_path("trn1.32xlarge"));
    const auto hw = load_hardware("trn1.32xlarge");
    EXPECT_EQ(hw.device.memory_bytes, j["device"]["memory_GiB"].get<double>() * 1073741824.0);
    EXPECT_EQ(hw.node.intra.bandwidth_Bps, j["node"]["intra_node"]["bandwidth_GiBps"].get<double>() * 1073741824.0);
    EXPECT_EQ(hw.node.topology, IntraTopology::torus);
    EXPECT_EQ(hw.node.devices_per_node, 16);
  }
  // Every built-in: the main quantities equal number x unit scale of whatever unit the file uses.
  for (const auto& n : kBuiltins) {
    SCOPED_TRACE(n);
    if (n == "p4de.24xlarge") continue;  // an overlay: its network/node live in the base
    const auto j = read_json_file(profile_path(n));
    const auto hw = load_hardware(n);
    auto [mu, mv] = unit_variant(j["device"], "memory");
    EXPECT_EQ(hw.device.memory_bytes, mv * bytes_scale(mu));
    auto [bu, bv] = unit_variant(j["device"], "memory_bandwidth");
    EXPECT_EQ(hw.device.memory_bandwidth_Bps, bv * bandwidth_scale(bu));
    auto [nu, nv] = unit_variant(j["network"], "bandwidth");
    EXPECT_EQ(hw.network.bandwidth_Bps, nv * bandwidth_scale(nu));
    auto [lu, lv] = unit_variant(j["network"], "latency");
    expect_rel(hw.network.latency_s, lv * seconds_scale(lu));
    auto [iu, iv] = unit_variant(j["node"]["intra_node"], "bandwidth");
    EXPECT_EQ(hw.node.intra.bandwidth_Bps, iv * bandwidth_scale(iu));
    auto [ilu, ilv] = unit_variant(j["node"]["intra_node"], "latency");
    expect_rel(hw.node.intra.latency_s, ilv * seconds_scale(ilu));
    EXPECT_EQ(hw.device.peak(Precision::bf16), j["device"]["peak_TFLOPs"]["bf16"].get<double>() * 1e12);
    EXPECT_EQ(hw.node.devices_per_node, j["node"]["devices_per_node"].get<int>());
    EXPECT_EQ(hw.host.cpu_cores, j["host"]["cpu_cores"].get<int>());
    // Curve points: log10 of the sizes, efficiencies as written.
    const auto& curve = j["device"]["gemm_efficiency_by_flop"];
    ASSERT_EQ(hw.device.gemm_efficiency.log10_x.size(), curve.size());
    for (std::size_t i = 0; i < curve.size(); ++i) {
      EXPECT_NEAR(hw.device.gemm_efficiency.log10_x[i], std::log10(curve[i][0].get<double>()), 1e-12);
      // A fitted compute term scales the file's curve once, at load (test_fitted_profile.cpp).
      const double fitted = j.contains("fitted") ? j["fitted"].value("compute_efficiency_scale", 1.0) : 1.0;
      EXPECT_DOUBLE_EQ(hw.device.gemm_efficiency.efficiency[i], fitted * curve[i][1].get<double>());
    }
  }
}

// Dotted paths of every figure (numeric leaf, or array such as an efficiency curve) under the
// sections that hold figures.
void collect_figures(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) collect_figures(*it, path + "." + it.key(), out);
  } else if (j.is_array() || j.is_number()) {
    out.push_back(path);
  }
}

TEST(HardwareProfiles, EveryFigureHasASource) {
  for (const auto& n : builtin_hardware_names()) {
    SCOPED_TRACE(n);
    const auto j = read_json_file(profile_path(n));
    ASSERT_TRUE(j.contains("sources")) << n;
    const auto& sources = j["sources"];
    ASSERT_TRUE(sources.is_object());
    std::vector<std::string> figures;
    for (const char* section : {"device", "node", "network", "host", "price", "fitted"})
      if (j.contains(section)) collect_figures(j[section], section, figures);
    // Overlays (a "base" profile) carry only what they change.
    EXPECT_GE(figures.size(), j.contains("base") ? 1u : 20u);
    for (const auto& f : figures) {
      ASSERT_TRUE(sources.contains(f)) << n << ": no entry in \"sources\" for '" << f << "'";
      EXPECT_TRUE(sources[f].is_string() && !sources[f].get<std::string>().empty()) << f;
    }
    // And no stale source: every key in sources names something in the file.
    for (auto it = sources.begin(); it != sources.end(); ++it) {
      const std::string& key = it.key();
      std::string pointer;
      pointer.reserve(key.size() + 1);
      pointer.push_back('/');
      for (char ch : key) pointer.push_back(ch == '.' ? '/' : ch);
      EXPECT_TRUE(j.contains(nlohmann::json::json_pointer(pointer)))
          << n << ": source for '" << key << "' names no field";
    }
  }
}

// ----- overlays ("base") --------------------------------------------------------------------

TEST(HardwareProfiles, P4deInheritsFromP4d) {
  const auto d = load_hardware("p4d.24xlarge");
  const auto de = load_hardware("p4de.24xlarge");
  EXPECT_EQ(de.name, "p4de.24xlarge");
  EXPECT_EQ(de.device.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(de.device.memory_bytes, 81920.0 * 1048576.0);
  EXPECT_EQ(de.device.memory_bytes, 2 * d.device.memory_bytes);
  EXPECT_EQ(de.device.memory_bandwidth_Bps, 2039e9);
  EXPECT_EQ(de.price.usd_per_hour, 27.45);
  // Inherited.
  EXPECT_EQ(de.device.peak_flops, d.device.peak_flops);
  EXPECT_EQ(de.device.gemm_efficiency.efficiency, d.device.gemm_efficiency.efficiency);
  EXPECT_EQ(de.device.runtime_memory.communicator_bytes, d.device.runtime_memory.communicator_bytes);
  EXPECT_EQ(de.network.bandwidth_Bps, d.network.bandwidth_Bps);
  EXPECT_EQ(de.network.latency_s, d.network.latency_s);
  EXPECT_EQ(de.network.efficiency, d.network.efficiency);
  EXPECT_EQ(de.node.devices_per_node, d.node.devices_per_node);
  EXPECT_EQ(de.node.topology, d.node.topology);
  EXPECT_EQ(de.node.intra.bandwidth_Bps, d.node.intra.bandwidth_Bps);
  EXPECT_EQ(de.node.intra.latency_s, d.node.intra.latency_s);
  EXPECT_EQ(de.host.memory_bytes, d.host.memory_bytes);
  EXPECT_EQ(de.host.cpu_cores, d.host.cpu_cores);
}

// The H200 node: the H100's chip with more, faster memory. Everything but the memory, its
// bandwidth, the name and the price is the H100 profile's, the fitted terms included.
TEST(HardwareProfiles, P5eInheritsFromP5) {
  const auto h100 = load_hardware("p5.48xlarge");
  const auto h200 = load_hardware("p5e.48xlarge");
  EXPECT_EQ(h200.device.name, "NVIDIA H200");
  EXPECT_EQ(h200.device.memory_bytes, 143771.0 * 1048576.0);
  EXPECT_EQ(h200.device.memory_bandwidth_Bps, 4800e9);
  EXPECT_NE(h200.price.usd_per_hour, h100.price.usd_per_hour);
  EXPECT_EQ(h200.device.peak_flops, h100.device.peak_flops);
  EXPECT_EQ(h200.device.gemm_efficiency.efficiency,
            h100.device.gemm_efficiency.efficiency);  // fitted scale applied once
  EXPECT_EQ(h200.device.memory_efficiency.efficiency, h100.device.memory_efficiency.efficiency);
  EXPECT_EQ(h200.node.intra.bandwidth_Bps, h100.node.intra.bandwidth_Bps);
  EXPECT_EQ(h200.network.bandwidth_Bps, h100.network.bandwidth_Bps);
}

TEST(HardwareProfiles, OverlayWithOtherUnit) {
  TempDir tmp;
  const std::string path = tmp.write_json("bigger.json", {
                                                             {"schema", "shardplan.hardware/1"},
                                                             {"name", "p4de-bigger"},
                                                             {"base", "p4de.24xlarge"},
                                                             {"device", {{"memory_GB", 100}}},  // base has memory_MiB
                                                             {"network", {{"bandwidth_Gbps", 3200}}},
                                                         });
  HardwareProfile hw;
  ASSERT_NO_THROW(hw = load_hardware(path)) << input_error_of([&] { load_hardware(path); });
  const auto de = load_hardware("p4de.24xlarge");
  EXPECT_EQ(hw.name, "p4de-bigger");
  EXPECT_EQ(hw.source_file, path);
  EXPECT_EQ(hw.device.memory_bytes, 100e9);
  EXPECT_EQ(hw.network.bandwidth_Bps, 3200e9 / 8);
  // Untouched fields come through both levels of the chain.
  EXPECT_EQ(hw.device.name, de.device.name);
  EXPECT_EQ(hw.device.memory_bandwidth_Bps, de.device.memory_bandwidth_Bps);  // from p4de
  EXPECT_EQ(hw.network.latency_s, de.network.latency_s);                      // from p4d
  EXPECT_EQ(hw.network.efficiency, de.network.efficiency);
  EXPECT_EQ(hw.node.intra.bandwidth_Bps, de.node.intra.bandwidth_Bps);
  EXPECT_EQ(hw.host.memory_bytes, de.host.memory_bytes);
  EXPECT_EQ(hw.price.usd_per_hour, de.price.usd_per_hour);
}

TEST(HardwareProfiles, OverlayNullRemovesOptionalField) {
  TempDir tmp;
  const std::string path = tmp.write_json("nolaunch.json", {
                                                               {"name", "p4d-nolaunch"},
                                                               {"base", "p4d.24xlarge"},
                                                               {"device", {{"kernel_launch_us", nullptr}}},
                                                           });
  EXPECT_EQ(load_hardware(path).device.kernel_launch_s, 0.0);
}

TEST(HardwareProfiles, RelativeBasePath) {
  TempDir tmp;
  tmp.write_json("a.json", read_json_file(profile_path("g5.48xlarge")));
  const std::string path =
      tmp.write_json("b.json", {{"name", "g5-fast-net"}, {"base", "./a.json"}, {"network", {{"bandwidth_GBps", 50}}}});
  const auto hw = load_hardware(path);
  EXPECT_EQ(hw.network.bandwidth_Bps, 50e9);
  EXPECT_EQ(hw.device.memory_bytes, 23028.0 * 1048576.0);
}

TEST(HardwareProfiles, CircularBaseChain) {
  TempDir tmp;
  tmp.write_json("a.json", {{"name", "a"}, {"base", "./b.json"}});
  const std::string b = tmp.write_json("b.json", {{"name", "b"}, {"base", "./a.json"}});
  const std::string msg = input_error_of([&] { load_hardware(b); });
  EXPECT_TRUE(contains(msg, "base")) << msg;
  EXPECT_TRUE(contains(msg, "circular")) << msg;

  const std::string self = tmp.write_json("self.json", {{"name", "self"}, {"base", "./self.json"}});
  EXPECT_TRUE(contains(input_error_of([&] { load_hardware(self); }), "circular"));
}

TEST(HardwareProfiles, UnknownBase) {
  TempDir tmp;
  const std::string path = tmp.write_json("x.json", {{"name", "x"}, {"base", "p9.mega"}});
  const std::string msg = input_error_of([&] { load_hardware(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "p9.mega")) << msg;
}

TEST(HardwareProfiles, UnknownBuiltinNameListsBuiltins) {
  const std::string msg = input_error_of([] { load_hardware("p6.huge"); });
  EXPECT_TRUE(contains(msg, "p6.huge")) << msg;
  for (const auto& n : kBuiltins) EXPECT_TRUE(contains(msg, n)) << n << ": " << msg;
}

// ----- errors -------------------------------------------------------------------------------

nlohmann::json p4d_json() { return read_json_file(profile_path("p4d.24xlarge")); }

// Writes `j`, loads it, returns the InputError message (checked to name the file).
std::string load_error(const TempDir& tmp, const std::string& file, const nlohmann::json& j) {
  const std::string path = tmp.write_json(file, j);
  const std::string msg = input_error_of([&] { load_hardware(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  return msg;
}

TEST(HardwareProfiles, ValidTemplateLoads) {
  TempDir tmp;
  EXPECT_NO_THROW(load_hardware(tmp.write_json("ok.json", p4d_json())));
}

// Fitted profiles count as calibrated; the 2026 datasheet profiles say they are not, and why.
TEST(HardwareProfiles, CalibrationStatusAndRule) {
  EXPECT_TRUE(load_hardware("p4d.24xlarge").calibration.calibrated);
  EXPECT_TRUE(load_hardware("p4de.24xlarge").calibration.calibrated);  // inherits p4d's fit
  EXPECT_FALSE(load_hardware("gaudi2-hls2").calibration.calibrated);   // no fitted terms
  for (const char* n :
       {"p5en.48xlarge", "p6-b200.48xlarge", "trn2.48xlarge", "trn2.48xlarge-neuroncore", "gaudi3-hls3"}) {
    const auto hw = load_hardware(n);
    EXPECT_FALSE(hw.calibration.calibrated) << n;
    EXPECT_TRUE(contains(hw.calibration.rule, "published")) << n << ": " << hw.calibration.rule;
    EXPECT_GT(hw.price.usd_per_hour, 0) << n;
    EXPECT_FALSE(hw.price.as_of.empty()) << n;
  }
  // The same chip as p5: its curves and fitted terms, marked uncalibrated all the same.
  EXPECT_EQ(load_hardware("p5en.48xlarge").device.gemm_efficiency.efficiency,
            load_hardware("p5.48xlarge").device.gemm_efficiency.efficiency);

  TempDir tmp;
  auto j = p4d_json();
  j["calibration"] = {{"status", "sort of"}, {"rule", "x"}};
  std::string msg = load_error(tmp, "badstatus.json", j);
  EXPECT_TRUE(contains(msg, "calibration.status")) << msg;
  j["calibration"] = {{"status", "uncalibrated"}, {"rule", ""}};
  msg = load_error(tmp, "norule.json", j);
  EXPECT_TRUE(contains(msg, "calibration.rule")) << msg;
}

TEST(HardwareProfiles, MissingDeviceMemory) {
  TempDir tmp;
  auto j = p4d_json();
  j["device"].erase("memory_MiB");
  const std::string msg = load_error(tmp, "nomem.json", j);
  EXPECT_TRUE(contains(msg, "device.memory")) << msg;
  EXPECT_TRUE(contains(msg, "missing")) << msg;
}

TEST(HardwareProfiles, NegativeBandwidth) {
  TempDir tmp;
  auto j = p4d_json();
  j["network"]["bandwidth_Gbps"] = -400;
  const std::string msg = load_error(tmp, "negbw.json", j);
  EXPECT_TRUE(contains(msg, "network.bandwidth_Gbps")) << msg;
  EXPECT_TRUE(contains(msg, "> 0")) << msg;

  auto k = p4d_json();
  k["device"]["memory_bandwidth_GBps"] = 0;
  const std::string msg2 = load_error(tmp, "zerobw.json", k);
  EXPECT_TRUE(contains(msg2, "device.memory_bandwidth_GBps")) << msg2;
  EXPECT_TRUE(contains(msg2, "> 0")) << msg2;
}

TEST(HardwareProfiles, EfficiencyAboveOne) {
  TempDir tmp;
  auto j = p4d_json();
  j["device"]["gemm_efficiency_by_flop"][3][1] = 1.2;
  const std::string msg = load_error(tmp, "eff.json", j);
  EXPECT_TRUE(contains(msg, "device.gemm_efficiency_by_flop")) << msg;

  auto k = p4d_json();
  k["network"]["efficiency"] = 1.5;
  const std::string msg2 = load_error(tmp, "neteff.json", k);
  EXPECT_TRUE(contains(msg2, "network.efficiency")) << msg2;

  auto u = p4d_json();
  u["device"]["memory_efficiency_by_bytes"][1][0] = 1.0;  // sizes must ascend
  const std::string msg3 = load_error(tmp, "order.json", u);
  EXPECT_TRUE(contains(msg3, "device.memory_efficiency_by_bytes")) << msg3;

  auto s = p4d_json();
  s["node"]["intra_node"]["sync_skew_fraction"] = 1.0;  // a wait as long as the compute: not a skew
  const std::string msg4 = load_error(tmp, "skew.json", s);
  EXPECT_TRUE(contains(msg4, "node.intra_node.sync_skew_fraction")) << msg4;
  EXPECT_TRUE(contains(msg4, "[0, 1)")) << msg4;

  auto g = p4d_json();
  g["node"]["intra_node"]["rank_speed_gap_fraction"] = 0.1;  // a gap needs the ranks it spans
  const std::string msg5 = load_error(tmp, "gap.json", g);
  EXPECT_TRUE(contains(msg5, "node.intra_node.rank_speed_gap_ranks")) << msg5;
}

TEST(HardwareProfiles, TwoUnitVariantsOfOneQuantity) {
  TempDir tmp;
  auto j = p4d_json();
  j["device"]["memory_GiB"] = 40;  // memory_MiB is there too
  const std::string msg = load_error(tmp, "twounits.json", j);
  EXPECT_TRUE(contains(msg, "device.memory_")) << msg;
  EXPECT_TRUE(contains(msg, "only one unit variant")) << msg;

  auto k = p4d_json();
  k["network"]["latency_ms"] = 0.02;
  const std::string msg2 = load_error(tmp, "twolat.json", k);
  EXPECT_TRUE(contains(msg2, "network.latency_")) << msg2;
}

// In a file with "base", two unit variants of one quantity must still be an error (the overlay
// would otherwise let one silently erase the other).
TEST(HardwareProfiles, TwoUnitVariantsInOverlayFile) {
  TempDir tmp;
  const std::string msg =
      load_error(tmp, "overlay_twounits.json",
                 {{"name", "x"}, {"base", "p4d.24xlarge"}, {"device", {{"memory_GB", 100}, {"memory_MiB", 1024}}}});
  EXPECT_TRUE(contains(msg, "only one unit variant")) << msg;
}

TEST(HardwareProfiles, UnknownTopology) {
  TempDir tmp;
  auto j = p4d_json();
  j["node"]["intra_node"]["topology"] = "hypercube";
  const std::string msg = load_error(tmp, "topo.json", j);
  EXPECT_TRUE(contains(msg, "node.intra_node.topology")) << msg;
}

TEST(HardwareProfiles, WrongTypeAndInvalidJson) {
  TempDir tmp;
  auto j = p4d_json();
  j["host"]["cpu_cores"] = "many";
  const std::string msg = load_error(tmp, "cores.json", j);
  EXPECT_TRUE(contains(msg, "host.cpu_cores")) << msg;

  const std::string bad = (tmp.path() / "broken.json").string();
  std::ofstream(bad) << "{\n  \"name\": \"x\",\n  \"device\": {\n}\n,,\n";
  const std::string msg2 = input_error_of([&] { load_hardware(bad); });
  EXPECT_TRUE(contains(msg2, bad)) << msg2;
  EXPECT_TRUE(contains(msg2, "line")) << msg2;
}

// ----- EfficiencyCurve ------------------------------------------------------------------------

TEST(EfficiencyCurve, LinearInLog10AndClamped) {
  EfficiencyCurve c;
  c.log10_x = {3.0, 6.0, 9.0};
  c.efficiency = {0.1, 0.4, 0.7};
  // At the points.
  EXPECT_NEAR(c.at(1e3), 0.1, 1e-12);
  EXPECT_NEAR(c.at(1e6), 0.4, 1e-12);
  EXPECT_NEAR(c.at(1e9), 0.7, 1e-12);
  // Linear in log10(x), not in x: 1e4 is a third of the way from 1e3 to 1e6.
  EXPECT_NEAR(c.at(1e4), 0.2, 1e-12);
  EXPECT_NEAR(c.at(1e5), 0.3, 1e-12);
  EXPECT_NEAR(c.at(std::pow(10.0, 7.5)), 0.55, 1e-12);
  EXPECT_NEAR(c.at(2e6), 0.4 + 0.1 * std::log10(2.0), 1e-12);
  // Clamped at both ends.
  EXPECT_EQ(c.at(999.0), 0.1);
  EXPECT_EQ(c.at(1.0), 0.1);
  EXPECT_EQ(c.at(0.0), 0.1);
  EXPECT_EQ(c.at(1e10), 0.7);
  EXPECT_EQ(c.at(1e300), 0.7);
  // Monotone between the points of a rising curve.
  double prev = 0;
  for (double lx = 2.0; lx <= 10.0; lx += 0.125) {
    const double e = c.at(std::pow(10.0, lx));
    EXPECT_GE(e, prev - 1e-15) << lx;
    prev = e;
  }
}

TEST(EfficiencyCurve, SinglePointAndEmpty) {
  EfficiencyCurve one;
  one.log10_x = {6.0};
  one.efficiency = {0.5};
  EXPECT_EQ(one.at(1.0), 0.5);
  EXPECT_EQ(one.at(1e6), 0.5);
  EXPECT_EQ(one.at(1e12), 0.5);
  EXPECT_EQ(EfficiencyCurve{}.at(123.0), 1.0);
}

// ----- write_file_atomically ------------------------------------------------------------------

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> dir_entries(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WriteFileAtomically, WritesContentAndLeavesNoTempFile) {
  TempDir tmp;
  const fs::path target = tmp.path() / "measured.json";
  const std::string text = "{\n  \"name\": \"measured\"\n}\n";
  write_file_atomically(target.string(), text);
  EXPECT_EQ(slurp(target), text);
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"measured.json"});

  // Replacing an existing file: new content, still nothing else in the directory.
  const std::string big(1 << 20, 'x');
  write_file_atomically(target.string(), big);
  EXPECT_EQ(slurp(target), big);
  write_file_atomically(target.string(), "");
  EXPECT_EQ(slurp(target), "");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"measured.json"});
}

TEST(WriteFileAtomically, MissingDirectoryIsInputError) {
  TempDir tmp;
  const std::string target = (tmp.path() / "no" / "such" / "dir" / "x.json").string();
  const std::string msg = input_error_of([&] { write_file_atomically(target, "x"); });
  EXPECT_TRUE(contains(msg, target)) << msg;
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{});
}

}  // namespace hardware_profiles_test
}  // namespace shardplan::simulator

namespace shardplan::simulator {
namespace hardware_profiles_test {  // named, not anonymous: the files share a unity-build unit

// Measured profiles may carry a GEMM curve per precision; the cost model uses it for that
// precision and falls back to gemm_efficiency_by_flop for the others.
TEST(HardwareProfiles, PerPrecisionGemmCurve) {
  TempDir tmp;
  auto j = p4d_json();
  j.erase("fitted");  // the curve exactly as written
  j["sources"].erase("fitted.compute_efficiency_scale");
  j["device"]["gemm_efficiency_by_precision"] = {{"bf16", {{1e6, 0.1}, {1e12, 0.2}}}};
  const HardwareProfile hw = load_hardware(tmp.write_json("prec.json", j));
  EXPECT_DOUBLE_EQ(hw.device.gemm_curve(Precision::bf16).at(1e6), 0.1);
  EXPECT_DOUBLE_EQ(hw.device.gemm_curve(Precision::fp32).at(1e6), hw.device.gemm_efficiency.at(1e6));
  // Round trip through the resolved JSON keeps it.
  const HardwareProfile back = hardware_from_json(to_json(hw), "resolved");
  EXPECT_EQ(back.device.gemm_curve(Precision::bf16).efficiency, hw.device.gemm_curve(Precision::bf16).efficiency);
  EXPECT_TRUE(back.device.gemm_efficiency_by_precision[static_cast<int>(Precision::fp16)].log10_x.empty());

  auto bad = p4d_json();
  bad["device"]["gemm_efficiency_by_precision"] = {{"int8", {{1e6, 0.1}}}};
  const std::string msg = load_error(tmp, "badprec.json", bad);
  EXPECT_TRUE(contains(msg, "device.gemm_efficiency_by_precision.int8")) << msg;
  EXPECT_TRUE(contains(msg, "fp32, fp16 or bf16")) << msg;
}

}  // namespace hardware_profiles_test
}  // namespace shardplan::simulator
