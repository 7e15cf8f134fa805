#pragma once
// Command lines as other stacks' launch scripts write them (Megatron-LM's pretrain_gpt.py
// arguments, torchtitan's --section.key overrides, NeuronX Distributed and Optimum-Habana
// scripts, `accelerate launch`): split into words as the shell would, then read as argparse does.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::interop {

// The words of a shell script or command line: '#' comments dropped, backslash-newline joined,
// single and double quotes and backslash escapes resolved. Nothing is expanded: $VAR and
// ${ARGS[@]} stay literal words. InputError (naming `source`) on an unterminated quote.
std::vector<std::string> shell_words(std::string_view text, const std::string& source);

// The lines of a shell script with backslash-newline continuations joined ('\r' dropped), for
// readers that look at assignments and branches line by line (the shipped NxD and Optimum-Habana
// launch scripts).
std::vector<std::string> logical_lines(std::string_view text);

// The flags of a command line: "--name value", "--name=value" and bare "--flag" (store_true). A
// word after a flag is its value unless it is itself a flag. The last occurrence of a flag wins,
// as with argparse. Every accessor marks the flag read; unread_flags() lists the rest.
class CommandArgs {
 public:
  CommandArgs(std::vector<std::string> words, std::string source);

  [[nodiscard]] bool has(std::string_view flag) const;
  // The flag's value; nullopt when the flag is absent; InputError when it is given without one.
  [[nodiscard]] std::optional<std::string> value(std::string_view flag) const;
  // An integer >= min; InputError naming the flag otherwise.
  [[nodiscard]] std::optional<long long> integer(std::string_view flag, long long min) const;
  [[nodiscard]] std::optional<double> number(std::string_view flag) const;
  // A bare flag is true; a value must be true/false/1/0 (any case).
  [[nodiscard]] std::optional<bool> boolean(std::string_view flag) const;
  // Words that are not flags or flag values (the script, positional arguments), in order.
  [[nodiscard]] const std::vector<std::string>& positional() const { return positional_; }
  // Flags never asked for, in order of appearance, each once.
  [[nodiscard]] std::vector<std::string> unread_flags() const;
  [[nodiscard]] const std::string& source() const { return source_; }

 private:
  struct Flag {
    std::string name;
    std::optional<std::string> value;
    mutable bool read = false;
  };
  const Flag* find(std::string_view flag) const;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  std::string source_;
};

}  // namespace shardplan::interop
