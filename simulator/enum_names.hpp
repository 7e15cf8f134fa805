#pragma once
// One name table per enum. Each enum's names are written once, in a specialisation of EnumNames
// beside the enum; to_string, the *_from_string look-ups, the command-line parsers, the JSON
// readers and their error messages all read that table.
//
//   template <> struct EnumNames<Recompute> {
//     static constexpr NameTable<Recompute, 3> table{{{Recompute::none, "none"}, ...}};
//   };
//
// The table's order is the order names are listed in messages ("none, selective or full").
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardplan::simulator {

template <typename E, std::size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

template <typename E>
struct EnumNames;  // specialised beside each named enum

// The value's name (a literal: null-terminated), or "?" for a value outside the table.
template <typename E>
constexpr const char* name_of(E e) {
  for (const auto& [value, name] : EnumNames<E>::table)
    if (value == e) return name.data();
  return "?";
}

template <typename E>
constexpr std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& [value, n] : EnumNames<E>::table)
    if (n == name) return value;
  return std::nullopt;
}

// The names, in the table's order (command-line choices, GUI combo boxes).
template <typename E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (const auto& entry : EnumNames<E>::table) out.emplace_back(entry.second);
  return out;
}

// The names joined for a message: "a, b or c" (`last` between the last two, `sep` between the
// others).
template <typename E>
std::string enum_names_list(std::string_view last = " or ", std::string_view sep = ", ") {
  const auto& t = EnumNames<E>::table;
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i > 0) out += i + 1 == t.size() ? std::string(last) : std::string(sep);
    out += t[i].second;
  }
  return out;
}

// "--flag: expected a, b or c, got 'x'": the one wording of a name that is not in the table.
template <typename E>
std::string bad_name_message(std::string_view flag, std::string_view got) {
  return std::string(flag) + ": expected " + enum_names_list<E>() + ", got '" + std::string(got) + "'";
}

}  // namespace shardplan::simulator
