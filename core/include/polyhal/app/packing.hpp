#pragma once
/// @file packing.hpp
/// Sequence packing without cross-contamination (Krell et al., 2021,
/// "Efficient Sequence Packing without Cross-contamination"): several short
/// sequences share one row of the maximum length, and attention stays inside
/// each sequence, so padding is not computed.
///
/// Both algorithms work on the histogram of sequence lengths and return
/// strategies: a multiset of lengths that fits one row, and how many rows
/// use it. assign_packs() turns strategies into packs of sample indices.
#include <cstdint>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// Lengths packed together (shortest first) and how many rows use them.
struct PackStrategy {
  std::vector<std::int64_t> lengths;
  std::int64_t count = 0;
};

/// SPFHP, shortest-pack-first histogram packing: lengths from the longest
/// down, each into the open pack with the most room left that holds it,
/// else a new pack; a pack closes when full or at `max_per_pack` sequences.
/// `histogram[l - 1]` is the number of sequences of length l (1..max_len).
/// The paper's algorithm step for step, so the same histogram gives the same
/// strategies as its reference code (tests/golden/make_packing_golden.py).
std::vector<PackStrategy> spfhp(const std::vector<std::int64_t>& histogram, std::int64_t max_len,
                                std::int64_t max_per_pack);

/// NNLSHP, non-negative least-squares histogram packing: every way of
/// filling a row exactly with at most `max_per_pack` lengths (3 in the
/// paper) is a column of A, and min ||W (A x - histogram)|| over x >= 0
/// (Lawson-Hanson; W weights lengths below 8 by 0.09, as the paper) gives
/// how many rows use each; x is rounded down and the sequences left over are
/// packed by SPFHP. Exact fill strategies need max_per_pack <= 3.
std::vector<PackStrategy> nnlshp(const std::vector<std::int64_t>& histogram, std::int64_t max_len,
                                 std::int64_t max_per_pack);

/// What packing achieved.
struct PackingStats {
  std::int64_t sequences = 0, packs = 0, tokens = 0;
  std::int64_t max_len = 0;
  double efficiency() const;           ///< tokens / (packs x max_len)
  double unpacked_efficiency() const;  ///< tokens / (sequences x max_len)
  double speedup() const;              ///< sequences / packs: rows saved
};

/// Packs of sample indices: strategies filled with the samples of each
/// length in index order (deterministic). A strategy slot whose length has
/// no sample left (NNLSHP's rounding) stays empty. Every index appears once.
std::vector<std::vector<std::int64_t>> assign_packs(const std::vector<std::int64_t>& lengths,
                                                    const std::vector<PackStrategy>& strategies);

/// lengths -> histogram -> algorithm ("spfhp" | "nnlshp") -> packs; throws
/// ConfigError for an unknown algorithm, a length outside 1..max_len or
/// max_per_pack < 1.
std::vector<std::vector<std::int64_t>> pack_sequences(const std::vector<std::int64_t>& lengths,
                                                      std::int64_t max_len,
                                                      std::int64_t max_per_pack,
                                                      const std::string& algorithm,
                                                      PackingStats* stats = nullptr);

}  // namespace polyhal
