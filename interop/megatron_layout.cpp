// Megatron-Core's pipeline layout strings. Line numbers: megatron/core/transformer/
// pipeline_parallel_layer_layout.py at NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553.
#include "megatron_layout.hpp"

#include <algorithm>

#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;

namespace {

// Unrolled layouts past this are refused (a "t*999999999" would otherwise fill memory).
constexpr std::size_t kMaxUnrolled = std::size_t{1} << 20;

// `text` for a one-line message: control characters as '?', at most 120 characters.
std::string shown(std::string_view text) {
  std::string out(text.substr(0, 120));
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return text.size() > 120 ? out + "..." : out;
}

struct Reader {
  std::string_view flag, layout;
  [[noreturn]] void fail(const std::string& what) const {
    throw sim::InputError(std::string(flag) + ": expected " + what + ", got '" + shown(layout) + "'");
  }
};

bool digit(char c) { return c >= '0' && c <= '9'; }

// The repeat count at s[i...] (Python's int() of \d+), capped at kMaxUnrolled + 1; `end` past it.
// False when no digit is there.
bool count_at(std::string_view s, std::size_t i, std::size_t& n, std::size_t& end) {
  end = i;
  n = 0;
  while (end < s.size() && digit(s[end]))
    n = std::min(kMaxUnrolled + 1, n * 10 + static_cast<std::size_t>(s[end++] - '0'));
  return end > i;
}

void append_copies(std::string& out, std::string_view body, std::size_t n, const Reader& r) {
  if (n > 0 && (out.size() > kMaxUnrolled || body.size() > (kMaxUnrolled - out.size()) / n))
    r.fail("a layout of at most " + std::to_string(kMaxUnrolled) + " layers and separators once unrolled");
  for (std::size_t k = 0; k < n; ++k) out += body;
}

// One re.sub pass of r'\(([^)]+)\)\*(\d+)' (:297, :300-301): "(body)*n" becomes n bodies; no nesting.
std::string unroll_groups(std::string_view s, const Reader& r) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t close = s[i] == '(' ? s.find(')', i + 1) : std::string_view::npos;
    std::size_t n = 0, end = 0;
    if (close != std::string_view::npos && close > i + 1 && close + 1 < s.size() && s[close + 1] == '*' &&
        count_at(s, close + 2, n, end)) {
      append_copies(out, s.substr(i + 1, close - i - 1), n, r);
      i = end;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// One re.sub pass of r'(.)\*(\d+)' (:298): "x*n" becomes n x's ('.' is any character but newline).
std::string unroll_characters(std::string_view s, const Reader& r) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t n = 0, end = 0;
    if (s[i] != '\n' && i + 1 < s.size() && s[i + 1] == '*' && count_at(s, i + 2, n, end)) {
      append_copies(out, s.substr(i, 1), n, r);
      i = end;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// The chunks of the unrolled string, split at '|' (:312), each checked against E, L, t, m (:303-318).
std::vector<std::string> chunks_of(const std::string& unrolled, const Reader& r) {
  std::vector<std::string> chunks(1);
  for (const char ch : unrolled) {
    if (ch == '|') {
      chunks.emplace_back();
    } else if (ch == 'E' || ch == 'L' || ch == 't' || ch == 'm') {
      chunks.back() += ch;
    } else {
      r.fail("the layer characters E, t, L and m, '|' between chunks, \"(...)*n\" and \"x*n\" repeats, found '" +
             shown(std::string(1, ch)) + "'");
    }
  }
  return chunks;
}

}  // namespace

std::vector<int> parse_megatron_layout(std::string_view layout, int pp, long long num_layers, std::string_view flag) {
  const Reader r{flag, layout};
  std::string s(layout);
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());  // cosmetic commas (:288)
  const std::vector<std::string> chunks = chunks_of(unroll_characters(unroll_groups(s, r), r), r);
  if (pp < 1 || chunks.size() % static_cast<std::size_t>(pp) != 0)  // :41-46
    r.fail("a multiple of the pipeline size (" + std::to_string(pp) + ") of '|'-separated chunks, " +
           std::to_string(chunks.size()) + " in all");
  std::string flat;
  for (const auto& c : chunks) flat += c;
  // validate_layer_layout (:94-106): the embedding first and the loss last, once each.
  if (flat.empty() || flat.front() != 'E' || std::count(flat.begin(), flat.end(), 'E') != 1)
    r.fail("the embedding E once, as the first layer");
  if (flat.back() != 'L' || std::count(flat.begin(), flat.end(), 'L') != 1)
    r.fail("the loss L once, as the last layer");
  if (flat.find('m') != std::string::npos) r.fail("no MTP layers (m): shardplan does not model multi-token prediction");
  // Megatron builds the embedding on the first chunk and the output layer on the last, wherever E
  // and L stand (pre_process / post_process, megatron/training/training.py:2382-2415): an empty
  // chunk before E or after L would hold them with no letter saying so.
  if (chunks.front().empty() || chunks.back().empty())
    r.fail("E in the first chunk and L in the last (no empty chunk before E or after L)");
  std::vector<int> blocks;
  long long total = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const auto t = std::count(chunks[i].begin(), chunks[i].end(), 't');
    if (t == 0 && i != 0 && i + 1 != chunks.size())
      r.fail("a transformer block (t) in every chunk but an embedding-only first and a head-only last; chunk " +
             std::to_string(i) + " is empty");
    blocks.push_back(static_cast<int>(t));
    total += t;
  }
  if (num_layers > 0 && total != num_layers)  // :107-110
    r.fail(std::to_string(num_layers) + " transformer blocks (--num-layers), " + std::to_string(total) +
           " in the layout");
  return blocks;
}

std::string megatron_layout(const std::vector<int>& chunks) {
  const std::size_t n = chunks.size();
  const auto body = [&](std::size_t i) {
    std::string b = i == 0 ? "E" : "";
    if (chunks[i] == 1) b += "t";
    if (chunks[i] > 1) b += "t*" + std::to_string(chunks[i]);
    if (i + 1 == n) b += "L";
    return b;
  };
  std::string out;
  for (std::size_t i = 0; i < n;) {
    const std::string b = body(i);
    if (i + 1 == n) {
      out += b;
      break;
    }
    std::size_t j = i + 1;  // chunks [i, j) equal, each followed by a separator
    while (j + 1 < n && body(j) == b) ++j;
    out += j - i > 1 ? "(" + b + "|)*" + std::to_string(j - i) + "," : b + "|";
    i = j;
  }
  return out;
}

}  // namespace shardplan::interop
