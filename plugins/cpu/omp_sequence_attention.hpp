#pragma once
// Inference attention of f32 rows whose mask has block structure (packed
// sequences, or one sequence and its padding): each query attends exactly
// the keys attention_allows admits (its own sequence's tokens; a padding
// query every real token of its row), computed on those keys only. The
// oneDNN block path (onednn_block_attention.hpp) computes windows rounded
// up to 64 tokens, one primitive call per block: for sentences of 20 to 30
// tokens that is 5 to 10 times the products, and the calls' overhead.
#include <cstdint>
#include <vector>

#include "onednn_block_attention.hpp"

namespace polyhal::cpu {

/// ctx [B*S, H] from QKV [B*S, 3H] (f32) for `blocks` (attention_blocks of
/// `mask`), in parallel over (block, head) on the OpenMP pool. `avx2`: the
/// device's ISA choice allows AVX2 and FMA.
void sequence_attention_f32(const float* qkv, const std::int32_t* mask,
                            const std::vector<AttentionBlock>& blocks, const AttentionDims& dims,
                            float* ctx, bool avx2);

/// Bytes of scratch sequence_attention_f32 uses on `threads` threads.
std::uint64_t sequence_attention_bytes(const AttentionDims& dims, int threads);

}  // namespace polyhal::cpu
