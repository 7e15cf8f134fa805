#pragma once
// POSIX shell quoting for everything a generated script or command line embeds from user input
// (paths, job names, model names, hostfiles, extra arguments).
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::formats {

// One shell word that expands to exactly `s`: wrapped in single quotes, each ' written as '\''
// (close, escaped quote, reopen). Inside single quotes nothing is special to sh/bash — not $,
// `, \, ;, spaces or newlines. Strings made only of [A-Za-z0-9_@%+:,./-] (and not empty) are
// returned unquoted, so ordinary arguments stay readable ('=' is quoted: an unquoted `a=b` in
// command position would be an assignment). NUL bytes cannot be passed through a
// shell at all: throws simulator::InputError for them.
std::string shell_quote(std::string_view s);

// The words quoted and joined with single spaces.
std::string shell_join(const std::vector<std::string>& words);

// A token safe to write unquoted where no shell quoting applies (e.g. an `#SBATCH` directive,
// which sbatch reads itself and where a newline would end the comment): every character
// outside [A-Za-z0-9._-] becomes '_'; empty input gives `fallback`.
std::string safe_token(std::string_view s, std::string_view fallback = "shardplan");

// Text safe inside a `# ` comment line: control characters (newline, carriage return, tab, ...)
// become spaces, so the text cannot end the comment.
std::string comment_text(std::string_view s);

}  // namespace shardplan::formats
