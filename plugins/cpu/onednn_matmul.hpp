#pragma once
// matmul through oneDNN: the primitive, its scratchpad and memory objects are
// created once at prepare; run() only rebinds data pointers and executes.
#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "polyhal/kernel.hpp"
#include "polyhal/parallel.hpp"

namespace polyhal::cpu {

/// Throws KernelNotFoundError if oneDNN has no implementation for the desc on
/// the ISA in force.
std::unique_ptr<Kernel> make_onednn_matmul(const KernelDesc& desc, const dnnl::engine& engine);

class PackedWeightCache;
class ThreadScratch;

/// linear (kernel.hpp) through oneDNN matmul with bias and activation post-ops;
/// native, bf16 or f16 products (`avx512`: f16 rounding may use AVX-512).
/// Kernels given the same weights share their packed copy through
/// `packed_weights` (packed_weights.hpp).
std::unique_ptr<Kernel> make_onednn_linear(const KernelDesc& desc, bool avx512,
                                           const dnnl::engine& engine,
                                           std::shared_ptr<PackedWeightCache> packed_weights);

/// linear with LinearMath::int8 (op_schema.hpp) on AMX-INT8, VNNI, or
/// (`weight_max` kInt7Max, int8.hpp) AVX2 / AVX-512 without VNNI;
/// `avx512`: the dynamic quantiser may use AVX-512. Kernels given the same
/// weights (and smoothing) share their quantised, packed copy through
/// `packed_weights`, and the device's kernels their per-run memory through
/// `scratch` (thread_scratch.hpp).
std::unique_ptr<Kernel> make_onednn_int8_linear(const KernelDesc& desc, bool avx512,
                                                float weight_max, const dnnl::engine& engine,
                                                std::shared_ptr<PackedWeightCache> packed_weights,
                                                std::shared_ptr<ThreadScratch> scratch);

/// attention and layernorm (kernel.hpp) through oneDNN primitives; f32
/// attention of block-structured masks (one or more sequences per row) on
/// omp_sequence_attention.hpp (`avx2`: it may use AVX2 and FMA).
std::unique_ptr<Kernel> make_onednn_attention(const KernelDesc& desc, const dnnl::engine& engine,
                                              bool avx2);
std::unique_ptr<Kernel> make_onednn_layernorm(const KernelDesc& desc, const dnnl::engine& engine);

/// ParallelFor (parallel.hpp) on the OpenMP pool.
ParallelFor omp_parallel_for();

/// embedding (kernel.hpp) on the OpenMP pool.
std::unique_ptr<Kernel> make_omp_embedding(const KernelDesc& desc);
/// pretraining_loss (MLM + NSP cross-entropy) on f32 or bf16 storage.
std::unique_ptr<Kernel> make_omp_pretraining_loss(const KernelDesc& desc);
/// embedding_backward touching only the rows a micro-batch used.
std::unique_ptr<Kernel> make_omp_embedding_backward(const KernelDesc& desc);

/// Training GEMMs (train_kernels.hpp "dense", "dense_backward") through oneDNN.
std::unique_ptr<Kernel> make_onednn_dense(const KernelDesc& desc, const dnnl::engine& engine);
std::unique_ptr<Kernel> make_onednn_dense_backward(const KernelDesc& desc,
                                                   const dnnl::engine& engine);

/// GroupBERT's grouped dense and its backward (train_kernels.hpp): one strided
/// oneDNN matmul run per group.
std::unique_ptr<Kernel> make_onednn_grouped_dense(const KernelDesc& desc,
                                                  const dnnl::engine& engine);
std::unique_ptr<Kernel> make_onednn_grouped_dense_backward(const KernelDesc& desc,
                                                           const dnnl::engine& engine);

/// GroupBERT's sequence convolution and its backward through oneDNN's grouped
/// convolution; rows holding packed sequences run on `packed_fallback`.
std::unique_ptr<Kernel> make_onednn_sequence_conv(const KernelDesc& desc,
                                                  const dnnl::engine& engine,
                                                  std::unique_ptr<Kernel> packed_fallback);
std::unique_ptr<Kernel> make_onednn_sequence_conv_backward(const KernelDesc& desc,
                                                           const dnnl::engine& engine,
                                                           std::unique_ptr<Kernel> packed_fallback);

/// Training attention (train_kernels.hpp "attention_train", "attention_backward").
/// `avx512`: the device's ISA choice allows AVX-512 (for the dropout masks).
std::unique_ptr<Kernel> make_onednn_attention_train(const KernelDesc& desc, bool avx512,
                                                    const dnnl::engine& engine);
std::unique_ptr<Kernel> make_onednn_attention_backward(const KernelDesc& desc, bool avx512,
                                                       const dnnl::engine& engine);

/// Training GELU and GroupBERT's swish (train_kernels.hpp "gelu", "swish" and
/// their backward ops) through oneDNN eltwise.
std::unique_ptr<Kernel> make_onednn_eltwise_train(const KernelDesc& desc,
                                                  const dnnl::engine& engine);
/// GroupBERT's gated linear unit (train_kernels.hpp "glu", "glu_backward")
/// through oneDNN eltwise and binary primitives on strided views.
std::unique_ptr<Kernel> make_onednn_glu(const KernelDesc& desc, const dnnl::engine& engine);

[[noreturn]] void throw_no_onednn_implementation(const KernelDesc& desc, const dnnl::error& e);

/// Runs `create` (which builds oneDNN primitive descriptors for `desc`) and
/// turns oneDNN's refusal into KernelNotFoundError at prepare time, so a
/// missing implementation is reported as a missing kernel with its reason.
template <class Create>
auto create_or_refuse(const KernelDesc& desc, Create create) {
  try {
    return create();
  } catch (const dnnl::error& e) {
    throw_no_onednn_implementation(desc, e);
  }
}

/// oneDNN data type for a polyhal dtype.
dnnl::memory::data_type onednn_type(DType type);

}  // namespace polyhal::cpu
