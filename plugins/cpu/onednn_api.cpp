// The one place that knows which oneDNN the plugin is built against: 2.6
// takes operation descriptors and output scales, 3.x primitive descriptors
// made from the engine and runtime scales (onednn_api.hpp).
#include "onednn_api.hpp"

#include <fmt/format.h>

namespace polyhal::cpu::onednn {

std::string version_text() {
  const dnnl_version_t* v = dnnl::version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

md strided(const dnnl::memory::dims& dims, dnnl::memory::data_type type,
           dnnl::memory::dims strides) {
  for (std::size_t i = 0; i < dims.size() && dims.size() > 1; ++i) {
    if (dims[i] != 1) continue;
    strides[i] = i > 0 ? strides[i - 1] : strides[1] * dims[1];
  }
  return {dims, type, strides};
}

#if DNNL_VERSION_MAJOR >= 3

dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const md& src, const md& weights,
                                    const md& bias, const md& dst,
                                    const dnnl::primitive_attr& attr) {
  return {engine, src, weights, bias, dst, attr};
}

softmax_forward::primitive_desc softmax(const dnnl::engine& engine, const md& src, const md& dst,
                                        int axis, const dnnl::primitive_attr& attr) {
  return {
      engine, dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, src, dst, axis,
      attr};
}

dnnl::eltwise_forward::primitive_desc eltwise(const dnnl::engine& engine, dnnl::prop_kind prop,
                                              dnnl::algorithm algorithm, const md& data,
                                              float alpha, float beta) {
  return {engine, prop, algorithm, data, data, alpha, beta};
}

dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const md& data, float alpha,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  return {engine, algorithm, data, data, data, alpha, 0.0f, hint};
}

dnnl::binary::primitive_desc binary(const dnnl::engine& engine, dnnl::algorithm algorithm,
                                    const md& src0, const md& src1, const md& dst) {
  return {engine, algorithm, src0, src1, dst};
}

dnnl::layer_normalization_forward::primitive_desc layer_normalization(
    const dnnl::engine& engine, dnnl::prop_kind prop, const md& data, float epsilon,
    dnnl::normalization_flags flags, const dnnl::primitive_attr& attr) {
  return {engine, prop, data, data, epsilon, flags, attr};
}

dnnl::convolution_forward::primitive_desc convolution(const dnnl::engine& engine,
                                                      dnnl::prop_kind prop, const md& src,
                                                      const md& weights, const md& dst,
                                                      const ConvolutionShape& shape,
                                                      const dnnl::primitive_attr& attr) {
  return {engine,
          prop,
          dnnl::algorithm::convolution_direct,
          src,
          weights,
          dst,
          shape.strides,
          shape.padding_l,
          shape.padding_r,
          attr};
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& engine, const md& diff_src, const md& weights, const md& diff_dst,
    const ConvolutionShape& shape, const dnnl::convolution_forward::primitive_desc& hint) {
  return {engine,
          dnnl::algorithm::convolution_direct,
          diff_src,
          weights,
          diff_dst,
          shape.strides,
          shape.padding_l,
          shape.padding_r,
          hint};
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& engine, const md& src, const md& diff_weights, const md& diff_dst,
    const ConvolutionShape& shape, const dnnl::convolution_forward::primitive_desc& hint) {
  return {engine,
          dnnl::algorithm::convolution_direct,
          src,
          diff_weights,
          diff_dst,
          shape.strides,
          shape.padding_l,
          shape.padding_r,
          hint};
}

void append_eltwise(dnnl::post_ops& ops, dnnl::algorithm algorithm, float alpha, float beta) {
  ops.append_eltwise(algorithm, alpha, beta);
}

dnnl::memory::dims dims_of(const md& desc) {
  return desc.get_dims();
}

dnnl::cpu_isa newer_tier(NewerTier tier) {
  switch (tier) {
    case NewerTier::avx512_core_amx_fp16:
      return dnnl::cpu_isa::avx512_core_amx_fp16;
    case NewerTier::avx512_core_fp16:
      return dnnl::cpu_isa::avx512_core_fp16;
    case NewerTier::avx2_vnni_2:
      break;
  }
  return dnnl::cpu_isa::avx2_vnni_2;
}

Scales::Scales(dnnl::primitive_attr& attr, Of of, int mask, std::vector<float> values,
               const dnnl::engine& engine)
    : values_(std::move(values)),
      argument_(of == Of::matmul_result ? DNNL_ARG_WEIGHTS : DNNL_ARG_SRC) {
  // oneDNN 3 scales the operands: a matmul's weights scale per output
  // channel (the same mask on [.., K, N] as on the result), a reorder's
  // source; either multiplies the result, as 2.6's output scales did.
  attr.set_scales_mask(argument_, mask);
  memory_ = dnnl::memory({{static_cast<dnnl::memory::dim>(values_.size())},
                          dnnl::memory::data_type::f32,
                          dnnl::memory::format_tag::a},
                         engine, values_.data());
}

void Scales::add_to(std::unordered_map<int, dnnl::memory>& args) const {
  if (memory_) args[DNNL_ARG_ATTR_SCALES | argument_] = memory_;
}

SourceZeroPoint::SourceZeroPoint(dnnl::primitive_attr& attr, std::int32_t value,
                                 const dnnl::engine& engine)
    : value_{value} {
  attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
  memory_ = dnnl::memory({{1}, dnnl::memory::data_type::s32, dnnl::memory::format_tag::a}, engine,
                         value_.data());
}

void SourceZeroPoint::add_to(std::unordered_map<int, dnnl::memory>& args) const {
  if (memory_) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = memory_;
}

#else  // oneDNN 2.x

dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const md& src, const md& weights,
                                    const md& bias, const md& dst,
                                    const dnnl::primitive_attr& attr) {
  return {dnnl::matmul::desc(src, weights, bias, dst), attr, engine};
}

softmax_forward::primitive_desc softmax(const dnnl::engine& engine, const md& src, const md& dst,
                                        int axis, const dnnl::primitive_attr& attr) {
  return {softmax_forward::desc(dnnl::prop_kind::forward_inference,
                                dnnl::algorithm::softmax_accurate, src, dst, axis),
          attr, engine};
}

dnnl::eltwise_forward::primitive_desc eltwise(const dnnl::engine& engine, dnnl::prop_kind prop,
                                              dnnl::algorithm algorithm, const md& data,
                                              float alpha, float beta) {
  return {dnnl::eltwise_forward::desc(prop, algorithm, data, alpha, beta), engine};
}

dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const md& data, float alpha,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  return {dnnl::eltwise_backward::desc(algorithm, data, data, alpha), engine, hint};
}

dnnl::binary::primitive_desc binary(const dnnl::engine& engine, dnnl::algorithm algorithm,
                                    const md& src0, const md& src1, const md& dst) {
  return {dnnl::binary::desc(algorithm, src0, src1, dst), engine};
}

dnnl::layer_normalization_forward::primitive_desc layer_normalization(
    const dnnl::engine& engine, dnnl::prop_kind prop, const md& data, float epsilon,
    dnnl::normalization_flags flags, const dnnl::primitive_attr& attr) {
  return {dnnl::layer_normalization_forward::desc(prop, data, epsilon, flags), attr, engine};
}

dnnl::convolution_forward::primitive_desc convolution(const dnnl::engine& engine,
                                                      dnnl::prop_kind prop, const md& src,
                                                      const md& weights, const md& dst,
                                                      const ConvolutionShape& shape,
                                                      const dnnl::primitive_attr& attr) {
  return {dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src, weights,
                                          dst, shape.strides, shape.padding_l, shape.padding_r),
          attr, engine};
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& engine, const md& diff_src, const md& weights, const md& diff_dst,
    const ConvolutionShape& shape, const dnnl::convolution_forward::primitive_desc& hint) {
  return {dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, diff_src,
                                                weights, diff_dst, shape.strides, shape.padding_l,
                                                shape.padding_r),
          engine, hint};
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& engine, const md& src, const md& diff_weights, const md& diff_dst,
    const ConvolutionShape& shape, const dnnl::convolution_forward::primitive_desc& hint) {
  return {dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src,
                                                   diff_weights, diff_dst, shape.strides,
                                                   shape.padding_l, shape.padding_r),
          engine, hint};
}

void append_eltwise(dnnl::post_ops& ops, dnnl::algorithm algorithm, float alpha, float beta) {
  ops.append_eltwise(1.0f, algorithm, alpha, beta);
}

dnnl::memory::dims dims_of(const md& desc) {
  return desc.dims();
}

dnnl::cpu_isa newer_tier(NewerTier tier) {
  switch (tier) {
    case NewerTier::avx512_core_amx_fp16:
      return dnnl::cpu_isa::avx512_core_amx;
    case NewerTier::avx512_core_fp16:
      return dnnl::cpu_isa::avx512_core_bf16;
    case NewerTier::avx2_vnni_2:
      break;
  }
  return dnnl::cpu_isa::avx2_vnni;
}

Scales::Scales(dnnl::primitive_attr& attr, Of /*of*/, int mask, std::vector<float> values,
               const dnnl::engine& /*engine*/)
    : values_(std::move(values)) {
  attr.set_output_scales(mask, values_);
}

void Scales::add_to(std::unordered_map<int, dnnl::memory>& /*args*/) const {}

SourceZeroPoint::SourceZeroPoint(dnnl::primitive_attr& attr, std::int32_t value,
                                 const dnnl::engine& /*engine*/)
    : value_{value} {
  attr.set_zero_points(DNNL_ARG_SRC, 0, value_);
}

void SourceZeroPoint::add_to(std::unordered_map<int, dnnl::memory>& /*args*/) const {}

#endif

}  // namespace polyhal::cpu::onednn
