// Attention over packed rows (kernel.hpp attention_allows): two sequences
// in one row give each token the context it gets with its sequence alone in
// a row, forward and backward, on the CPU kernels and the reference kernels
// the device models run.
#include <gtest/gtest.h>

#include <array>
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
        {{2 * kSeq, kHidden}, {2 * kSeq, 3 * kHidden}, {2, kHeads, kSeq, kSeq}},
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
      b->run(std::array{grad, qkv, probs}, std::array{dqkv});
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

}  // namespace
}  // namespace polyhal
