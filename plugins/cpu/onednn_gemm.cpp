#include "onednn_gemm.hpp"
#include "onednn_api.hpp"

namespace polyhal::cpu {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

Gemm::Gemm(const dnnl::engine& engine, const dnnl::memory::desc& a_md,
           const dnnl::memory::desc& b_md, const dnnl::memory::desc& c_md, bool accumulate,
           bool with_bias, dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);  // C += A B
    attr.set_post_ops(sum);
  }
  const dnnl::memory::desc bias_md =
      with_bias ? dnnl::memory::desc({1, onednn::dims_of(c_md)[1]}, dt::f32, tag::ab)
                : dnnl::memory::desc();
  pd = onednn::matmul(engine, a_md, b_md, bias_md, c_md, attr);
  primitive = dnnl::matmul(pd);
  a = dnnl::memory(a_md, engine, DNNL_MEMORY_NONE);
  b = dnnl::memory(b_md, engine, DNNL_MEMORY_NONE);
  c = dnnl::memory(c_md, engine, DNNL_MEMORY_NONE);
  scratchpad = dnnl::memory(pd.scratchpad_desc(), engine);
  args = {{DNNL_ARG_SRC, a},
          {DNNL_ARG_WEIGHTS, b},
          {DNNL_ARG_DST, c},
          {DNNL_ARG_SCRATCHPAD, scratchpad}};
  if (with_bias) {
    bias = dnnl::memory(bias_md, engine, DNNL_MEMORY_NONE);
    args[DNNL_ARG_BIAS] = bias;
  }
}

void Gemm::run(dnnl::stream& stream, const void* pa, const void* pb, void* pc, const float* pbias) {
  a.set_data_handle(const_cast<void*>(pa));
  b.set_data_handle(const_cast<void*>(pb));
  c.set_data_handle(pc);
  if (pbias) bias.set_data_handle(const_cast<float*>(pbias));
  primitive.execute(stream, args);
}

void Gemm::run(dnnl::stream& stream, const void* pa, const void* pb, void* pc,
               const std::unordered_map<int, dnnl::memory>& extra) {
  a.set_data_handle(const_cast<void*>(pa));
  b.set_data_handle(const_cast<void*>(pb));
  c.set_data_handle(pc);
  auto all = args;
  all.insert(extra.begin(), extra.end());
  primitive.execute(stream, all);
}

}  // namespace polyhal::cpu
