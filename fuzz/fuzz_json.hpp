#pragma once
// Shared by the fuzz targets of the JSON readers: the input is parsed as the readers parse a file
// (simulator::parse_json_text: comments allowed, bad syntax or a number beyond double is an
// InputError), handed to one reader, and a user-facing InputError is the expected end of bad input.
// Anything else that escapes (a json::exception, std::out_of_range, a crash, a sanitizer report,
// a hang) is a finding: bad input must get a one-line error naming the file and the field.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::fuzz {

template <class Reader>
int run_json_reader(const uint8_t* data, size_t size, Reader&& read) {
  try {
    const nlohmann::json j =
        simulator::parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input.json");
    read(j);
  } catch (const simulator::InputError&) {}
  return 0;
}

}  // namespace shardplan::fuzz
