#pragma once
// Display of SI quantities with units (GiB, s, $, tokens/s, hours).
#include <QString>

namespace shardplan::gui {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QString format_gib(double bytes);          // "12.34 GiB"
QString format_seconds(double s);          // "850 ms", "1.23 s", "3.4 h", "2.1 d"
QString format_usd(double usd);            // "$1,234"
QString format_rate(double tokens_per_s);  // "12.3 k tokens/s"
QString format_count(double n);            // "1.3 M", "70 B"

}  // namespace shardplan::gui
