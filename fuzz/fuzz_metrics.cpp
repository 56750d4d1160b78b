// Metrics JSON lines (polyhal report): records of any shape, then the page.
#include "fuzz_input.hpp"
#include "polyhal/app/html_reports.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("m.jsonl", data, size);
  try {
    const auto runs = polyhal::read_run_metrics(file);
    (void)polyhal::run_report_html(runs);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
