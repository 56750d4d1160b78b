// A multi-stage recipe: its keys, stages, names, config paths and overrides.
#include "fuzz_input.hpp"
#include "polyhal/app/recipe.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto stage = [] {
    const std::string text = "backend: cpu\ntask: pretrain\nsteps: 1\n";
    return polyhal::fuzz::as_file("stage.yaml", reinterpret_cast<const std::uint8_t*>(text.data()),
                                  text.size());
  }();
  (void)stage;
  const auto file = polyhal::fuzz::as_file("recipe.yaml", data, size);
  try {
    if (polyhal::is_recipe(file)) (void)polyhal::read_recipe(file);
  } catch (const polyhal::Error&) {
  }
  return 0;
}
