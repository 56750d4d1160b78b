#pragma once
// Sentence embeddings from the last hidden states, as sentence-transformers
// computes them: its Pooling module (mean over the real tokens, the [CLS]
// token, or the maximum over real tokens) and, when its Normalize module
// follows, L2 normalisation. A sentence-transformers model directory says
// which in 1_Pooling/config.json and modules.json; polyhal reads them when
// inference.pooling / inference.normalize are auto.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace polyhal {

struct SentencePooling {
  std::string mode = "none";  ///< none, mean, cls or max
  bool normalize = false;
  std::string source;  ///< where the choice came from, for the log
};

/// The pooling `pooling` and `normalize` ask for ("auto": from the
/// sentence-transformers files in `model_dir`, when it has them). ConfigError
/// naming the file for a pooling mode polyhal does not implement.
SentencePooling resolve_sentence_pooling(const std::string& pooling, const std::string& normalize,
                                         const std::filesystem::path& model_dir);

/// One sentence's embedding from its [seq, hidden] last hidden states and
/// its attention mask (1: a real token).
std::vector<float> pool_sentence(std::span<const float> hidden, std::span<const std::int32_t> mask,
                                 std::int64_t hidden_size, const SentencePooling& pooling);

}  // namespace polyhal
