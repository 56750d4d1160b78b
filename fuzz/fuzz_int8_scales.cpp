// The int8 scales file (model.int8_scales): JSON, names, values, dimensions.
#include "fuzz_input.hpp"
#include "polyhal/app/int8_scales.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("scales.json", data, size);
  polyhal::BertConfig config;  // a two-layer BERT keeps the seeds small
  config.num_hidden_layers = 2;
  config.hidden_size = 64;
  config.intermediate_size = 128;
  try {
    const auto scales = polyhal::read_int8_scales(file, config, "model.int8_scales");
    polyhal::check_int8_fingerprint(scales, "fnv1a64:0000000000000000", file, "model.int8_scales");
  } catch (const polyhal::Error&) {
  }
  return 0;
}
