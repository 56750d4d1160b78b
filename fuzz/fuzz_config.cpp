// The YAML run config: syntax, aliases, keys, values, --set overrides.
#include "fuzz_input.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("config.yaml", data, size);
  try {
    polyhal::load_run_config(file, {"model.seq_len=64"}, polyhal::task_schemas());
  } catch (const polyhal::Error&) {
  }
  return 0;
}
