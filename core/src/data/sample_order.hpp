#pragma once
// The order a pre-training source's rows are visited in (inside libpolyhal).
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "polyhal/app/data_settings.hpp"
#include "polyhal/app/pretraining_data.hpp"

namespace polyhal {

/// The row stream position `position` (across epochs) reads, and how the
/// log says the order.
struct SampleOrder {
  std::function<std::int64_t(std::uint64_t)> row_at;
  std::string description;
};

/// data.shuffle's order over `rows` randomly readable rows: another seeded
/// permutation each epoch (sample_at), or in order.
inline SampleOrder sample_order(const DataSection& data, std::int64_t rows) {
  const std::uint64_t seed = data.seed;
  const bool shuffle = data.shuffle;
  return {[=](std::uint64_t position) { return sample_at(position, rows, seed, shuffle); },
          shuffle ? fmt::format("shuffled per epoch (seed {})", seed) : "in order"};
}

}  // namespace polyhal
