// ParallelConfig from a NeuronX Distributed launch: the torchrun line of the NxD Llama examples
// (tp_zero1_llama_hf_pretrain.py or run_llama_nxd.py; names and sources in neuron_flags.hpp), as
// a bare command line, the script neuron_command_line writes, or the shipped launchers
// themselves (tp_zero1_llama2_7B_hf_pretrain.sh, run_llama2_70B_tp_pp.sh), which pass every value
// through shell variables: TP_DEGREE=8, `: ${GBS:=1024}`, BS=$(($GBS / $DP)), EXTRA_ARGS+=" --use_zero_1"
// under `if [ $USE_ZERO_1 -gt 0 ]`. Those are resolved by a small reading of the script: plain
// and `: ${V:=x}` assignments, `+=`, $((...)) arithmetic, and if/elif/else branches whose tests can
// be decided (unset environment variables are empty; undecidable branches are skipped). DP, the
// launchers' data-parallel degree, is the one the import's cluster gives.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <regex>

#include "command_args.hpp"
#include "config_import_detail.hpp"
#include "neuron.hpp"
#include "neuron_flags.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace nf = neuron_flags;

namespace {

using Overrides = std::map<std::string, std::string>;
enum class Tri { yes, no, unknown };

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::optional<long long> to_int(const std::string& s) {
  const std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  std::size_t i = t[0] == '-' ? 1 : 0;
  if (i == t.size()) return std::nullopt;
  for (std::size_t k = i; k < t.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(t[k]))) return std::nullopt;
  try {
    return std::stoll(t);
  } catch (const std::exception&) { return std::nullopt; }
}

// Shell variables of a launch script, read as described at the top of the file.
class ShellVars {
 public:
  explicit ShellVars(const std::vector<std::string>& lines) {
    for (const auto& l : lines) read_line(trim(l));
  }
  // The value of `s` with $NAME, ${NAME}, ${NAME-x}, ${NAME:-x} and $((...)) expanded; nullopt when
  // something in it cannot be known from the script (environment, command substitution).
  std::optional<std::string> expand(std::string_view s, const Overrides& o, int depth = 0) const;
  [[nodiscard]] bool assigned(const std::string& name) const { return raw_.count(name) > 0; }
  [[nodiscard]] std::optional<std::string> get(const std::string& name, const Overrides& o, int depth = 0) const {
    if (auto it = o.find(name); it != o.end()) return it->second;
    auto it = raw_.find(name);
    if (it == raw_.end() || !it->second || depth > 32) return std::nullopt;
    return expand(*it->second, o, depth + 1);
  }

 private:
  struct Frame {
    bool outer = true, active = true, taken = false, unknown = false;
  };
  std::map<std::string, std::optional<std::string>> raw_;  // nullopt: assigned something unknowable
  std::vector<Frame> frames_;

  [[nodiscard]] bool active() const { return frames_.empty() || frames_.back().active; }
  void read_line(const std::string& line);
  void branch(const std::string& line);
  Tri condition(const std::string& text) const;
  Tri test(const std::string& text) const;
  std::optional<long long> arithmetic(std::string_view expr, const Overrides& o, int depth) const;
};

std::optional<std::string> assignment_value(const std::string& v) {
  if (starts_with(v, "$((")) {
    int depth = 0;
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (v[i] == '(') ++depth;
      if (v[i] == ')' && --depth == 0) return v.substr(0, i + 1);
    }
    return std::nullopt;
  }
  if (v.empty()) return std::string();
  if (starts_with(v, "$(") || v[0] == '`' || v[0] == '(') return std::nullopt;
  try {
    const auto words = shell_words(v, "");
    return words.empty() ? std::string() : words.front();
  } catch (const sim::InputError&) { return std::nullopt; }
}

void ShellVars::read_line(const std::string& line) {
  if (line.empty() || line[0] == '#') return;
  static const std::regex kBranch(R"(^(if|elif|else|fi)(\s.*|;.*)?$)");
  if (std::regex_match(line, kBranch)) return branch(line);
  if (!active()) return;
  static const std::regex kAssign(R"(^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$)");
  static const std::regex kDefault(R"(^:\s+"?\$\{([A-Za-z_][A-Za-z0-9_]*):?=([^}]*)\}"?\s*$)");
  std::smatch m;
  if (std::regex_match(line, m, kAssign)) {
    const std::string name = m[1].str();
    const auto value = assignment_value(m[3].str());
    const auto it = raw_.find(name);
    if (m[2].length() > 0 && it != raw_.end())  // +=
      it->second = it->second && value ? std::optional<std::string>(*it->second + *value) : std::nullopt;
    else raw_[name] = value;
  } else if (std::regex_match(line, m, kDefault) && !assigned(m[1].str())) {
    raw_[m[1].str()] = m[2].str();
  }
}

void ShellVars::branch(const std::string& line) {
  const auto cond = [&](std::size_t skip) {
    std::string c = line.substr(skip);
    if (const auto t = c.rfind("then"); t != std::string::npos && trim(c.substr(t)) == "then") c = c.substr(0, t);
    c = trim(c);
    if (!c.empty() && c.back() == ';') c.pop_back();
    return condition(c);
  };
  if (starts_with(line, "if")) {
    if (line.find("; fi") != std::string::npos || line.find(";fi") != std::string::npos) return;  // one-liner
    Frame f;
    f.outer = active();
    const Tri t = cond(2);
    f.active = f.outer && t == Tri::yes;
    f.taken = t == Tri::yes;
    f.unknown = t == Tri::unknown;
    frames_.push_back(f);
  } else if (frames_.empty()) {
    return;  // elif/else/fi without if: not ours to judge
  } else if (starts_with(line, "elif")) {
    Frame& f = frames_.back();
    const Tri t = f.taken || f.unknown ? Tri::no : cond(4);
    f.active = f.outer && !f.taken && !f.unknown && t == Tri::yes;
    f.taken = f.taken || t == Tri::yes;
    f.unknown = f.unknown || t == Tri::unknown;
  } else if (starts_with(line, "else")) {
    Frame& f = frames_.back();
    f.active = f.outer && !f.taken && !f.unknown;
  } else {
    frames_.pop_back();
  }
}

// `A && B || C`, left to right as the shell reads it.
Tri ShellVars::condition(const std::string& text) const {
  static const std::regex kOp(R"(\s(&&|\|\|)\s)");
  Tri acc = Tri::unknown;
  std::string op;
  std::size_t pos = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), kOp), end;; ++it) {
    const bool last = it == end;
    const std::string part = last ? text.substr(pos) : text.substr(pos, static_cast<std::size_t>(it->position()) - pos);
    const Tri t = test(part);
    if (op.empty()) acc = t;
    else if (op == "&&")
      acc = acc == Tri::no || t == Tri::no ? Tri::no : (acc == Tri::yes && t == Tri::yes ? Tri::yes : Tri::unknown);
    else acc = acc == Tri::yes || t == Tri::yes ? Tri::yes : (acc == Tri::no && t == Tri::no ? Tri::no : Tri::unknown);
    if (last) break;
    op = (*it)[1].str();
    pos = static_cast<std::size_t>(it->position() + it->length());
  }
  return acc;
}

// One `[ ... ]` / `[[ ... ]]` test; a variable the script never assigns is an unset (empty)
// environment variable.
Tri ShellVars::test(const std::string& text) const {
  std::vector<std::string> w;
  try {
    w = shell_words(text, "");
  } catch (const sim::InputError&) { return Tri::unknown; }
  if (w.size() < 3 || (w.front() != "[" && w.front() != "[[") || (w.back() != "]" && w.back() != "]]"))
    return Tri::unknown;
  w = std::vector<std::string>(w.begin() + 1, w.end() - 1);
  bool negate = false;
  if (!w.empty() && w[0] == "!") {
    negate = true;
    w.erase(w.begin());
  }
  const auto value = [&](const std::string& word) -> std::optional<std::string> {
    static const std::regex kRef(R"(^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$)");
    std::smatch m;
    if (std::regex_match(word, m, kRef) && !assigned(m[1].str())) return std::string();
    return expand(word, {});
  };
  Tri r = Tri::unknown;
  if (w.size() == 2 && w[0] == "-v") {
    r = assigned(w[1]) ? Tri::yes : Tri::no;
  } else if (w.size() == 2 && (w[0] == "-z" || w[0] == "-n")) {
    if (const auto v = value(w[1])) r = (v->empty() == (w[0] == "-z")) ? Tri::yes : Tri::no;
  } else if (w.size() == 3) {
    const auto a = value(w[0]), b = value(w[2]);
    const std::string& op = w[1];
    if (a && b && (op == "=" || op == "==" || op == "!=")) {
      r = ((*a == *b) == (op != "!=")) ? Tri::yes : Tri::no;
    } else if (a && b) {
      static const std::map<std::string, std::function<bool(long long, long long)>> kCompare = {
          {"-eq", std::equal_to<>()},      {"-ne", std::not_equal_to<>()}, {"-gt", std::greater<>()},
          {"-ge", std::greater_equal<>()}, {"-lt", std::less<>()},         {"-le", std::less_equal<>()}};
      const auto x = to_int(*a), y = to_int(*b);
      if (!x || !y) return Tri::no;  // `[ -gt 0 ]` with an empty operand fails
      if (const auto it = kCompare.find(op); it != kCompare.end()) r = it->second(*x, *y) ? Tri::yes : Tri::no;
    }
  }
  if (negate && r != Tri::unknown) r = r == Tri::yes ? Tri::no : Tri::yes;
  return r;
}

// $((...)): integers, variables (bare or with $), + - * / % and parentheses.
std::optional<long long> ShellVars::arithmetic(std::string_view expr, const Overrides& o, int depth) const {
  std::size_t i = 0;
  bool ok = true;
  std::function<long long()> sum;
  const auto skip = [&] {
    while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
  };
  const std::function<long long()> factor = [&]() -> long long {
    skip();
    if (i < expr.size() && expr[i] == '(') {
      ++i;
      const long long v = sum();
      skip();
      if (i < expr.size() && expr[i] == ')') ++i;
      else ok = false;
      return v;
    }
    if (i < expr.size() && expr[i] == '-') return ++i, -factor();
    const std::size_t b = i;
    if (i < expr.size() && expr[i] == '$') ++i;
    const bool brace = i < expr.size() && expr[i] == '{';
    if (brace) ++i;
    const std::size_t s = i;
    while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '_')) ++i;
    const std::string tok(expr.substr(s, i - s));
    if (brace && i < expr.size() && expr[i] == '}') ++i;
    if (tok.empty()) return ok = false, 0;
    if (std::isdigit(static_cast<unsigned char>(tok[0])) && expr[b] != '$') {
      const auto n = to_int(tok);
      return n ? *n : (ok = false, 0);
    }
    const auto v = get(tok, o, depth + 1);
    const auto n = v ? to_int(*v) : std::nullopt;
    return n ? *n : (ok = false, 0);
  };
  const auto term = [&]() -> long long {
    long long v = factor();
    for (skip(); ok && i < expr.size() && (expr[i] == '*' || expr[i] == '/' || expr[i] == '%'); skip()) {
      const char op = expr[i++];
      const long long r = factor();
      if (op != '*' && r == 0) return ok = false, 0;
      v = op == '*' ? v * r : op == '/' ? v / r : v % r;
    }
    return v;
  };
  sum = [&]() -> long long {
    long long v = term();
    for (skip(); ok && i < expr.size() && (expr[i] == '+' || expr[i] == '-'); skip()) {
      const char op = expr[i++];
      const long long r = term();
      v = op == '+' ? v + r : v - r;
    }
    return v;
  };
  const long long v = sum();
  skip();
  if (!ok || i != expr.size()) return std::nullopt;
  return v;
}

std::optional<std::string> ShellVars::expand(std::string_view s, const Overrides& o, int depth) const {
  if (depth > 32) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '`') return std::nullopt;
    if (s[i] != '$' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    if (starts_with(s.substr(i), "$((")) {
      const auto close = s.find("))", i);  // nested $((...)) is not used by the launchers
      if (close == std::string_view::npos) return std::nullopt;
      const auto v = arithmetic(s.substr(i + 3, close - i - 3), o, depth);
      if (!v) return std::nullopt;
      out += std::to_string(*v);
      i = close + 1;
    } else if (s[i + 1] == '{') {
      const auto close = s.find('}', i);
      if (close == std::string_view::npos) return std::nullopt;
      // ${V}, ${V-x}, ${V:-x}, ${V=x}, ${V:=x}
      static const std::regex kBody(R"(^([A-Za-z_][A-Za-z0-9_]*)(?:(:?)[-=](.*))?$)");
      const std::string body(s.substr(i + 2, close - i - 2));
      std::smatch m;
      if (!std::regex_match(body, m, kBody)) return std::nullopt;
      auto v = get(m[1].str(), o, depth);
      const bool fallback = m[3].matched && ((!v && !assigned(m[1].str())) || (m[2].length() > 0 && v && v->empty()));
      if (fallback) v = expand(m[3].str(), o, depth + 1);
      if (!v) return std::nullopt;
      out += *v;
      i = close;
    } else if (std::isalpha(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '_') {
      std::size_t e = i + 1;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      const auto v = get(std::string(s.substr(i + 1, e - i - 1)), o, depth);
      if (!v) return std::nullopt;
      out += *v;
      i = e - 1;
    } else {
      return std::nullopt;  // $(...), $1, $@, $$
    }
  }
  return out;
}

// --- the command ---------------------------------------------------------------------------

struct Command {
  bool pipeline = false;
  std::vector<std::string> launcher;  // torchrun and its flags (empty for a bare flag list)
  std::vector<std::string> args;      // the script's arguments
};

bool names_script(const std::string& word, std::string_view script) {
  const auto slash = word.rfind('/');
  return std::string_view(word).substr(slash == std::string::npos ? 0 : slash + 1) == script;
}

bool is_operator(const std::string& w) {
  return w == "|" || w == "|&" || w == "&&" || w == "||" || w == "&" || w.rfind(">", 0) == 0 || w.rfind("2>", 0) == 0 ||
         w.rfind("&>", 0) == 0 || w.rfind("<", 0) == 0;
}

// Each word that is (or holds) a variable, expanded; a word that is a variable alone splits at
// whitespace as an unquoted expansion does. Unknowable values stay as written.
std::vector<std::string> expand_words(const std::vector<std::string>& words, const ShellVars& vars,
                                      const Overrides& o) {
  static const std::regex kRef(R"(^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$)");
  std::vector<std::string> out;
  for (const auto& w : words) {
    const auto v = w.find('$') == std::string::npos ? std::optional<std::string>() : vars.expand(w, o);
    if (!v) {
      out.push_back(w);
    } else if (std::regex_match(w, kRef)) {
      std::vector<std::string> split;
      try {
        split = shell_words(*v, "");
      } catch (const sim::InputError&) { split = {*v}; }
      out.insert(out.end(), split.begin(), split.end());
    } else {
      out.push_back(*v);
    }
  }
  return out;
}

template <std::size_t N>
bool any_of_flags(const std::vector<std::string>& words, const std::string_view (&flags)[N]) {
  return std::any_of(words.begin(), words.end(), [&](const std::string& w) {
    const std::string name = w.substr(0, w.find('='));
    return std::find(std::begin(flags), std::end(flags), name) != std::end(flags);
  });
}

// The last line that runs one of the two scripts; without one, the whole text as a flag list.
Command find_command(const std::vector<std::string>& lines, const ShellVars& vars, const Overrides& o,
                     const std::string& source) {
  Command cmd;
  std::vector<std::string> found, all;
  const auto mentions_script = [](const std::string& w) {
    return names_script(w, nf::kZero1Script) || names_script(w, nf::kPipelineScript);
  };
  for (const auto& line : lines) {
    std::vector<std::string> words;
    try {
      words = shell_words(line, source);
    } catch (const sim::InputError&) {  // a line the reading cannot split: only the command must be
      if (line.find(nf::kZero1Script) != std::string::npos || line.find(nf::kPipelineScript) != std::string::npos)
        throw;
      continue;
    }
    all.insert(all.end(), words.begin(), words.end());
    if (std::any_of(words.begin(), words.end(), mentions_script)) found = words;
  }
  std::vector<std::string> words = expand_words(found.empty() ? all : found, vars, o);
  if (!found.empty()) words.erase(std::find_if(words.begin(), words.end(), is_operator), words.end());
  const auto script = std::find_if(words.begin(), words.end(), mentions_script);
  if (script != words.end()) {
    cmd.pipeline = names_script(*script, nf::kPipelineScript);
    cmd.launcher.assign(words.begin(), script);
    cmd.args.assign(script + 1, words.end());
    return cmd;
  }
  cmd.pipeline = any_of_flags(words, nf::kPipelineOnly);
  if (!cmd.pipeline && !any_of_flags(words, nf::kZero1Only))
    throw sim::InputError(source + ": no " + std::string(nf::kZero1Script) + " or " + std::string(nf::kPipelineScript) +
                          " command (nor their flags, e.g. " + std::string(nf::kTensorParallel) + ") found");
  cmd.args = std::move(words);
  return cmd;
}

// --- flags ------------------------------------------------------------------------------------

struct Reader {
  const CommandArgs& a;
  const std::string& source;
  std::string_view script;
  std::vector<std::string>* warnings;  // null in the first pass

  void warn(const std::string& w) const {
    if (warnings) warnings->push_back(source + ": " + w);
  }
  // An integer flag; `fallback` (the script's default, with a warning when `say`) when absent.
  long long integer(std::string_view flag, long long min, long long fallback, bool say = true) const {
    const auto v = a.value(flag);
    if (!v) {
      if (say)
        warn(std::string(flag) + " not given: " + std::string(script) + "'s default " + std::to_string(fallback));
      return fallback;
    }
    if (v->find('$') != std::string::npos)
      throw sim::InputError(source + ": " + std::string(flag) + ": '" + *v +
                            "' is not assigned a number in the script (expected an integer >= " + std::to_string(min) +
                            ")");
    return *a.integer(flag, min);
  }
  bool switch_int(std::string_view flag, bool fallback) const { return integer(flag, 0, fallback ? 1 : 0, false) > 0; }
  bool store_true(std::string_view flag) const { return a.boolean(flag).value_or(false); }
};

void agree(int from_ctx, long long got, std::string_view flag, const char* what, const std::string& source) {
  if (from_ctx > 0 && got != from_ctx)
    throw sim::InputError(source + ": " + std::string(flag) + ": expected the " + what + " given to the import (" +
                          std::to_string(from_ctx) + "), got " + std::to_string(got));
}

void read_degrees(const Reader& r, bool pipeline, const ImportContext& ctx, sim::ParallelConfig& cfg) {
  cfg.tp = static_cast<int>(r.integer(nf::kTensorParallel, 1, pipeline ? nf::kPpDefaultTp : nf::kZ1DefaultTp));
  agree(ctx.tp, cfg.tp, nf::kTensorParallel, "tensor-parallel degree", r.source);
  cfg.pp = pipeline ? static_cast<int>(r.integer(nf::kPpPipelineParallel, 1, 1, false)) : 1;
  agree(ctx.pp, cfg.pp, nf::kPpPipelineParallel, "pipeline-parallel degree", r.source);
  cfg.cp = static_cast<int>(r.integer(nf::kContextParallel, 1, 1, false));
  const long long model_parallel = static_cast<long long>(cfg.tp) * cfg.pp * cfg.cp;
  if (ctx.devices % model_parallel != 0)
    throw sim::InputError(
        r.source + ": " + std::string(nf::kTensorParallel) + " x " + std::string(nf::kPpPipelineParallel) + " x " +
        std::string(nf::kContextParallel) + ": expected " + std::to_string(cfg.tp) + " x " + std::to_string(cfg.pp) +
        " x " + std::to_string(cfg.cp) + " to divide the cluster's " + std::to_string(ctx.devices) + " NeuronCores");
  cfg.dp = static_cast<int>(ctx.devices / model_parallel);
}

void read_batch(const Reader& r, bool pipeline, const ImportContext& ctx, sim::ParallelConfig& cfg) {
  if (pipeline) {
    const long long batch = r.integer(nf::kPpTrainBatchSize, 1, nf::kPpDefaultTrainBatch);
    const long long micro = r.integer(nf::kPpNumMicrobatches, 1, nf::kPpDefaultMicrobatches);
    if (batch % micro != 0)
      throw sim::InputError(r.source + ": " + std::string(nf::kPpTrainBatchSize) + ": expected a multiple of " +
                            std::string(nf::kPpNumMicrobatches) + " (" + std::to_string(micro) + "), got " +
                            std::to_string(batch));
    cfg.micro_batch_size = static_cast<int>(batch / micro);
    cfg.global_batch_size = static_cast<int>(batch * cfg.dp);
    agree(ctx.micro_batch_size, cfg.micro_batch_size, nf::kPpTrainBatchSize, "micro-batch size", r.source);
  } else {
    cfg.micro_batch_size = static_cast<int>(r.integer(nf::kZ1BatchSize, 1, nf::kZ1DefaultBatch));
    const long long accum = r.integer(nf::kZ1GradAccum, 1, nf::kZ1DefaultAccum);
    cfg.global_batch_size = static_cast<int>(cfg.micro_batch_size * accum * cfg.dp);
    agree(ctx.micro_batch_size, cfg.micro_batch_size, nf::kZ1BatchSize, "micro-batch size", r.source);
  }
  cfg.seq_len = static_cast<int>(r.integer(nf::kSeqLen, 1, pipeline ? nf::kPpDefaultSeqLen : nf::kZ1DefaultSeqLen));
}

// bf16 with an fp32 copy in the optimizer; fp32 gradient accumulation with the GPU-compatible
// precision (needs ZeRO-1).
void read_precision(const Reader& r, bool pipeline, const ShellVars& vars, const ImportContext& ctx,
                    sim::ParallelConfig& cfg) {
  const bool gpu_compatible = r.switch_int(nf::kGpuCompatiblePrecision, true);
  cfg.grad_accum_dtype = gpu_compatible && cfg.zero_stage == 1 ? sim::GradAccumDtype::fp32 : sim::GradAccumDtype::param;
  if (gpu_compatible && cfg.zero_stage == 0)
    r.warn(std::string(nf::kGpuCompatiblePrecision) +
           " 1 (the default) without ZeRO-1: NxD stops with \"ZeRO-1 "
           "optimizer is not enabled, while `use_master_weights` is True\" (trainer.py); imported without it");
  cfg.precision = sim::Precision::bf16;
  const bool fp32_optimizer = pipeline ? r.switch_int(nf::kPpFp32Optimizer, false) : r.store_true(nf::kZ1MixPrecision);
  if (!gpu_compatible && !fp32_optimizer)
    r.warn("neither " + std::string(nf::kGpuCompatiblePrecision) + " nor " +
           std::string(pipeline ? nf::kPpFp32Optimizer : nf::kZ1MixPrecision) +
           ": bf16 weights without an fp32 copy; modelled as bf16 with an fp32 master copy");
  if (!pipeline) return;
  const auto env_set = [&](std::string_view name) {
    const auto v = vars.get(std::string(name), {});
    return v && !v->empty() && *v != "0";
  };
  if (r.switch_int(nf::kPpUseAmp, false))
    r.warn(std::string(nf::kPpUseAmp) + " autocasts with device_type \"cuda\" (run_llama_nxd.py); modelled as bf16");
  else if (!env_set(nf::kEnvDowncastBf16) && !env_set(nf::kEnvUseBf16) && ctx.precision) cfg.precision = *ctx.precision;
  else if (!env_set(nf::kEnvDowncastBf16) && !env_set(nf::kEnvUseBf16))
    r.warn(
        "the script sets neither XLA_DOWNCAST_BF16 nor XLA_USE_BF16 (run_llama2_70B_tp_pp.sh exports "
        "XLA_DOWNCAST_BF16=1): bf16 assumed");
}

void read_features(const Reader& r, bool pipeline, sim::ParallelConfig& cfg) {
  cfg.zero_stage = (pipeline ? r.switch_int(nf::kPpUseZero1, false) : r.store_true(nf::kZ1UseZero1)) ? 1 : 0;
  cfg.sequence_parallel =
      pipeline ? r.switch_int(nf::kPpSequenceParallel, true) : r.store_true(nf::kZ1SequenceParallel);
  const bool selective =
      pipeline ? r.switch_int(nf::kPpSelectiveCheckpoint, false) : r.store_true(nf::kZ1SelectiveCheckpoint);
  cfg.recompute = selective ? sim::Recompute::selective : sim::Recompute::full;  // else "full"
  const bool flash = r.switch_int(nf::kFlashAttention, !pipeline);
  cfg.attention = flash || cfg.cp > 1 ? sim::AttentionKind::flash : sim::AttentionKind::eager;
  if (flash && cfg.cp > 1)
    r.warn(std::string(nf::kFlashAttention) + " 1 with " + std::string(nf::kContextParallel) +
           " > 1: the model code "
           "raises \"Context parallelism is not supported with flash attention\" (modeling_llama_nxd.py)");
  cfg.cp_kind = sim::CpKind::ring;
  const int vpp = pipeline ? static_cast<int>(r.integer(nf::kPpVirtualPipeline, 1, 1, false)) : 1;
  cfg.schedule = vpp > 1 ? sim::PipelineSchedule::interleaved : sim::PipelineSchedule::one_f_one_b;
  cfg.virtual_stages = vpp;
  for (const auto flag : {pipeline ? nf::kPpNumLayer : nf::kZ1NumLayers, nf::kHiddenSizeOverride})
    if (const auto v = r.a.value(flag); v && *v != "-1")
      r.warn(std::string(flag) + " " + *v +
             " overrides the model's config.json: simulate with a model card that has it");
  if (const auto k = r.a.value(nf::kKvReplicator); k && *k != "1")
    r.warn(std::string(nf::kKvReplicator) + " " + *k +
           " replicates key/value heads across tensor-parallel ranks; "
           "shardplan needs tp to divide the key/value heads");
}

// torchrun's --nproc_per_node x --nnodes against the cluster of the import.
void check_launcher(const Command& cmd, const ImportContext& ctx, const std::string& source,
                    std::vector<std::string>& warnings) {
  if (cmd.launcher.empty()) return;
  const CommandArgs l(cmd.launcher, source);
  const auto nproc = l.has(nf::kNprocPerNode) ? l.value(nf::kNprocPerNode) : l.value(nf::kNprocPerNodeDash);
  const auto nnodes = l.value(nf::kNnodes);
  const long long per_node = nproc ? to_int(*nproc).value_or(0) : 0;
  const long long nodes = nnodes ? to_int(*nnodes).value_or(0) : 0;
  if (per_node > 0 && nodes > 0 && per_node * nodes != ctx.devices)
    throw sim::InputError(source + ": " + std::string(nf::kNprocPerNode) + " x " + std::string(nf::kNnodes) +
                          ": expected the cluster's " + std::to_string(ctx.devices) + " NeuronCores, got " +
                          std::to_string(per_node) + " x " + std::to_string(nodes));
  if (per_node > 0 && ctx.devices_per_node > 0 && per_node != ctx.devices_per_node)
    warnings.push_back(source + ": " + std::string(nf::kNprocPerNode) + " " + std::to_string(per_node) +
                       " differs from the cluster's " + std::to_string(ctx.devices_per_node) + " per node");
  for (const auto s : nf::kTorchrunSilent) (void)l.has(s);
  for (const auto& f : l.unread_flags())
    warnings.push_back(source + ": torchrun " + f + " is not a setting shardplan models; ignored");
}

void warn_unread(const CommandArgs& a, bool pipeline, const std::string& source, std::vector<std::string>& warnings) {
  if (pipeline)
    for (const auto s : nf::kPipelineSilent) (void)a.has(s);
  else
    for (const auto s : nf::kZero1Silent) (void)a.has(s);
  for (const auto& f : a.unread_flags())
    warnings.push_back(
        source + ": " + f + " is not a setting shardplan models; ignored" +
        (pipeline ? "" : " (tp_zero1_llama_hf_pretrain.py's parse_args stops on flags it does not know)"));
}

}  // namespace

ImportResult import_neuron(std::string_view script, const ImportContext& ctx, const std::string& source) {
  import_detail::check_context(ctx, source);
  const auto lines = logical_lines(script);
  const ShellVars vars(lines);
  ImportResult r;
  auto& cfg = r.config;
  {  // The degrees first: the launchers' batch arithmetic divides by DP, which they fix.
    const Command first = find_command(lines, vars, {}, source);
    const CommandArgs a(first.args, source);
    read_degrees(Reader{a, source, "", nullptr}, first.pipeline, ctx, cfg);
  }
  const Command cmd = find_command(lines, vars, {{std::string(nf::kVarDataParallel), std::to_string(cfg.dp)}}, source);
  const CommandArgs a(cmd.args, source);
  const Reader reader{a, source, cmd.pipeline ? nf::kPipelineScript : nf::kZero1Script, &r.warnings};
  read_degrees(reader, cmd.pipeline, ctx, cfg);
  read_batch(reader, cmd.pipeline, ctx, cfg);
  read_features(reader, cmd.pipeline, cfg);
  read_precision(reader, cmd.pipeline, vars, ctx, cfg);
  cfg.mixed_precision = sim::MixedPrecision::master_weights;
  check_launcher(cmd, ctx, source, r.warnings);
  warn_unread(a, cmd.pipeline, source, r.warnings);
  import_detail::warn_layout(ctx, cfg, r.warnings);
  return r;
}

}  // namespace shardplan::interop
