// Safetensors weights: header length, JSON header, dtypes, shapes, offsets.
#include "fuzz_input.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = polyhal::fuzz::as_file("model.safetensors", data, size);
  try {
    polyhal::read_safetensors(file);
  } catch (const polyhal::Error&) {
  }
  try {
    polyhal::read_safetensors_metadata(file);
  } catch (const polyhal::Error&) {
  }
  try {
    polyhal::read_safetensors_shapes(file);  // the header alone: validate's check of the weights
  } catch (const polyhal::Error&) {
  }
  return 0;
}
