#pragma once
// The oneDNN API the CPU plugin builds on, the same for oneDNN 2.6 (Debian
// 12) and 3.x (Debian 13 and later): oneDNN 3.0 removed the operation
// descriptors (matmul::desc, ...), output scales and the scale argument of
// eltwise post-ops. The kernels create primitives through these functions
// and never name a version; the differences live in onednn_api.cpp alone
// (docs/architecture.md, "oneDNN versions").
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace polyhal::cpu::onednn {

using md = dnnl::memory::desc;

#if DNNL_VERSION_MAJOR >= 3
using softmax_forward = dnnl::softmax_forward;
#else
using softmax_forward = dnnl::softmax_v2_forward;
#endif

/// "3.7.2 (cpu runtime OMP)": the library polyhal runs on, as loaded.
std::string version_text();

/// dst = src x weights (+ bias when `bias` is not the empty desc).
dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const md& src, const md& weights,
                                    const md& bias, const md& dst,
                                    const dnnl::primitive_attr& attr = {});
inline dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const md& src,
                                           const md& weights, const md& dst,
                                           const dnnl::primitive_attr& attr = {}) {
  return matmul(engine, src, weights, md(), dst, attr);
}

/// Softmax (the accurate one) along `axis`, for inference.
softmax_forward::primitive_desc softmax(const dnnl::engine& engine, const md& src, const md& dst,
                                        int axis, const dnnl::primitive_attr& attr = {});

/// An elementwise op on `data` (source and destination alike).
dnnl::eltwise_forward::primitive_desc eltwise(const dnnl::engine& engine, dnnl::prop_kind prop,
                                              dnnl::algorithm algorithm, const md& data,
                                              float alpha = 0.0f, float beta = 0.0f);
/// Its backward, with gradients and data all laid out as `data`.
dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const md& data, float alpha,
    const dnnl::eltwise_forward::primitive_desc& hint);

dnnl::binary::primitive_desc binary(const dnnl::engine& engine, dnnl::algorithm algorithm,
                                    const md& src0, const md& src1, const md& dst);

/// Layer normalisation of `data` in place of itself.
dnnl::layer_normalization_forward::primitive_desc layer_normalization(
    const dnnl::engine& engine, dnnl::prop_kind prop, const md& data, float epsilon,
    dnnl::normalization_flags flags, const dnnl::primitive_attr& attr = {});

/// A direct convolution without bias, and its two backward passes.
struct ConvolutionShape {
  dnnl::memory::dims strides, padding_l, padding_r;
};
dnnl::convolution_forward::primitive_desc convolution(const dnnl::engine& engine,
                                                      dnnl::prop_kind prop, const md& src,
                                                      const md& weights, const md& dst,
                                                      const ConvolutionShape& shape,
                                                      const dnnl::primitive_attr& attr = {});
dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& engine, const md& diff_src, const md& weights, const md& diff_dst,
    const ConvolutionShape& shape, const dnnl::convolution_forward::primitive_desc& hint);
dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& engine, const md& src, const md& diff_weights, const md& diff_dst,
    const ConvolutionShape& shape, const dnnl::convolution_forward::primitive_desc& hint);

/// Appends alpha/beta elementwise post-op `algorithm` to `ops`.
void append_eltwise(dnnl::post_ops& ops, dnnl::algorithm algorithm, float alpha = 0.0f,
                    float beta = 0.0f);

/// The ISA tiers oneDNN 3 added above oneDNN 2.6's ladder.
enum class NewerTier { avx512_core_amx_fp16, avx512_core_fp16, avx2_vnni_2 };
/// oneDNN's tier for `tier`; on oneDNN 2.6, which stops below them, the
/// highest tier under it (avx512_core_amx, avx512_core_bf16, avx2_vnni).
dnnl::cpu_isa newer_tier(NewerTier tier);

/// A strided view of `dims` elements. A dimension of size 1 takes the stride
/// of the one outside it (row vectors: the next one in): its stride never
/// addresses anything, and oneDNN 3.7's brgemm matmul misreads a [M, 1]
/// result with strides {N, 1} (wrong rows from the second on; {N, N} is
/// right), which GroupBERT's grouped dense with one output per group makes.
md strided(const dnnl::memory::dims& dims, dnnl::memory::data_type type,
           dnnl::memory::dims strides);

/// The dimensions `desc` describes.
dnnl::memory::dims dims_of(const md& desc);

/// Constant factors a primitive multiplies by: the result of a matmul
/// (per output channel with mask 1 << last dimension, or one factor with
/// mask 0) or of a reorder. oneDNN 2.6 fixes them in the attributes
/// (output scales); oneDNN 3 reads them at execution from a memory, which
/// add_to puts among the arguments. Keep the object alive while the
/// primitive runs.
class Scales {
 public:
  /// What the factors multiply.
  enum class Of { matmul_result, reorder_result };
  Scales() = default;
  Scales(Scales&&) = default;
  Scales& operator=(Scales&&) = default;
  /// Puts `values` on `attr` for the primitive `of` names.
  Scales(dnnl::primitive_attr& attr, Of of, int mask, std::vector<float> values,
         const dnnl::engine& engine);
  /// The execution arguments that carry the factors (none on oneDNN 2.6).
  void add_to(std::unordered_map<int, dnnl::memory>& args) const;

 private:
  std::vector<float> values_;
  dnnl::memory memory_;
  [[maybe_unused]] int argument_ = 0;  // oneDNN 3: the operand the factors scale
};

/// A matmul's zero point of its u8 source, `value` for every element: the
/// sums are of (x - value) x w, computed by oneDNN in s32. oneDNN 2.6 fixes
/// it in the attributes; oneDNN 3 reads it at execution from a memory,
/// which add_to puts among the arguments. Keep the object alive while the
/// primitive runs.
class SourceZeroPoint {
 public:
  SourceZeroPoint() = default;
  SourceZeroPoint(SourceZeroPoint&&) = default;
  SourceZeroPoint& operator=(SourceZeroPoint&&) = default;
  SourceZeroPoint(dnnl::primitive_attr& attr, std::int32_t value, const dnnl::engine& engine);
  /// The execution arguments that carry it (none on oneDNN 2.6).
  void add_to(std::unordered_map<int, dnnl::memory>& args) const;

 private:
  std::vector<std::int32_t> value_;  // on the heap: the memory outlives a move
  dnnl::memory memory_;
};

}  // namespace polyhal::cpu::onednn
