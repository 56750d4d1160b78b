// Collectives: single rank and in-process groups, for f32, bf16 and f16.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "polyhal/collective.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Runs `body(communicator)` on `ranks` threads of one InProcessGroup.
template <class Body>
void on_ranks(int ranks, Body body) {
  InProcessGroup group(ranks);
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Communicator>> communicators;
  for (int r = 0; r < ranks; ++r) communicators.push_back(group.communicator(r));
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { body(*communicators[r]); });
  for (auto& t : threads) t.join();
}

TEST(Collective, AllReduceSumMeanMaxF32AcrossTwoAndFourRanks) {
  // Two ranks take the fused in-place path, four the blocked one.
  constexpr std::size_t kCount = 10007;  // not a multiple of ranks or blocks
  for (int ranks : {2, 4}) {
    std::vector<std::vector<float>> results(static_cast<std::size_t>(ranks));
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max}) {
      on_ranks(ranks, [&](Communicator& c) {
        std::vector<float> data(kCount);
        for (std::size_t i = 0; i < kCount; ++i)
          data[i] = static_cast<float>(c.rank() + 1) * static_cast<float>(i % 13);
        c.all_reduce(data.data(), kCount, DType::f32, op);
        results[static_cast<std::size_t>(c.rank())] = data;
      });
      const auto n = static_cast<float>(ranks);
      for (std::size_t i = 0; i < kCount; ++i) {
        const float base = static_cast<float>(i % 13);
        const float want = op == ReduceOp::sum    ? n * (n + 1) / 2 * base
                           : op == ReduceOp::mean ? (n + 1) / 2 * base
                                                  : n * base;
        for (int r = 0; r < ranks; ++r)
          ASSERT_FLOAT_EQ(results[static_cast<std::size_t>(r)][i], want)
              << ranks << " ranks, rank " << r << " i " << i << " " << reduce_op_name(op);
      }
    }
  }
}

TEST(Collective, Bf16AndF16AreReducedInF32AndRoundedOnce) {
  // 256 + 1 + 1 in bf16: pairwise bf16 sums would lose both ones (ulp at 256
  // is 2); reducing in f32 gives 258, which bf16 holds exactly.
  for (DType type : {DType::bf16, DType::f16}) {
    std::vector<std::uint16_t> out(3);
    on_ranks(3, [&](Communicator& c) {
      const float value = c.rank() == 0 ? 256.0f : 1.0f;
      std::uint16_t bits = type == DType::bf16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
      c.all_reduce(&bits, 1, type, ReduceOp::sum);
      out[c.rank()] = bits;
    });
    for (auto bits : out) {
      EXPECT_EQ(type == DType::bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits), 258.0f)
          << dtype_name(type);
    }
  }
}

TEST(Collective, ReduceScatterAllGatherBroadcast) {
  constexpr int kRanks = 3;
  constexpr std::size_t kBlock = 5;
  on_ranks(kRanks, [&](Communicator& c) {
    std::vector<float> send(kRanks * kBlock);
    for (std::size_t i = 0; i < send.size(); ++i)
      send[i] = static_cast<float>(i) + 100.0f * static_cast<float>(c.rank());
    std::vector<float> mine(kBlock);
    c.reduce_scatter(send.data(), mine.data(), kBlock, DType::f32, ReduceOp::sum);
    for (std::size_t i = 0; i < kBlock; ++i) {
      EXPECT_FLOAT_EQ(mine[i], 3.0f * static_cast<float>(c.rank() * kBlock + i) + 300.0f);
    }
    std::vector<float> gathered(kRanks * kBlock);
    c.all_gather(mine.data(), gathered.data(), kBlock, DType::f32);
    for (std::size_t i = 0; i < gathered.size(); ++i)
      EXPECT_FLOAT_EQ(gathered[i], 3.0f * static_cast<float>(i) + 300.0f);
    std::vector<float> value{static_cast<float>(c.rank())};
    c.broadcast(value.data(), 1, DType::f32, 2);
    EXPECT_EQ(value[0], 2.0f);
    c.barrier();
  });
}

TEST(Collective, MismatchedCountsThrowOnEveryRank) {
  std::vector<int> threw(2, 0);
  on_ranks(2, [&](Communicator& c) {
    std::vector<float> data(8, 1.0f);
    try {
      c.all_reduce(data.data(), c.rank() == 0 ? 8 : 4, DType::f32, ReduceOp::sum);
    } catch (const RuntimeFailure& e) {
      threw[c.rank()] = std::string(e.what()).find("collective mismatch") != std::string::npos;
    }
  });
  EXPECT_EQ(threw, (std::vector<int>{1, 1}));
}

TEST(Collective, SingleRankLeavesDataAndCopiesBlocks) {
  auto c = make_single_rank_communicator();
  std::vector<float> data{1, 2, 3};
  c->all_reduce(data.data(), 3, DType::f32, ReduceOp::mean);
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
  std::vector<float> out(3);
  c->all_gather(data.data(), out.data(), 3, DType::f32);
  EXPECT_EQ(out, data);
  EXPECT_THROW(c->broadcast(data.data(), 3, DType::f32, 1), RuntimeFailure);
  EXPECT_THROW(c->all_reduce(data.data(), 1, DType::i32, ReduceOp::sum), RuntimeFailure);
}

}  // namespace
}  // namespace polyhal
