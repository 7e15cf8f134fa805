#include "units.hpp"

#include <QLocale>
#include <cmath>

namespace shardplan::gui {

QString format_gib(double bytes) { return QString::number(bytes / kGiB, 'f', 2) + " GiB"; }

QString format_seconds(double s) {
  if (!std::isfinite(s)) return QStringLiteral("–");
  if (s < 1.0) return QString::number(s * 1e3, 'f', s < 0.01 ? 2 : 1) + " ms";
  if (s < 120) return QString::number(s, 'f', 2) + " s";
  if (s < 7200) return QString::number(s / 60, 'f', 1) + " min";
  if (s < 3 * 86400) return QString::number(s / 3600, 'f', 1) + " h";
  return QString::number(s / 86400, 'f', 1) + " d";
}

QString format_usd(double usd) {
  if (!std::isfinite(usd)) return QStringLiteral("–");
  const QLocale c(QLocale::English);
  return "$" + c.toString(usd, 'f', usd < 100 ? 2 : 0);
}

QString format_count(double n) {
  const char* suffix[] = {"", " k", " M", " B", " T"};
  int i = 0;
  while (std::abs(n) >= 1000 && i < 4) {
    n /= 1000;
    ++i;
  }
  return QString::number(n, 'f', n < 10 && i > 0 ? 2 : (i > 0 ? 1 : 0)) + suffix[i];
}

QString format_rate(double tokens_per_s) { return format_count(tokens_per_s) + " tokens/s"; }

}  // namespace shardplan::gui
