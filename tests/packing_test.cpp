// SPFHP and NNLSHP against the paper's reference algorithms
// (tests/golden/make_packing_golden.py writes packing_golden.json), and the
// packs they make: every sequence once, no pack over the row or the limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "polyhal/app/packing.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::vector<nlohmann::json> golden_cases() {
  std::ifstream in(std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/golden/packing_golden.json");
  return nlohmann::json::parse(in).get<std::vector<nlohmann::json>>();
}

std::vector<std::int64_t> lengths_of(const std::vector<std::int64_t>& histogram) {
  std::vector<std::int64_t> lengths;
  // Interleaved, as a data file would be, not sorted.
  for (std::int64_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t l = 0; l < histogram.size(); ++l) {
      if (histogram[l] > round) {
        lengths.push_back(static_cast<std::int64_t>(l) + 1);
        any = true;
      }
    }
    if (!any) return lengths;
  }
}

void expect_valid_packs(const std::vector<std::vector<std::int64_t>>& packs,
                        const std::vector<std::int64_t>& lengths, std::int64_t max_len,
                        std::int64_t max_per_pack) {
  std::vector<int> seen(lengths.size(), 0);
  for (const auto& pack : packs) {
    ASSERT_FALSE(pack.empty());
    ASSERT_LE(static_cast<std::int64_t>(pack.size()), max_per_pack);
    std::int64_t tokens = 0;
    for (const std::int64_t i : pack) {
      ++seen.at(static_cast<std::size_t>(i));
      tokens += lengths[static_cast<std::size_t>(i)];
    }
    ASSERT_LE(tokens, max_len);
  }
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "sample " << i;
}

TEST(Packing, SpfhpMakesTheReferenceStrategies) {
  for (const auto& c : golden_cases()) {
    const auto histogram = c["histogram"].get<std::vector<std::int64_t>>();
    const auto max_len = c["max_len"].get<std::int64_t>();
    const auto per_pack = c["max_per_pack"].get<std::int64_t>();
    auto strategies = spfhp(histogram, max_len, per_pack);
    std::vector<std::pair<std::vector<std::int64_t>, std::int64_t>> mine;
    for (const auto& s : strategies) mine.emplace_back(s.lengths, s.count);
    std::sort(mine.begin(), mine.end());
    std::vector<std::pair<std::vector<std::int64_t>, std::int64_t>> reference;
    for (const auto& s : c["spfhp"])
      reference.emplace_back(s[0].get<std::vector<std::int64_t>>(), s[1].get<std::int64_t>());
    EXPECT_EQ(mine, reference) << c["name"];

    PackingStats stats;
    const auto lengths = lengths_of(histogram);
    const auto packs = pack_sequences(lengths, max_len, per_pack, "spfhp", &stats);
    expect_valid_packs(packs, lengths, max_len, per_pack);
    EXPECT_EQ(stats.packs, c["spfhp_packs"].get<std::int64_t>()) << c["name"];
    EXPECT_EQ(stats.tokens, c["tokens"].get<std::int64_t>());
  }
}

// NNLS solutions need not be unique, so the check is the outcome: as many
// packs as scipy's Lawson-Hanson gives (within 0.5%), never more than SPFHP.
TEST(Packing, NnlshpPacksAsWellAsTheReference) {
  for (const auto& c : golden_cases()) {
    const auto histogram = c["histogram"].get<std::vector<std::int64_t>>();
    const auto max_len = c["max_len"].get<std::int64_t>();
    const auto per_pack = c["max_per_pack"].get<std::int64_t>();
    const auto lengths = lengths_of(histogram);
    PackingStats stats;
    const auto packs = pack_sequences(lengths, max_len, per_pack, "nnlshp", &stats);
    expect_valid_packs(packs, lengths, max_len, per_pack);
    const auto reference = c["nnlshp_packs"].get<double>();
    EXPECT_NEAR(static_cast<double>(stats.packs), reference, 0.005 * reference + 1) << c["name"];
    EXPECT_LE(stats.packs, c["spfhp_packs"].get<std::int64_t>()) << c["name"];
  }
}

TEST(Packing, StatisticsAndDeterminism) {
  const std::vector<std::int64_t> lengths{8, 8, 4, 4, 16, 2, 2, 12};
  PackingStats stats;
  const auto packs = pack_sequences(lengths, 16, 3, "spfhp", &stats);
  EXPECT_EQ(packs, pack_sequences(lengths, 16, 3, "spfhp"));
  EXPECT_EQ(stats.sequences, 8);
  EXPECT_EQ(stats.tokens, 56);
  // 56 tokens need at least 4 rows of 16; SPFHP finds 4: [16], [12 4], [8 8], [4 2 2]
  EXPECT_EQ(stats.packs, 4);
  EXPECT_DOUBLE_EQ(stats.efficiency(), 56.0 / 64.0);
  EXPECT_DOUBLE_EQ(stats.unpacked_efficiency(), 56.0 / 128.0);
  EXPECT_DOUBLE_EQ(stats.speedup(), 2.0);
  // One per pack is no packing at all.
  EXPECT_EQ(pack_sequences(lengths, 16, 1, "spfhp").size(), lengths.size());
}

TEST(Packing, BadInputIsAConfigError) {
  EXPECT_THROW(pack_sequences({3, 20}, 16, 3, "spfhp"), ConfigError);  // longer than a row
  EXPECT_THROW(pack_sequences({3, 0}, 16, 3, "spfhp"), ConfigError);   // empty sequence
  EXPECT_THROW(pack_sequences({3}, 16, 3, "best"), ConfigError);
  EXPECT_THROW(pack_sequences({3}, 16, 0, "spfhp"), ConfigError);
  EXPECT_THROW(pack_sequences({3}, 16, 4, "nnlshp"), ConfigError);
  try {
    pack_sequences({3, 20}, 16, 3, "spfhp");
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "packing: sample 1 has 20 tokens, outside 1..16");
  }
}

}  // namespace
}  // namespace polyhal
