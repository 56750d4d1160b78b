#pragma once
// Text inference packs its lines into rows: several sequences share a row
// of model.seq_len tokens, each attending only to itself (packed attention),
// so no compute goes to padding. The lines keep their file order.
#include <cstdint>
#include <vector>

namespace polyhal {

/// One sequence in a row: which line, where it starts, how many tokens.
struct PackedSlot {
  std::size_t example = 0;
  std::int64_t offset = 0, length = 0;
};

/// A batch: `rows` rows of slots, each row's slots end to end from 0.
struct PackedBatch {
  std::vector<std::vector<PackedSlot>> rows;
};

/// Next-fit in file order: a line goes into the current row while its
/// tokens fit, else starts the next row; `rows_per_batch` rows make a batch
/// (the last may have fewer). `lengths[i]` is line i's token count, each in
/// [1, seq]. At most `max_per_row` sequences share a row (the attention
/// mask numbers them 1..K).
std::vector<PackedBatch> pack_lines(const std::vector<std::int64_t>& lengths, std::int64_t seq,
                                    std::int64_t rows_per_batch, std::int64_t max_per_row);

}  // namespace polyhal
