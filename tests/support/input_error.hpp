#pragma once
// Shared by the simulator tests: the message of the InputError a call throws, the paths of the
// built-in cards and the Hugging Face fixtures, and the one line validate_config refuses with.
#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "simulator/errors.hpp"
#include "simulator/parallel_config.hpp"
#include "simulator/paths.hpp"

namespace shardplan::testing {

// Message of the InputError `f` throws ("" and a test failure when it throws nothing or another).
template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const simulator::InputError& e) { return e.what(); } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return {};
}

// validate_config's refusal of `cfg` ("" when it is valid).
inline std::string refusal(const simulator::ModelSpec& m, const simulator::ClusterSpec& c,
                           simulator::ParallelConfig cfg) {
  try {
    simulator::validate_config(m, c, cfg);
  } catch (const simulator::InputError& e) { return e.what(); }
  return "";
}

inline std::string card_path(const std::string& name) { return simulator::data_dir() + "/models/" + name + ".json"; }

#ifdef SHARDPLAN_TEST_DATA_DIR
inline std::string hf_path(const std::string& stem) {
  return std::string(SHARDPLAN_TEST_DATA_DIR) + "/hf/" + stem + ".config.json";
}
#endif

}  // namespace shardplan::testing
