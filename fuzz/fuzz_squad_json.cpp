// SQuAD JSON: structure, answers, answer_start offsets, UTF-8.
#include "fuzz_input.hpp"
#include "polyhal/app/squad_data.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("train.json", data, size);
  try {
    polyhal::read_squad_json(file);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
