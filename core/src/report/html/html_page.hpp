#pragma once
// Self-contained HTML pages: one file, inline CSS and SVG, no script and
// nothing loaded from anywhere, so a report opens offline and in a mail.
#include <string>
#include <string_view>
#include <vector>

namespace polyhal::html {

/// `text` with &, <, >, " and ' escaped for HTML text and attributes.
std::string escape(std::string_view text);

/// A table: header cells, then rows of cells (already escaped or markup).
std::string table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows,
                  std::string_view css_class = "");

/// The whole page: `title` (escaped here) and `body` (markup).
std::string page(std::string_view title, std::string_view body);

}  // namespace polyhal::html
