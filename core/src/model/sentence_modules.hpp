#pragma once
// A sentence-transformers directory's modules as that library applies them
// after the encoder: its Pooling module (1_Pooling/config.json) and, when
// modules.json lists it, Normalize. A module polyhal does not apply (Dense,
// LayerNorm, WordEmbeddings, ...) is refused naming it: silently skipping
// one gives other embeddings than the model's own, with exit 0.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace polyhal {

struct SentencePooling {
  std::string mode = "none";  ///< none, mean, cls or max
  bool normalize = false;
  std::string source;  ///< where the choice came from, for the log
};

/// The pooling `pooling` and `normalize` ask for ("auto": from the
/// sentence-transformers files in `model_dir`, when it has them). ConfigError
/// naming the file and key for a pooling mode or a module polyhal does not
/// implement, or a value of the wrong type.
SentencePooling resolve_sentence_pooling(const std::string& pooling, const std::string& normalize,
                                         const std::filesystem::path& model_dir);

/// sentence_bert_config.json's settings.
struct SentenceBertSettings {
  std::optional<std::int64_t> max_seq_length;
  bool do_lower_case = false;
};

/// The settings in `file`, or nothing when it is absent. ConfigError naming
/// the file and key for a value of the wrong type.
std::optional<SentenceBertSettings> read_sentence_bert_settings(const std::filesystem::path& file);

}  // namespace polyhal
