#pragma once
// Training logs of other stacks (and shardrun's own): the per-iteration time, throughput,
// TFLOP/s and memory figures a framework prints, read back so that a user can validate and
// calibrate against the cluster they already run (`shardplan runs import`).
//
// One parser per format (training_log_<format>.cpp); each knows the exact line its framework
// prints (the source file that prints it is cited there) and skips every other line. A line
// that is the framework's line but does not parse is an InputError naming the file and the line
// number. Units are converted once, here: seconds, bytes, FLOP/s.
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::interop {

enum class LogFormat { megatron, torchtitan, deepspeed, hf_trainer, optimum_habana, shardrun };

// "megatron" | "torchtitan" | "deepspeed" | "hf-trainer" | "optimum-habana" | "shardrun".
std::string to_string(LogFormat f);
std::optional<LogFormat> log_format_from_string(std::string_view s);
std::vector<std::string> log_format_names();

// One logged iteration (or logging interval). Absent figures stay nullopt.
struct LogStep {
  long long iteration = 0;             // the framework's step counter (the interval's last)
  int line = 0;                        // 1-based line in the log
  std::optional<double> step_s;        // wall time of one iteration (interval average)
  std::optional<double> tokens_per_s;  // whole job
  std::optional<double> tokens_per_s_per_device;
  std::optional<double> samples_per_s;           // whole job
  std::optional<double> flops_per_s_per_device;  // the framework's own model-FLOP/s figure
  std::optional<double> peak_bytes;              // the framework's peak-memory figure, this device
  std::optional<double> loss;
};

// A whole-run summary line (HF Trainer's final metrics, ...).
struct LogSummary {
  int line = 0;
  std::optional<double> runtime_s;
  std::optional<double> samples_per_s;  // whole job
  std::optional<double> steps_per_s;
  std::optional<double> peak_bytes;
};

struct TrainingLog {
  std::string source;  // file name shown in messages
  LogFormat format = LogFormat::shardrun;
  std::vector<LogStep> steps;
  std::optional<LogSummary> summary;
  std::optional<double> peak_bytes;  // largest peak-memory figure anywhere in the log (any rank)
};

// Parses `in` as `format`. InputError: "<source>:<line>: <what was expected>", or when the log
// has no line of the format at all.
TrainingLog parse_training_log(std::istream& in, LogFormat format, const std::string& source);
TrainingLog load_training_log(const std::string& path, LogFormat format);

// What a run measured, as one `shardplan.runs/1` figure.
struct MeasuredFigure {
  std::string key;     // "step_seconds" | "tokens_per_second" | "tokens_per_second_per_device" | "samples_per_second"
  double value = 0;    // in that key's unit
  int steps_used = 0;  // logged iterations behind it (0: a summary line)
  std::string how;     // one line: which lines, which statistic
  std::optional<double> peak_bytes;
};

// The steady-state figure of a log: the median over logged iterations after the first
// `skip_steps` (warm-up; default 1 when more than two are logged, as shardrun's report does) of
// step time, else tokens/s, else samples/s; a summary line only when no iteration has a figure.
// InputError when nothing is left.
MeasuredFigure measured_figure(const TrainingLog& log, std::optional<int> skip_steps = std::nullopt);

namespace log_detail {
// Per-format line readers (training_log_<format>.cpp): each looks at one line (1-based number
// `line`) and adds what it finds to `log`; lines of other kinds are left alone.
void megatron_line(std::string_view text, int line, TrainingLog& log);
void torchtitan_line(std::string_view text, int line, TrainingLog& log);
void deepspeed_line(std::string_view text, int line, TrainingLog& log);
void hf_trainer_line(std::string_view text, int line, TrainingLog& log);
void optimum_habana_line(std::string_view text, int line, TrainingLog& log);
void shardrun_line(std::string_view text, int line, TrainingLog& log);

// "<source>:<line>: <what>" as an InputError.
[[noreturn]] void fail_line(const std::string& source, int line, const std::string& what);
// The number at the start of `s` (after spaces): strtod's syntax, with nan/inf refused.
std::optional<double> leading_number(std::string_view s);
// The number after `key` in `text` (the first occurrence); nullopt when the key is absent;
// InputError (line named) when the key is there without a number after it.
std::optional<double> number_after(std::string_view text, std::string_view key, const std::string& source, int line);
}  // namespace log_detail

}  // namespace shardplan::interop
