// --report DIR: a memory plan as a page, per device of a replica.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "polyhal/app/html_reports.hpp"
#include "report/html/html_page.hpp"
#include "report/html/svg_chart.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// What a plan item is, as PopVision groups memory.
std::string kind_of(const MemoryItem& item) {
  const std::string& c = item.category;
  if (c.find("Streaming Memory") != std::string::npos) return "Streaming Memory (off chip)";
  if (c.starts_with("weights") || c == "gradients" || c.starts_with("optimizer state"))
    return "always live: " + (c.starts_with("weights") ? std::string("weights") : c);
  if (c == "activations" || c == "inputs") return "activations and inputs";
  if (c == "pipeline stash") return "pipeline stashes";
  if (c == "temporaries" || c == "workspace" || c == "kernel memory") return "temporaries";
  if (c == "code and vertex state" || c == "process") return "code";
  return c;
}

/// The device's tile count when its property table gives one (the IPU model).
std::optional<std::uint64_t> tiles_of(const DeviceProperties& device) {
  for (const auto& p : device.table) {
    if (p.name != "tiles") continue;
    std::uint64_t tiles = 0;
    const auto [end, error] =
        std::from_chars(p.value.data(), p.value.data() + p.value.size(), tiles);
    if (error == std::errc{} && tiles > 0) return tiles;
  }
  return std::nullopt;
}

html::Bar bar_of(const std::string& label, const MemoryReport& report, double divisor, bool on_chip,
                 const std::string& unit) {
  html::Bar bar{label, {}, std::nullopt};
  std::vector<std::string> order;
  std::map<std::string, double> sums;
  std::map<std::string, std::string> parts;
  for (const auto& item : report.items) {
    std::string kind = kind_of(item);
    if ((kind == "Streaming Memory (off chip)") == on_chip) continue;
    if (!on_chip) kind = item.category;  // off chip: which state
    if (!sums.contains(kind)) order.push_back(kind);
    sums[kind] += static_cast<double>(item.bytes) / divisor;
    parts[kind] += fmt::format("\n{} {}: {:.1f} {}", item.category, item.name,
                               static_cast<double>(item.bytes) / divisor, unit);
  }
  for (const auto& kind : order)
    bar.segments.push_back(
        {kind, sums[kind], fmt::format("{}: {:.1f} {}{}", kind, sums[kind], unit, parts[kind])});
  return bar;
}

}  // namespace

std::string memory_report_html(const MemoryPage& page) {
  const DeviceProperties& d = page.device;
  const bool model = d.mode == DeviceMode::model;
  const auto tiles = tiles_of(d);
  std::string body = fmt::format(
      "<h1>Memory plan</h1><p class=\"sub\">{} on {} ({}){}; {} device{} per replica, {} "
      "replica{}</p>",
      html::escape(page.title), html::escape(d.name), html::escape(d.product),
      model ? " <span class=\"estimate\">device model: planned, not measured</span>" : "",
      page.parts.size(), page.parts.size() == 1 ? "" : "s", page.replicas,
      page.replicas == 1 ? "" : "s");

  // Every device of a replica against its capacity.
  html::BarChart devices{"Memory per device (MiB), against its capacity", "MiB", {}, 1000};
  bool fits = true;
  for (const auto& [label, report] : page.parts) {
    auto bar = bar_of(label, report, kMiB, true, "MiB");
    if (model || report.capacity_bytes < 4 * std::max<std::uint64_t>(report.required_bytes, 1))
      bar.limit = static_cast<double>(report.capacity_bytes) / kMiB;
    devices.bars.push_back(std::move(bar));
    fits = fits && report.fits;
  }
  if (page.measured_peak_bytes)
    devices.bars.push_back(
        {"measured peak (resident)",
         {{"measured peak", static_cast<double>(*page.measured_peak_bytes) / kMiB,
           "the process's peak resident memory over the run (measured)"}},
         std::nullopt});
  body += fmt::format("<h2>{}</h2>", fits ? "Fits" : "Does not fit");
  body += html::stacked_bars(devices);

  if (tiles) {
    // Poplar spreads tensors over the tiles; the model spreads each evenly,
    // so this is every tile's share, which the fullest tile exceeds.
    html::BarChart per_tile{
        fmt::format("Per tile (KiB of each of {} tiles), an even spread", *tiles), "KiB", {}, 1000};
    for (const auto& [label, report] : page.parts) {
      auto bar = bar_of(label, report, 1024.0 * static_cast<double>(*tiles), true, "KiB");
      bar.limit = static_cast<double>(report.capacity_bytes) / 1024.0 / static_cast<double>(*tiles);
      per_tile.bars.push_back(std::move(bar));
    }
    body += html::stacked_bars(per_tile);
    body +=
        "<p class=\"note\">polyhal's IPU model plans memory per IPU and spreads it evenly "
        "over the tiles: it has no tile mapping of each tensor, so it cannot show which "
        "tiles are the most loaded (PopVision shows that from Poplar's own mapping).</p>";
    html::BarChart streaming{"Streaming Memory per IPU (MiB, off chip)", "MiB", {}, 1000};
    for (const auto& [label, report] : page.parts) {
      auto bar = bar_of(label, report, kMiB, false, "MiB");
      if (!bar.segments.empty()) streaming.bars.push_back(std::move(bar));
    }
    body += html::stacked_bars(streaming);
  }

  // The plan item by item.
  for (const auto& [label, report] : page.parts) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& item : report.items) {
      const double share =
          report.capacity_bytes > 0
              ? 100.0 * static_cast<double>(item.bytes) / static_cast<double>(report.capacity_bytes)
              : 0.0;
      rows.push_back({html::escape(kind_of(item)), html::escape(item.category),
                      html::escape(item.name),
                      fmt::format("{:.1f}", static_cast<double>(item.bytes) / kMiB),
                      fmt::format("{:.1f}%", share)});
    }
    body += fmt::format("<h2>{}: {:.1f} of {:.1f} MiB{}</h2>", html::escape(label),
                        static_cast<double>(report.required_bytes) / kMiB,
                        static_cast<double>(report.capacity_bytes) / kMiB,
                        report.fits ? "" : " (does not fit)");
    body += html::table({"kind", "category", "item", "MiB", "of capacity"}, rows);
    for (const auto& note : report.notes)
      body += "<p class=\"note\">" + html::escape(note) + "</p>";
  }
  body +=
      "<p class=\"note\">Written by polyhal from the plan it checks before a run (the same "
      "numbers as the text report).</p>";
  return html::page("polyhal memory: " + page.title, body);
}

void write_html_report(const std::filesystem::path& file, const std::string& html) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  detail::write_file_atomically(file, html);
}

}  // namespace polyhal
