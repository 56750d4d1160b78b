// Attention over packed rows (kernel.hpp attention_allows): two sequences
// in one row give each token the context it gets with its sequence alone in
// a row, forward and backward, on the CPU kernels and the reference kernels
// the device models run.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>

#include "polyhal/kernel.hpp"
#include "polyhal/train_kernels.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

constexpr std::int64_t kSeq = 8, kHeads = 2, kHidden = 8;

Tensor upload(Device& device, DType type, const Shape& shape, const void* data) {
  Tensor t = device.allocate_tensor(type, shape, "test");
  device.copy_from_host(*t.buffer, data, t.bytes());
  return t;
}

std::vector<float> download(Device& device, const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  device.copy_to_host(out.data(), *t.buffer, t.bytes());
  return out;
}

/// QKV rows of token `token` of sequence `which` (any fixed values).
std::vector<float> qkv_row(int which, int token) {
  std::vector<float> row(3 * kHidden);
  for (std::size_t c = 0; c < row.size(); ++c)
    row[c] = std::sin(0.7f * static_cast<float>(c) + 1.3f * static_cast<float>(token) +
                      2.1f * static_cast<float>(which));
  return row;
}

struct Layout {
  std::vector<float> qkv;          // [2 * kSeq, 3H]: batch 2
  std::vector<std::int32_t> mask;  // [2 * kSeq]
};

/// Packed: row 0 = A (5 tokens, mask 1) then B (2 tokens, mask 2) then padding;
/// row 1 all padding but its first token. Apart: row 0 = A, row 1 = B.
Layout packed() {
  Layout l;
  l.qkv.assign(2 * kSeq * 3 * kHidden, 0.0f);
  l.mask.assign(2 * kSeq, 0);
  for (int t = 0; t < 7; ++t) {
    const auto row = t < 5 ? qkv_row(0, t) : qkv_row(1, t - 5);
    std::copy(row.begin(), row.end(), l.qkv.begin() + t * 3 * kHidden);
    l.mask[static_cast<std::size_t>(t)] = t < 5 ? 1 : 2;
  }
  l.mask[kSeq] = 1;  // a one-token second row
  const auto lone = qkv_row(2, 0);
  std::copy(lone.begin(), lone.end(), l.qkv.begin() + kSeq * 3 * kHidden);
  return l;
}

Layout apart() {
  Layout l;
  l.qkv.assign(2 * kSeq * 3 * kHidden, 0.0f);
  l.mask.assign(2 * kSeq, 0);
  for (int t = 0; t < 5; ++t) {
    const auto row = qkv_row(0, t);
    std::copy(row.begin(), row.end(), l.qkv.begin() + t * 3 * kHidden);
    l.mask[static_cast<std::size_t>(t)] = 1;
  }
  for (int t = 0; t < 2; ++t) {
    const auto row = qkv_row(1, t);
    std::copy(row.begin(), row.end(), l.qkv.begin() + (kSeq + t) * 3 * kHidden);
    l.mask[static_cast<std::size_t>(kSeq + t)] = 1;
  }
  return l;
}

/// Token t of the packed layout is token where[t] of the apart layout.
constexpr std::array<int, 7> kWhere{0, 1, 2, 3, 4, kSeq, kSeq + 1};

TEST(PackedAttention, EachSequenceSeesOnlyItselfInInference) {
  for (const char* backend : {"cpu", "ipu", "gaudi"}) {
    auto device = test::first_device(backend);
    const KernelDesc desc{OpKind::attention,
                          DType::f32,
                          {{2 * kSeq, 3 * kHidden}, {2, kSeq}},
                          AttentionAttrs{2, kSeq, kHeads}};
    const auto run = [&](const Layout& l) {
      auto kernel = device->prepare_kernel(desc);
      const Tensor qkv = upload(*device, DType::f32, {2 * kSeq, 3 * kHidden}, l.qkv.data());
      const Tensor mask = upload(*device, DType::i32, {2, kSeq}, l.mask.data());
      const Tensor ctx = device->allocate_tensor(DType::f32, {2 * kSeq, kHidden}, "ctx");
      kernel->run(std::array{qkv, mask}, std::array{ctx});
      return download(*device, ctx);
    };
    const auto p = run(packed()), a = run(apart());
    for (int t = 0; t < 7; ++t)
      for (int c = 0; c < kHidden; ++c)
        ASSERT_NEAR(p[static_cast<std::size_t>(t * kHidden + c)],
                    a[static_cast<std::size_t>(kWhere[static_cast<std::size_t>(t)] * kHidden + c)],
                    1e-5)
            << backend << " token " << t;
  }
}

TEST(PackedAttention, EachSequenceSeesOnlyItselfInTraining) {
  for (const char* backend : {"cpu", "ipu", "gaudi"}) {
    auto device = test::first_device(backend);
    const AttentionAttrs attrs{2, kSeq, kHeads};
    const KernelDesc forward{
        OpKind::attention_train, DType::f32, {{2 * kSeq, 3 * kHidden}, {2, kSeq}}, attrs};
    const KernelDesc backward{
        OpKind::attention_backward,
        DType::f32,
        {{2 * kSeq, kHidden}, {2 * kSeq, 3 * kHidden}, {2, kHeads, kSeq, kSeq}, {2, kSeq}},
        attrs};
    std::vector<float> dctx(2 * kSeq * kHidden);
    const auto run = [&](const Layout& l, const std::array<int, 7>& where) {
      // The same upstream gradient for the same token in both layouts.
      std::fill(dctx.begin(), dctx.end(), 0.0f);
      for (int t = 0; t < 7; ++t)
        for (int c = 0; c < kHidden; ++c)
          dctx[static_cast<std::size_t>(where[static_cast<std::size_t>(t)] * kHidden + c)] =
              std::cos(0.3f * static_cast<float>(t * kHidden + c));
      auto f = device->prepare_kernel(forward);
      auto b = device->prepare_kernel(backward);
      const Tensor qkv = upload(*device, DType::f32, {2 * kSeq, 3 * kHidden}, l.qkv.data());
      const Tensor mask = upload(*device, DType::i32, {2, kSeq}, l.mask.data());
      const Tensor ctx = device->allocate_tensor(DType::f32, {2 * kSeq, kHidden}, "ctx");
      const Tensor probs = device->allocate_tensor(DType::f32, {2, kHeads, kSeq, kSeq}, "probs");
      f->run(std::array{qkv, mask}, std::array{ctx, probs});
      const Tensor grad = upload(*device, DType::f32, {2 * kSeq, kHidden}, dctx.data());
      const Tensor dqkv = device->allocate_tensor(DType::f32, {2 * kSeq, 3 * kHidden}, "dqkv");
      b->run(std::array{grad, qkv, probs, mask}, std::array{dqkv});
      return std::pair{download(*device, ctx), download(*device, dqkv)};
    };
    constexpr std::array<int, 7> same{0, 1, 2, 3, 4, 5, 6};
    const auto [pc, pd] = run(packed(), same);
    const auto [ac, ad] = run(apart(), kWhere);
    for (int t = 0; t < 7; ++t) {
      const auto w = static_cast<std::size_t>(kWhere[static_cast<std::size_t>(t)]);
      for (int c = 0; c < kHidden; ++c)
        ASSERT_NEAR(pc[static_cast<std::size_t>(t * kHidden + c)], ac[w * kHidden + c], 1e-5)
            << backend << " ctx token " << t;
      for (int c = 0; c < 3 * kHidden; ++c)
        ASSERT_NEAR(pd[static_cast<std::size_t>(t * 3 * kHidden + c)], ad[w * 3 * kHidden + c],
                    1e-5)
            << backend << " dqkv token " << t;
    }
  }
}

/// Values in [-1, 1] from a seed, deterministic.
std::vector<float> waves(std::size_t count, float seed) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = std::sin(0.37f * static_cast<float>(i) * seed + seed);
  return out;
}

/// The largest |a - b| over the largest |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double error = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    error = std::max(error, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return scale > 0 ? error / scale : error;
}

// Rows long enough for the CPU to compute each sequence's block on its own
// window (64-token granules) instead of the whole S x S: the context, the
// probabilities (zero between sequences) and dQKV match the reference
// kernels, with padding (which attends every real token), attention dropout
// and bf16 storage.
TEST(PackedAttention, CpuBlocksMatchTheReferenceOnLongRows) {
  constexpr std::int64_t kRows = 2, kLong = 256, kH = 32, kHeadsHere = 4;
  std::vector<std::int32_t> mask(kRows * kLong, 0);
  const std::vector<std::vector<std::int64_t>> lengths{{40, 100, 70}, {200, 30}};
  for (std::int64_t r = 0; r < kRows; ++r) {
    std::int64_t at = r * kLong;
    for (std::size_t q = 0; q < lengths[static_cast<std::size_t>(r)].size(); ++q)
      for (std::int64_t t = 0; t < lengths[static_cast<std::size_t>(r)][q]; ++t)
        mask[static_cast<std::size_t>(at++)] = static_cast<std::int32_t>(q + 1);
  }
  const auto qkv_values = waves(kRows * kLong * 3 * kH, 1.1f);
  const auto dctx_values = waves(kRows * kLong * kH, 0.7f);
  const std::vector<std::int32_t> rng{3, 5};
  for (const DType storage : {DType::f32, DType::bf16}) {
    if (storage == DType::bf16 && test::cpu_without_bf16()) continue;
    for (const double dropout : {0.0, 0.1}) {
      AttentionAttrs attrs{kRows, kLong, kHeadsHere, dropout, 4};
      KernelDesc forward{OpKind::attention_train,
                         DType::f32,
                         {{kRows * kLong, 3 * kH}, {kRows, kLong}},
                         attrs,
                         storage};
      KernelDesc backward{
          OpKind::attention_backward,
          DType::f32,
          {{kRows * kLong, kH}, {kRows * kLong, 3 * kH}, {kRows, kHeadsHere, kLong, kLong}},
          attrs,
          storage};
      if (dropout > 0) {
        forward.input_shapes.push_back({2});
        backward.input_shapes.push_back({2});
      }
      backward.input_shapes.push_back({kRows, kLong});
      const auto run = [&](const char* backend) {
        auto device = test::first_device(backend);
        const auto stored = [&](const Shape& shape, const std::vector<float>& values) {
          Tensor t = device->allocate_tensor(storage, shape, "test");
          std::vector<std::uint16_t> bits(values.size());
          for (std::size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16_bits(values[i]);
          device->copy_from_host(
              *t.buffer,
              storage == DType::bf16 ? static_cast<const void*>(bits.data()) : values.data(),
              t.bytes());
          return t;
        };
        const auto read = [&](const Tensor& t) {
          std::vector<float> out(static_cast<std::size_t>(t.numel()));
          if (storage == DType::f32) {
            device->copy_to_host(out.data(), *t.buffer, t.bytes());
            return out;
          }
          std::vector<std::uint16_t> bits(out.size());
          device->copy_to_host(bits.data(), *t.buffer, t.bytes());
          for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits[i]) << 16);
          return out;
        };
        const Tensor qkv = stored({kRows * kLong, 3 * kH}, qkv_values);
        const Tensor m = upload(*device, DType::i32, {kRows, kLong}, mask.data());
        const Tensor seeds = upload(*device, DType::i32, {2}, rng.data());
        const Tensor ctx = device->allocate_tensor(storage, {kRows * kLong, kH}, "ctx");
        const Tensor probs =
            device->allocate_tensor(storage, {kRows, kHeadsHere, kLong, kLong}, "probs");
        std::vector<Tensor> in{qkv, m};
        if (dropout > 0) in.push_back(seeds);
        device->prepare_kernel(forward)->run(in, std::array{ctx, probs});
        const Tensor grad = stored({kRows * kLong, kH}, dctx_values);
        const Tensor dqkv = device->allocate_tensor(storage, {kRows * kLong, 3 * kH}, "dqkv");
        std::vector<Tensor> back{grad, qkv, probs};
        if (dropout > 0) back.push_back(seeds);
        back.push_back(m);
        device->prepare_kernel(backward)->run(back, std::array{dqkv});
        return std::array{read(ctx), read(probs), read(dqkv)};
      };
      const auto cpu = run("cpu"), reference = run("gaudi");
      const double tolerance = storage == DType::bf16 ? 2e-2 : 1e-5;
      const char* names[3] = {"ctx", "probs", "dqkv"};
      for (std::size_t o = 0; o < 3; ++o) {
        EXPECT_LT(relative_error(cpu[o], reference[o]), tolerance)
            << names[o] << " " << dtype_name(storage) << " dropout " << dropout;
      }
      // Between two sequences the probabilities are exactly zero.
      const auto& p = cpu[1];
      EXPECT_EQ(p[static_cast<std::size_t>(10 * kLong + 150)], 0.0f);  // row 0: A's query, C's key
      EXPECT_GT(p[static_cast<std::size_t>(10 * kLong + 20)], 0.0f);
    }
  }
}

// Inference attention on the CPU computes each sequence on its own tokens
// (omp_sequence_attention.hpp): sequences of odd lengths packed in a row,
// one sequence with padding in another, padding attending every real token;
// the context matches the reference kernels, at head widths the vector
// loops fill (32), half fill (24: one register of the last 16) and do not
// take (12). Sequence lengths leave 3, 1, 1 and 2 queries of a group of 4.
TEST(PackedAttention, CpuInferenceComputesEachSequenceOnItsOwnTokens) {
  constexpr std::int64_t kRows = 2, kRow = 128, kHeadsHere = 4;
  std::vector<std::int32_t> mask(kRows * kRow, 0);
  const std::vector<std::int64_t> lengths{23, 1, 37, 30};
  std::int64_t at = 0;
  for (std::size_t q = 0; q < lengths.size(); ++q)
    for (std::int64_t t = 0; t < lengths[q]; ++t)
      mask[static_cast<std::size_t>(at++)] = static_cast<std::int32_t>(q + 1);
  std::fill_n(mask.begin() + kRow, 77, 1);  // row 1: one sequence, then padding
  for (const std::int64_t h : {128, 96, 48}) {
    const auto qkv_values = waves(static_cast<std::size_t>(kRows * kRow * 3 * h), 0.9f);
    const KernelDesc desc{OpKind::attention,
                          DType::f32,
                          {{kRows * kRow, 3 * h}, {kRows, kRow}},
                          AttentionAttrs{kRows, kRow, kHeadsHere}};
    std::string implementation;
    const auto run = [&](const char* backend) {
      auto device = test::first_device(backend);
      auto kernel = device->prepare_kernel(desc);
      if (std::string(backend) == "cpu") implementation = kernel->implementation();
      const Tensor qkv = upload(*device, DType::f32, {kRows * kRow, 3 * h}, qkv_values.data());
      const Tensor m = upload(*device, DType::i32, {kRows, kRow}, mask.data());
      const Tensor ctx = device->allocate_tensor(DType::f32, {kRows * kRow, h}, "ctx");
      kernel->run(std::array{qkv, m}, std::array{ctx});
      return download(*device, ctx);
    };
    const auto cpu = run("cpu"), reference = run("gaudi");
    EXPECT_LT(relative_error(cpu, reference), 1e-5) << "hidden " << h << ": " << implementation;
    EXPECT_NE(implementation.find("sequences on their own tokens"), std::string::npos)
        << implementation;
  }
}

}  // namespace
}  // namespace polyhal
