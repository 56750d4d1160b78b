#pragma once
// Attention over packed rows block by block: each sequence of a row attends
// only to itself (kernel.hpp attention_allows), so its scores are one
// n x n block on the diagonal of the row's S x S, not the whole square.
// Blocks are computed on windows of the row rounded up to 64 tokens (so a
// handful of oneDNN primitives, one per window size, serve every length),
// with the keys outside the sequence masked and the query rows outside it
// thrown away. Padding tokens (mask 0) attend every real token of their
// row, as the kernel contract says, as one more block.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "polyhal/dropout_mask.hpp"
#include "polyhal/dtype.hpp"

namespace polyhal::cpu {

/// One run of equal mask values in a row: its query tokens, and the window
/// of queries and keys computed for them.
struct AttentionBlock {
  std::int64_t row = 0;
  std::int64_t first = 0, count = 0;    ///< query tokens [first, first + count)
  std::int64_t q_start = 0, q_len = 0;  ///< query window computed (count rounded up)
  std::int64_t k_start = 0, k_len = 0;  ///< key window
  std::int32_t sequence = 0;            ///< the queries' mask value (0: padding)
};

/// Window lengths are multiples of this (or the whole row).
inline constexpr std::int64_t kBlockGranule = 64;

/// The blocks of `rows` rows of `seq` tokens, or nullopt when some row has
/// no block structure: a sequence number in two separate runs, or no real
/// token (the kernels then fall back to the full masked S x S).
std::optional<std::vector<AttentionBlock>> attention_blocks(const std::int32_t* mask,
                                                            std::int64_t rows, std::int64_t seq);

/// Sizes of one attention op: B rows of S tokens, QKV [B*S, 3H] with
/// `heads` heads of d = H / heads, operands of `type` (f32 or bf16).
struct AttentionDims {
  std::int64_t b = 0, s = 0, heads = 0, h = 0, d = 0;
  DType type = DType::f32;
};

/// The block-by-block forward and backward of attention on packed rows.
/// Primitives are made per window size at first use; scratch is sized for
/// one row. Every method returns false, touching nothing, when the mask has
/// no block structure or oneDNN has no primitive for a window.
class BlockAttention {
 public:
  BlockAttention(AttentionDims shape, const dnnl::engine& engine, bool avx512);
  ~BlockAttention();
  BlockAttention(const BlockAttention&) = delete;
  BlockAttention& operator=(const BlockAttention&) = delete;

  /// ctx [B*S, H] of QKV [B*S, 3H] (both of dims.type); with `probs` not
  /// null also the probabilities [B, heads, S, S] (of dims.type, zero
  /// outside the blocks) as attention_train keeps them. `dropout`: the
  /// probabilities' mask, applied before the product with V.
  bool forward(const void* qkv, const std::int32_t* mask, void* ctx, void* probs,
               const DropoutMask* dropout);

  /// dQKV [B*S, 3H] (overwritten) from dctx, QKV and the probabilities
  /// forward kept (all of dims.type), as attention_backward.
  bool backward(const void* dctx, const void* qkv, const void* probs, const std::int32_t* mask,
                void* dqkv, const DropoutMask* dropout);

  /// Bytes of scratch a packed batch uses (allocated at the first one).
  std::uint64_t workspace_bytes() const;

 private:
  struct Window;
  Window* window(std::int64_t q_len, std::int64_t k_len, bool backward);
  void allocate();

  AttentionDims dims_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  bool avx512_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Window>> windows_;
  std::vector<float> scores_, dq_, dk_, dv_, accumulated_, additive_;
  std::vector<std::byte> operand_, rows_;  // P or dS, and ctx / dctx rows, at dims.type
};

}  // namespace polyhal::cpu
