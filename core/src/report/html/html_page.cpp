#include "report/html/html_page.hpp"

#include <fmt/format.h>

namespace polyhal::html {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
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
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows, std::string_view css_class) {
  std::string out = css_class.empty() ? "<table>" : fmt::format("<table class=\"{}\">", css_class);
  out += "<thead><tr>";
  for (const auto& h : header) out += "<th>" + h + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const auto& cell : row) out += "<td>" + cell + "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

std::string page(std::string_view title, std::string_view body) {
  // Colours and type as a plain document: readable printed and on screen.
  static constexpr std::string_view kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2329;
       margin: 24px auto; max-width: 1180px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #5b6672; margin: 0 0 16px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #dde2e7; padding: 4px 10px; text-align: left; }
th { background: #f3f5f7; font-weight: 600; } td.num, th.num { text-align: right; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #dde2e7; border-radius: 6px; padding: 8px; background: #fff; }
figcaption { font-weight: 600; margin: 0 0 4px 4px; }
.note { color: #5b6672; font-size: 13px; }
.estimate { display: inline-block; background: #fff4d6; border: 1px solid #e6c35c;
            border-radius: 4px; padding: 1px 6px; font-size: 12px; }
svg text { font: 11px system-ui, sans-serif; fill: #3b4650; }
)";
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>{}</title><style>{}</style></head>\n<body>\n{}\n</body></html>\n",
      escape(title), kStyle, body);
}

}  // namespace polyhal::html
