#pragma once
/// @file reference_kernels.hpp
/// Portable reference kernels (f32 math, oneTBB-parallel) that any plugin may
/// register. Device models use them with their own numerics: what the inputs
/// are rounded to, what the accumulator is rounded to, how the output rounds.
#include <cstdint>
#include <memory>
#include <span>

#include "polyhal/kernel.hpp"
#include "polyhal/parallel.hpp"

namespace polyhal {

/// How a reference matmul rounds.
struct MatMulNumerics {
  /// f32: accumulate in f32 (MME, AMX, oneDNN). f16: round the running sum to
  /// f16 after every addition ("fp16 partials" on the IPU).
  DType accumulate = DType::f32;
  /// Round the output stochastically (f16 outputs only), seeded per kernel.
  bool stochastic_rounding = false;
  std::uint64_t seed = 0;
};

/// Prepares a reference matmul (see kernel.hpp for the op's contract). Its
/// f32 scratch is allocated once, on the first run (so planning a workload
/// that will not fit costs nothing), and reused by every later run.
std::unique_ptr<Kernel> make_reference_matmul(const KernelDesc& desc, MatMulNumerics numerics);

/// Registers reference kernels for every op in kernel.hpp, for each of
/// `dtypes`, computing with `numerics`. A plugin registers its own faster
/// kernels afterwards to replace some of them.
/// The training kernels run on `parallel` (oneTBB when empty).
void register_reference_kernels(KernelRegistry& registry, const std::vector<DType>& dtypes,
                                MatMulNumerics numerics, ParallelFor parallel = {});

/// Shared by every "embedding" kernel: checks the three tables against the
/// sequence length (returns the hidden size; `seq` 0 when each token's
/// position is an input, checked per run by check_position_ids) and, per
/// run, every id and token type against the tables; throws RuntimeFailure
/// naming the offending token.
std::int64_t check_embedding_tables(std::span<const Tensor> tables, std::int64_t seq);
void check_embedding_ids(const std::int32_t* ids, const std::int32_t* types, std::int64_t tokens,
                         std::span<const Tensor> tables);
/// Explicit position ids (packed rows restart them per sequence) against the
/// position table's rows; throws RuntimeFailure naming the token.
void check_position_ids(const std::int32_t* positions, std::int64_t tokens, std::int64_t rows);

/// Checks a matmul desc: two 2-D inputs with matching inner dimension.
/// Returns {M, N, K}; throws RuntimeFailure naming the shapes otherwise.
struct MatMulDims {
  std::int64_t m, n, k;
};
MatMulDims matmul_dims(const KernelDesc& desc);

}  // namespace polyhal
