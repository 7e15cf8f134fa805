// `shardplan models` and `shardplan hardware`: what is built in.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/hardware_profile.hpp"
#include "simulator/model_spec.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;

namespace {

// "12.9B", "3.35B", "2.33M": three significant digits, for the active count of MoE cards.
std::string short_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.3gB", n / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, "%.3gM", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

}  // namespace

Run add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("models", "List the built-in model cards");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  return [json]() {
    nlohmann::json out = nlohmann::json::array();
    if (!*json)
      std::printf("%-14s %-9s %6s %7s %6s %4s %7s %7s %16s\n", "name", "family", "layers", "hidden", "heads", "kv",
                  "ffn", "vocab", "parameters");
    for (const auto& name : sim::builtin_model_names()) {
      const sim::ModelSpec m = sim::load_model(name);
      const auto c = sim::count_parameters(m);
      if (*json) {
        out.push_back({{"name", name},
                       {"family", m.family},
                       {"num_layers", m.num_layers},
                       {"hidden_size", m.hidden},
                       {"num_attention_heads", m.num_heads},
                       {"num_key_value_heads", m.num_kv_heads},
                       {"ffn_hidden_size", m.ffn_hidden},
                       {"vocab_size", m.vocab_size},
                       {"parameters", c.total}});
        if (m.is_moe()) out.back()["active_parameters"] = c.active;  // dense cards: unchanged
      } else {
        const std::string active = m.is_moe() ? " (" + short_count(c.active) + " active)" : "";
        std::printf("%-14s %-9s %6lld %7lld %6lld %4lld %7lld %7lld %16lld%s\n", name.c_str(), m.family.c_str(),
                    (long long)m.num_layers, (long long)m.hidden, (long long)m.num_heads, (long long)m.num_kv_heads,
                    (long long)m.ffn_hidden, (long long)m.vocab_size, (long long)c.total, active.c_str());
      }
    }
    if (*json) std::cout << out.dump(2) << "\n";
    return 0;
  };
}

Run add_hardware_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("hardware", "List the built-in hardware profiles");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  return [json]() {
    nlohmann::json out = nlohmann::json::array();
    if (!*json)
      std::printf("%-15s %-24s %3s %10s %9s %8s %8s %-10s %9s %8s  %s\n", "name", "device", "n", "memory", "HBM GB/s",
                  "bf16 TF", "link GB/s", "topology", "net Gb/s", "USD/h", "terms");
    for (const auto& name : sim::builtin_hardware_names()) {
      const sim::HardwareProfile hw = sim::load_hardware(name);
      const double bf16 = hw.device.peak(sim::Precision::bf16) / 1e12;
      if (*json) {
        out.push_back(
            {{"name", name},
             {"device", hw.device.name},
             {"devices_per_node", hw.node.devices_per_node},
             {"memory_bytes", hw.device.memory_bytes},
             {"memory_bandwidth_GBps", hw.device.memory_bandwidth_Bps / 1e9},
             {"peak_bf16_TFLOPs", bf16},
             {"intra_node_bandwidth_GBps", hw.node.intra.bandwidth_Bps / 1e9},
             {"topology", sim::to_string(hw.node.topology)},
             {"network_bandwidth_Gbps", hw.network.bandwidth_Bps * 8 / 1e9},
             {"price_usd_per_hour", hw.price.usd_per_hour},
             {"price_as_of", hw.price.as_of},
             {"calibration",
              {{"status", hw.calibration.calibrated ? "calibrated" : "uncalibrated"}, {"rule", hw.calibration.rule}}}});
      } else {
        std::printf("%-15s %-24.24s %3d %10s %9.0f %8.1f %9.1f %-10s %9.0f %8.2f  %s\n", name.c_str(),
                    hw.device.name.c_str(), hw.node.devices_per_node, sim::format_bytes(hw.device.memory_bytes).c_str(),
                    hw.device.memory_bandwidth_Bps / 1e9, bf16, hw.node.intra.bandwidth_Bps / 1e9,
                    sim::to_string(hw.node.topology), hw.network.bandwidth_Bps * 8 / 1e9, hw.price.usd_per_hour,
                    hw.calibration.calibrated ? "fitted" : "uncalibrated");
      }
    }
    if (*json) std::cout << out.dump(2) << "\n";
    return 0;
  };
}

}  // namespace shardplan::cli
