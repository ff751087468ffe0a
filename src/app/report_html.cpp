// The report page: plain HTML with inline SVG charts and CSS, images as data URIs. No script and no
// outside resource, so it opens anywhere (a cluster's login node, an e-mail attachment).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ddp/app/report.hpp"

namespace ddp::app {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  return out;
}

std::string base64(const std::vector<std::uint8_t>& bytes) {
  static const char* const k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint32_t{bytes[i]} << 16) |
                            (i + 1 < bytes.size() ? std::uint32_t{bytes[i + 1]} << 8 : 0) |
                            (i + 2 < bytes.size() ? std::uint32_t{bytes[i + 2]} : 0);
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? k[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k[n & 63] : '=';
  }
  return out;
}

std::string fmt(double v, const char* f = "%.4g") {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (epoch, value)
};

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// "Nice" tick values covering [lo, hi]: 1, 2 or 5 times a power of ten.
std::vector<double> ticks(double lo, double hi, int wanted) {
  const double span = hi - lo;
  const double raw = span / std::max(1, wanted);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  // Multiples of the step, counted (not summed: no "-0" or 0.30000000000000004 on the axis).
  for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; k += 1.0)
    out.push_back(k == 0.0 ? 0.0 : k * step);
  return out;
}

// A line chart (one line per series, markers at the points) with axes, ticks and a legend.
std::string line_chart(const std::string& id, const std::string& title, const std::string& y_label,
                       const std::vector<Series>& series) {
  constexpr double W = 460, H = 260, L = 58, R = 12, T = 30, B = 40;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  std::size_t points = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      ++points;
    }
  std::ostringstream svg;
  svg << "<figure class=\"chart\" id=\"" << id << "\"><svg xmlns=\"http://www.w3.org/2000/svg\" "
      << "viewBox=\"0 0 " << W << " " << H << "\" width=\"" << W << "\" height=\"" << H
      << "\" role=\"img\" aria-label=\"" << escape(title) << "\">"
      << "<text x=\"" << W / 2 << "\" y=\"18\" text-anchor=\"middle\" class=\"title\">"
      << escape(title) << "</text>";
  if (points == 0) {
    svg << "<text x=\"" << W / 2 << "\" y=\"" << H / 2
        << "\" text-anchor=\"middle\">no values recorded</text></svg></figure>";
    return svg.str();
  }
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) {
    const double pad = y0 == 0 ? 1.0 : std::abs(y0) * 0.05;
    y0 -= pad, y1 += pad;
  } else {
    const double pad = (y1 - y0) * 0.05;
    y0 -= pad, y1 += pad;
  }
  const auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  const auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  svg << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
      << H - T - B << "\" class=\"plot\"/>";
  for (const double t : ticks(y0, y1, 5))
    svg << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << py(t) << "\" y2=\"" << py(t)
        << "\" class=\"grid\"/><text x=\"" << L - 4 << "\" y=\"" << py(t) + 4
        << "\" text-anchor=\"end\">" << fmt(t) << "</text>";
  for (const double t : ticks(x0, x1, 6))
    if (std::abs(t - std::round(t)) < 1e-9)  // epochs are whole numbers
      svg << "<text x=\"" << px(t) << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">"
          << fmt(t) << "</text>";
  svg << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 6
      << "\" text-anchor=\"middle\">epoch</text><text transform=\"translate(14," << (T + H - B) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">" << escape(y_label) << "</text>";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    if (s.points.empty()) continue;
    const char* colour = kColours[i % std::size(kColours)];
    svg << "<path class=\"line\" data-series=\"" << escape(s.name) << "\" stroke=\"" << colour
        << "\" d=\"";
    for (std::size_t p = 0; p < s.points.size(); ++p)
      svg << (p ? " L" : "M") << fmt(px(s.points[p].first), "%.2f") << ","
          << fmt(py(s.points[p].second), "%.2f");
    svg << "\"/>";
    for (const auto& [x, y] : s.points)
      svg << "<circle cx=\"" << fmt(px(x), "%.2f") << "\" cy=\"" << fmt(py(y), "%.2f")
          << "\" r=\"2.5\" fill=\"" << colour << "\"><title>" << escape(s.name) << ", epoch "
          << fmt(x) << ": " << fmt(y, "%.6g") << "</title></circle>";
    const double ly = T + 14 + 15.0 * static_cast<double>(i);
    svg << "<rect x=\"" << W - R - 128 << "\" y=\"" << ly - 9 << "\" width=\"10\" height=\"10\" "
        << "fill=\"" << colour << "\"/><text x=\"" << W - R - 114 << "\" y=\"" << ly << "\">"
        << escape(s.name) << "</text>";
  }
  svg << "</svg></figure>";
  return svg.str();
}

Series series_of(const std::string& name, const std::vector<ReportEpoch>& epochs,
                 std::optional<double> ReportEpoch::*field, double scale = 1.0) {
  Series s{name, {}};
  for (const auto& e : epochs)
    if ((e.*field).has_value() && std::isfinite(*(e.*field)))
      s.points.emplace_back(e.epoch, *(e.*field) * scale);
  return s;
}

std::string confusion_table(const ReportData& d) {
  std::ostringstream t;
  t << "<section id=\"confusion\"><h2>Confusion matrix</h2>";
  if (d.confusion.empty()) {
    t << "<p class=\"note\">This run's metrics hold no confusion matrix (an evaluation writes "
         "one for up to 256 classes).</p></section>";
    return t.str();
  }
  std::int64_t largest = 1;
  for (const auto& row : d.confusion)
    for (const auto v : row) largest = std::max(largest, v);
  t << "<p class=\"note\">" << escape(d.confusion_source)
    << ": rows are the true class, columns the predicted one.</p><table class=\"matrix\">"
    << "<thead><tr><th>true \\ predicted</th>";
  for (const auto& c : d.classes) t << "<th class=\"col\">" << escape(c) << "</th>";
  t << "<th>accuracy</th></tr></thead><tbody>";
  for (std::size_t i = 0; i < d.confusion.size(); ++i) {
    std::int64_t total = 0;
    for (const auto v : d.confusion[i]) total += v;
    t << "<tr><th>" << escape(d.classes[i]) << "</th>";
    for (std::size_t j = 0; j < d.confusion[i].size(); ++j) {
      const double share = static_cast<double>(d.confusion[i][j]) / static_cast<double>(largest);
      // Right answers in blue, mistakes in red, darker for more.
      const int light = static_cast<int>(std::lround(100 - 55 * share));
      t << "<td class=\"" << (i == j ? "hit" : "miss") << "\" style=\"background:hsl("
        << (i == j ? 210 : 0) << ",70%," << light << "%)" << (light < 65 ? ";color:#fff" : "")
        << "\">" << d.confusion[i][j] << "</td>";
    }
    t << "<td>"
      << (total ? fmt(100.0 * static_cast<double>(d.confusion[i][i]) / static_cast<double>(total),
                      "%.1f%%")
                : std::string("-"))
      << "</td></tr>";
  }
  t << "</tbody></table></section>";
  return t.str();
}

std::string class_name(const ReportData& d, int c) {
  return c >= 0 && static_cast<std::size_t>(c) < d.classes.size()
             ? d.classes[static_cast<std::size_t>(c)]
             : std::to_string(c);
}

std::string sample_grid(const ReportData& d) {
  std::ostringstream g;
  g << "<section id=\"samples\"><h2>Test images</h2>";
  if (d.samples.empty()) {
    g << "<p class=\"note\">No test images: "
      << escape(d.samples_source.empty() ? std::string("none asked for") : d.samples_source)
      << "</p></section>";
    return g.str();
  }
  std::size_t wrong = 0;
  for (const auto& s : d.samples) wrong += s.predicted != s.truth;
  g << "<p class=\"note\">" << escape(d.samples_source) << ": " << wrong << " of "
    << d.samples.size() << " wrong (red).</p><div class=\"grid\">";
  for (const auto& s : d.samples) {
    const bool ok = s.predicted == s.truth;
    g << "<figure class=\"sample " << (ok ? "right" : "wrong") << "\"><img alt=\"test image\" "
      << "src=\"data:image/png;base64," << base64(s.png) << "\"><figcaption>"
      << "<span class=\"pred\">" << escape(class_name(d, s.predicted)) << " "
      << fmt(100.0 * s.probability, "%.0f%%") << "</span>";
    if (!ok) g << "<span class=\"truth\">true: " << escape(class_name(d, s.truth)) << "</span>";
    g << "</figcaption></figure>";
  }
  g << "</div></section>";
  return g.str();
}

const char* const kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.note{color:#555;margin:4px 0 10px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{margin:0}
svg text{font:11px system-ui,sans-serif;fill:#333}svg .title{font-size:13px;font-weight:600}
.plot{fill:#fafafa;stroke:#999}.grid{stroke:#e3e3e3}.line{fill:none;stroke-width:2}
table.matrix{border-collapse:collapse;font-size:12px}
.matrix th,.matrix td{border:1px solid #ccc;padding:3px 6px;text-align:right}
.matrix th.col{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:8px}
.sample{margin:0;width:96px;text-align:center;font-size:11px;border:3px solid #3a3;padding:2px}
.sample.wrong{border-color:#d22}.sample img{width:88px;height:88px;image-rendering:pixelated}
.sample figcaption span{display:block}.truth{color:#d22;font-weight:600}
)";

}  // namespace

std::string render_report_html(const ReportData& d) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ddp_train report: "
    << escape(d.title) << "</title><style>" << kStyle << "</style></head><body>"
    << "<h1>ddp_train report: " << escape(d.title) << "</h1><p class=\"note\">" << escape(d.summary)
    << "</p>";

  const auto& e = d.epochs;
  h << "<section id=\"curves\"><h2>Training</h2><div class=\"charts\">"
    << line_chart("loss-chart", "Loss", "loss",
                  {series_of("train", e, &ReportEpoch::train_loss),
                   series_of("test", e, &ReportEpoch::test_loss)})
    << line_chart("accuracy-chart", "Accuracy", "%",
                  {series_of("train", e, &ReportEpoch::train_acc, 100.0),
                   series_of("test", e, &ReportEpoch::test_acc, 100.0)})
    << line_chart("lr-chart", "Learning rate (end of epoch)", "learning rate",
                  {series_of("lr", e, &ReportEpoch::lr)});
  std::vector<Series> speed{series_of("all ranks", e, &ReportEpoch::images_per_s)};
  std::size_t ranks = 0;
  for (const auto& row : e) ranks = std::max(ranks, row.rank_images_per_s.size());
  for (std::size_t r = 0; r < ranks && ranks > 1; ++r) {
    Series s{"rank " + std::to_string(r), {}};
    for (const auto& row : e)
      if (r < row.rank_images_per_s.size())
        s.points.emplace_back(row.epoch, row.rank_images_per_s[r]);
    speed.push_back(std::move(s));
  }
  h << line_chart("speed-chart", "Images/s", "images/s", speed) << "</div></section>"
    << confusion_table(d) << sample_grid(d) << "</body></html>\n";
  return h.str();
}

}  // namespace ddp::app
