// device.op_costs in a hardware profile: read (seconds per element by size, interpolated in log
// size, clamped at the ends), written back unchanged, and bad entries refused with one line
// naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "simulator/errors.hpp"
#include "simulator/hardware_profile.hpp"

namespace shardplan::simulator {
namespace op_costs_test {  // named, not anonymous: the files share a unity-build unit

nlohmann::json with_op_costs(const nlohmann::json& costs) {
  nlohmann::json j = to_json(load_hardware("local-cpu-2core"));
  j["device"]["op_costs"] = costs;
  return j;
}

std::string error_of(const nlohmann::json& j) {
  try {
    (void)hardware_from_json(j, "measured.json");
  } catch (const InputError& e) { return e.what(); }
  return "";
}

TEST(OpCosts, CurvesLoadInterpolateAndRoundTrip) {
  const HardwareProfile hw = hardware_from_json(
      with_op_costs({{"gelu_tanh",
                      {{"bf16",
                        {{"forward_seconds_per_element_by_elements", {{1e4, 4e-9}, {1e6, 6e-9}}},
                         {"backward_seconds_per_element_by_elements", {{1e4, 8e-9}}}}}}},
                     {"adamw", {{"fp32", {{"forward_seconds_per_element_by_elements", {{1e6, 2e-9}}}}}}}}),
      "measured.json");
  const OpCost* g = hw.device.op_cost(Precision::bf16, OpKind::gelu_tanh);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(hw.device.op_cost(Precision::fp32, OpKind::gelu_tanh), nullptr);  // not measured in fp32
  EXPECT_NEAR(g->forward_s(1e5), 1e5 * 5e-9, 1e-15);                          // halfway in log size
  EXPECT_NEAR(g->forward_s(1e3), 1e3 * 4e-9, 1e-15);                          // clamped
  EXPECT_NEAR(g->backward_s(1e8), 1e8 * 8e-9, 1e-12);
  const OpCost* a = hw.device.op_cost(Precision::fp32, OpKind::adamw);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->backward_s(1e6), 0.0);  // forward only
  const HardwareProfile again = hardware_from_json(to_json(hw), "again.json");
  EXPECT_DOUBLE_EQ(again.device.op_cost(Precision::bf16, OpKind::gelu_tanh)->forward_s(1e5), g->forward_s(1e5));
  EXPECT_DOUBLE_EQ(again.device.op_cost(Precision::fp32, OpKind::adamw)->forward_s(3e6), a->forward_s(3e6));
  // A datasheet profile has none.
  EXPECT_EQ(load_hardware("p4d.24xlarge").device.op_cost(Precision::bf16, OpKind::dropout), nullptr);
}

TEST(OpCosts, BadEntriesNameTheField) {
  const nlohmann::json curve = {{1e4, 4e-9}};
  EXPECT_NE(
      error_of(with_op_costs({{"flash_attention", {{"bf16", {{"forward_seconds_per_element_by_elements", curve}}}}}}))
          .find("flash_attention"),
      std::string::npos);
  EXPECT_NE(error_of(with_op_costs({{"dropout", {{"int8", {{"forward_seconds_per_element_by_elements", curve}}}}}}))
                .find("int8"),
            std::string::npos);
  const std::string missing = error_of(with_op_costs({{"dropout", {{"bf16", nlohmann::json::object()}}}}));
  EXPECT_NE(missing.find("forward_seconds_per_element_by_elements"), std::string::npos) << missing;
  const std::string negative =
      error_of(with_op_costs({{"dropout", {{"bf16", {{"forward_seconds_per_element_by_elements", {{1e4, -1.0}}}}}}}}));
  EXPECT_NE(negative.find("positive"), std::string::npos) << negative;
  const std::string unordered = error_of(with_op_costs(
      {{"dropout", {{"bf16", {{"forward_seconds_per_element_by_elements", {{1e6, 1e-9}, {1e4, 1e-9}}}}}}}}));
  EXPECT_NE(unordered.find("ascending"), std::string::npos) << unordered;
  EXPECT_EQ(error_of(with_op_costs({{"dropout", {{"bf16", {{"forward_seconds_per_element_by_elements", curve}}}}}})),
            "");
}

}  // namespace op_costs_test
}  // namespace shardplan::simulator
