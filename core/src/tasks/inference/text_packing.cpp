#include "text_packing.hpp"

#include <stdexcept>

namespace polyhal {

std::vector<PackedBatch> pack_lines(const std::vector<std::int64_t>& lengths, std::int64_t seq,
                                    std::int64_t rows_per_batch, std::int64_t max_per_row) {
  if (seq < 1 || rows_per_batch < 1 || max_per_row < 1)
    throw std::invalid_argument("pack_lines: seq, rows and sequences per row must be positive");
  std::vector<PackedBatch> batches;
  std::vector<PackedSlot> row;
  std::int64_t used = 0;
  const auto close_row = [&] {
    if (row.empty()) return;
    if (batches.empty() || static_cast<std::int64_t>(batches.back().rows.size()) == rows_per_batch)
      batches.emplace_back();
    batches.back().rows.push_back(std::move(row));
    row.clear();
    used = 0;
  };
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const std::int64_t length = lengths[i];
    if (length < 1 || length > seq)
      throw std::invalid_argument("pack_lines: a line's length is outside [1, seq]");
    if (used + length > seq || static_cast<std::int64_t>(row.size()) == max_per_row) close_row();
    row.push_back({i, used, length});
    used += length;
  }
  close_row();
  return batches;
}

}  // namespace polyhal
