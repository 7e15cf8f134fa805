// Shell words and argparse-style flags of other stacks' command lines.
#include "command_args.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;

namespace {

bool is_flag(const std::string& w) { return w.size() > 2 && w[0] == '-' && w[1] == '-'; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<std::string> shell_words(std::string_view text, const std::string& source) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  std::size_t i = 0;
  const auto end_word = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] != '\n') {
        word.push_back(text[i + 1]);
        in_word = true;
      }
      i += 2;
    } else if (c == '\'' || c == '"') {
      const std::size_t close = text.find(c, i + 1);
      if (close == std::string_view::npos)
        throw sim::InputError(source + ": unterminated " + std::string(c == '\'' ? "single" : "double") + " quote");
      for (std::size_t k = i + 1; k < close; ++k) {
        if (c == '"' && text[k] == '\\' && k + 1 < close && (text[k + 1] == '"' || text[k + 1] == '\\')) ++k;
        word.push_back(text[k]);
      }
      in_word = true;
      i = close + 1;
    } else if (c == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == ';') {
      end_word();
      ++i;
    } else {
      word.push_back(c);
      in_word = true;
      ++i;
    }
  }
  end_word();
  return words;
}

// Lines with backslash-newline continuations joined ('\r' dropped).
std::vector<std::string> logical_lines(std::string_view text) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') continue;
    const std::size_t next = text.find_first_not_of('\r', i + 1);
    if (text[i] == '\\' && next != std::string_view::npos && text[next] == '\n') i = next;
    else if (text[i] == '\n') out.emplace_back();
    else out.back().push_back(text[i]);
  }
  return out;
}

CommandArgs::CommandArgs(std::vector<std::string> words, std::string source) : source_(std::move(source)) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!is_flag(w)) {
      positional_.push_back(w);
      continue;
    }
    Flag f;
    const std::size_t eq = w.find('=');
    if (eq != std::string::npos) {
      f.name = w.substr(0, eq);
      f.value = w.substr(eq + 1);
    } else {
      f.name = w;
      if (i + 1 < words.size() && !is_flag(words[i + 1])) f.value = words[++i];
    }
    flags_.push_back(std::move(f));
  }
}

const CommandArgs::Flag* CommandArgs::find(std::string_view flag) const {
  const Flag* found = nullptr;
  for (const auto& f : flags_)
    if (f.name == flag) {
      f.read = true;
      found = &f;
    }
  return found;
}

bool CommandArgs::has(std::string_view flag) const { return find(flag) != nullptr; }

std::optional<std::string> CommandArgs::value(std::string_view flag) const {
  const Flag* f = find(flag);
  if (!f) return std::nullopt;
  if (!f->value) throw sim::InputError(source_ + ": " + std::string(flag) + ": expected a value after the flag");
  return f->value;
}

std::optional<long long> CommandArgs::integer(std::string_view flag, long long min) const {
  const auto v = value(flag);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE || n < min)
    throw sim::InputError(source_ + ": " + std::string(flag) + ": expected an integer >= " + std::to_string(min) +
                          ", got '" + *v + "'");
  return n;
}

std::optional<double> CommandArgs::number(std::string_view flag) const {
  const auto v = value(flag);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x))
    throw sim::InputError(source_ + ": " + std::string(flag) + ": expected a number, got '" + *v + "'");
  return x;
}

std::optional<bool> CommandArgs::boolean(std::string_view flag) const {
  const Flag* f = find(flag);
  if (!f) return std::nullopt;
  if (!f->value) return true;
  const std::string v = lower(*f->value);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw sim::InputError(source_ + ": " + std::string(flag) + ": expected true or false, got '" + *f->value + "'");
}

std::vector<std::string> CommandArgs::unread_flags() const {
  std::vector<std::string> out;
  for (const auto& f : flags_)
    if (!f.read && std::find(out.begin(), out.end(), f.name) == out.end()) out.push_back(f.name);
  return out;
}

}  // namespace shardplan::interop
