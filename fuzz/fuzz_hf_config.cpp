// Hugging Face config.json: JSON, types, model dimensions, and the head
// its architectures and id2label name.
#include "fuzz_input.hpp"
#include "polyhal/app/bert_config.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("config.json", data, size);
  try {
    polyhal::read_hf_config(file).validate("config.json");
  } catch (const polyhal::Error&) {
  }
  try {
    (void)polyhal::read_hf_head(file);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
