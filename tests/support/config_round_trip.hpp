#pragma once
// Shared by the simulator tests: one enum field of ParallelConfig through plan.json's `config`:
// a non-default value survives the round trip, a plan written before the key existed reads the
// default, and an unknown value is refused with an error naming the key.
#include <gtest/gtest.h>

#include <string>

#include "simulator/prediction_json.hpp"
#include "support/input_error.hpp"

namespace shardplan::testing {

template <typename T>
void expect_config_field_round_trip(const char* key, T simulator::ParallelConfig::*field, T value, T fallback,
                                    const char* unknown) {
  using simulator::config_from_json;
  simulator::ParallelConfig cfg;
  cfg.*field = value;
  EXPECT_EQ(config_from_json(simulator::to_json(cfg), "plan.json").*field, value) << key;
  nlohmann::json old = simulator::to_json(simulator::ParallelConfig{});
  old.erase(key);
  EXPECT_EQ(config_from_json(old, "old plan.json").*field, fallback) << key;
  nlohmann::json bad = simulator::to_json(cfg);
  bad[key] = unknown;
  const std::string why = input_error_of([&] { (void)config_from_json(bad, "plan.json"); });
  EXPECT_NE(why.find(key), std::string::npos) << why;
}

}  // namespace shardplan::testing
