// SVG element strings and axis ticks (svg.h).

#include "harness/report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "harness/report/markup.h"

namespace mtp::report::svg {

std::string num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string open(double width, double height, std::string_view label, std::string_view css_class) {
  const std::string l = markup::escape(label);
  const std::string cls = css_class.empty() ? "" : fmt::format(R"( class="{}")", css_class);
  return fmt::format(R"(<svg{} width="{}" height="{}" viewBox="0 0 {} {}" role="img" )"
                     R"(aria-label="{}"><title>{}</title>)",
                     cls, num(width), num(height), num(width), num(height), l, l) +
         "\n";
}

std::string close() { return "</svg>\n"; }

std::string rect(double x, double y, double w, double h, std::string_view attrs,
                 std::string_view inner) {
  if (inner.empty()) {
    return fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" {}/>)", num(x), num(y), num(w),
                       num(h), attrs);
  }
  return fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" {}>{}</rect>)", num(x), num(y),
                     num(w), num(h), attrs, inner);
}

std::string line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  return fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" {}/>)", num(x1), num(y1), num(x2),
                     num(y2), attrs);
}

std::string text(double x, double y, std::string_view content, std::string_view attrs) {
  return fmt::format(R"(<text x="{}" y="{}" {}>{}</text>)", num(x), num(y), attrs,
                     markup::escape(content));
}

std::string title(std::string_view content) {
  return "<title>" + markup::escape(content) + "</title>";
}

Ticks nice_ticks(double lo, double hi, int target, bool integer) {
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = integer ? 1.0 : std::max(std::abs(lo) * 1e-3, 1e-9);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(target - 1, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10.0;
  for (double m : {1.0, 2.0, 5.0}) {
    if (mag * m >= raw) {
      step = mag * m;
      break;
    }
  }
  if (integer) step = std::max(1.0, std::round(step));
  Ticks t;
  t.step = step;
  t.lo = std::floor(lo / step) * step;
  t.hi = std::ceil(hi / step) * step;
  const int n = static_cast<int>(std::lround((t.hi - t.lo) / step));
  for (int i = 0; i <= n; ++i) t.values.push_back(t.lo + i * step);
  t.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return t;
}

std::string tick_label(double v, int decimals) {
  const std::string s = fmt::format("{:.{}f}", v, decimals);
  const bool zero = s.find_first_not_of("-0.") == std::string::npos;
  return zero && s[0] == '-' ? s.substr(1) : s;
}

}  // namespace mtp::report::svg
