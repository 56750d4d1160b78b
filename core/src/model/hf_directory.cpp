#include "polyhal/app/hf_directory.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

std::string read_text(const std::filesystem::path& file) {
  detail::refuse_special_file(file);
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw RuntimeFailure(fmt::format("{}: cannot read", file.string()));
  return text.str();
}

/// vocab.txt (copied in) and tokenizer_config.json: the settings the text
/// was tokenized with, for AutoTokenizer.from_pretrained(dir). A
/// tokenizer.json is copied as it is: it holds every setting itself.
void write_tokenizer_files(const std::filesystem::path& dir, const BertConfig& model,
                           const std::filesystem::path& vocab, bool lower_case) {
  if (vocab.extension() == ".json") {
    if (std::filesystem::absolute(vocab) != std::filesystem::absolute(dir / "tokenizer.json"))
      detail::write_file_atomically(dir / "tokenizer.json", read_text(vocab));
    return;
  }
  if (std::filesystem::absolute(vocab) != std::filesystem::absolute(dir / "vocab.txt"))
    detail::write_file_atomically(dir / "vocab.txt", read_text(vocab));
  const nlohmann::json settings{{"tokenizer_class", "BertTokenizer"},
                                {"do_lower_case", lower_case},
                                {"strip_accents", nullptr},
                                {"tokenize_chinese_chars", true},
                                {"model_max_length", model.max_position_embeddings},
                                {"unk_token", "[UNK]"},
                                {"sep_token", "[SEP]"},
                                {"pad_token", "[PAD]"},
                                {"cls_token", "[CLS]"},
                                {"mask_token", "[MASK]"}};
  detail::write_file_atomically(dir / "tokenizer_config.json", settings.dump(2) + "\n");
}

}  // namespace

void export_hf_directory(const std::filesystem::path& dir, const BertConfig& model,
                         const TaskHead& head, const TensorMap& weights,
                         const std::filesystem::path& vocab, bool lower_case) {
  std::filesystem::create_directories(dir);
  // config.json last: a directory a full disk or a kill cut short has none,
  // so nothing takes it for a model (each file is whole or absent).
  save_bert_weights(checkpoint_tensors(weights, model, head), DType::f32,
                    dir / "model.safetensors");
  if (!vocab.empty()) write_tokenizer_files(dir, model, vocab, lower_case);
  write_hf_config(model, dir / "config.json", head);
}

bool holds_hf_model(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / "config.json", ec) &&
         std::filesystem::is_regular_file(dir / "model.safetensors", ec);
}

std::filesystem::path model_weights_in(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "model.safetensors")) return dir / "model.safetensors";
  // A model saved over save_pretrained's max_shard_size: the index and its shards.
  if (std::filesystem::exists(dir / "model.safetensors.index.json"))
    return dir / "model.safetensors.index.json";
  if (tf_checkpoints_in(dir).empty())
    throw ConfigError(
        fmt::format("{} has no model.safetensors or model.safetensors.index.json (a Hugging Face "
                    "directory) and no TensorFlow checkpoint (PREFIX.index and its shards, as "
                    "Google's bert_model.ckpt)",
                    dir.string()));
  return tf_checkpoint_in(dir, "as checkpoint.init");
}

}  // namespace polyhal
