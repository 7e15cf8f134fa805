#pragma once
// Shared by the fuzz targets of the JSON readers: the input is parsed as JSON (not JSON: nothing
// to do), handed to one reader, and a user-facing InputError is the expected end of bad input.
// Anything else that escapes (a json::exception, std::out_of_range, a crash, a sanitizer report,
// a hang) is a finding: bad input must get a one-line error naming the file and the field.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "simulator/errors.hpp"

namespace shardplan::fuzz {

template <class Reader>
int run_json_reader(const uint8_t* data, size_t size, Reader&& read) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    read(j);
  } catch (const simulator::InputError&) {
  }
  return 0;
}

}  // namespace shardplan::fuzz
