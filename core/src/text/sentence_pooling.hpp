#pragma once
// Sentence embeddings from the last hidden states, as sentence-transformers
// computes them: its Pooling module (mean over the real tokens, the [CLS]
// token, or the maximum over real tokens) and, when its Normalize module
// follows, L2 normalisation. Which one a directory asks for is read by the
// model layer (model/sentence_modules.hpp).
#include <cstdint>
#include <span>
#include <vector>

#include "model/sentence_modules.hpp"

namespace polyhal {

/// One sentence's embedding from its [seq, hidden] last hidden states and
/// its attention mask (1: a real token).
std::vector<float> pool_sentence(std::span<const float> hidden, std::span<const std::int32_t> mask,
                                 std::int64_t hidden_size, const SentencePooling& pooling);

}  // namespace polyhal
