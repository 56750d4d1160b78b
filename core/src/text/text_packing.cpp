#include "text/text_packing.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace polyhal {
namespace {

/// Rows in groups of `rows_per_batch`.
std::vector<PackedBatch> into_batches(std::vector<std::vector<PackedSlot>> rows,
                                      std::int64_t rows_per_batch) {
  std::vector<PackedBatch> batches;
  for (auto& row : rows) {
    if (batches.empty() || std::ssize(batches.back().rows) == rows_per_batch)
      batches.emplace_back();
    batches.back().rows.push_back(std::move(row));
  }
  return batches;
}

}  // namespace

std::vector<PackedBatch> pack_lines(const std::vector<std::int64_t>& lengths, std::int64_t seq,
                                    std::int64_t rows_per_batch, std::int64_t max_per_row,
                                    RowPacking packing) {
  if (seq < 1 || rows_per_batch < 1 || max_per_row < 1)
    throw std::invalid_argument("pack_lines: seq, rows and sequences per row must be positive");
  for (const std::int64_t length : lengths)
    if (length < 1 || length > seq)
      throw std::invalid_argument("pack_lines: a line's length is outside [1, seq]");
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (packing == RowPacking::first_fit_decreasing)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<PackedSlot>> rows;
  std::vector<std::int64_t> used;
  for (const std::size_t i : order) {
    const std::int64_t length = lengths[i];
    const auto has_room = [&](std::size_t r) {
      return used[r] + length <= seq && std::ssize(rows[r]) < max_per_row;
    };
    // In order only the last row is open; first-fit tries every row.
    std::size_t r = packing == RowPacking::in_order && !rows.empty() ? rows.size() - 1 : 0;
    while (r < rows.size() && !has_room(r)) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      used.push_back(0);
    }
    rows[r].push_back({i, used[r], length});
    used[r] += length;
  }
  return into_batches(std::move(rows), rows_per_batch);
}

std::vector<PackedBatch> pack_lines(const std::vector<std::int64_t>& lengths, std::int64_t seq,
                                    std::int64_t rows_per_batch, std::int64_t max_per_row) {
  return pack_lines(lengths, seq, rows_per_batch, max_per_row, RowPacking::in_order);
}

}  // namespace polyhal
