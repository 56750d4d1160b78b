// `polyhal convert`: a TensorFlow checkpoint into a Hugging Face directory
// (convert_model.hpp), and what it found.
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "polyhal/app/checkpoint_store.hpp"

namespace polyhal {

int convert_model(const ConvertOptions& options) {
  const bool checkpoint = options.to == "checkpoint";
  const ConvertResult r =
      checkpoint ? convert_tf_to_checkpoint(options) : convert_tf_to_hf(options);
  std::cout << fmt::format(
      "read {} ({} BERT tensors; {} of optimizer and training state{})\n"
      "  model: {} ({} layers, hidden {}, {} heads, vocabulary {}) from {}\n",
      r.checkpoint.string(), r.tensors, r.training_state.size(),
      checkpoint ? ", moments taken" : " left out", hf_architecture(r.head),
      r.model.num_hidden_layers, r.model.hidden_size, r.model.num_attention_heads,
      r.model.vocab_size, r.bert_config.string());
  if (checkpoint) {
    const CheckpointStore store(options.output);
    std::cout << fmt::format(
        "wrote {} with the optimizer moments: resume with checkpoint.dir: {}, "
        "checkpoint.resume: true and model.hf_config: {}\n",
        store.latest().value_or(options.output).string(), options.output.string(),
        r.bert_config.string());
    return 0;
  }
  std::cout << fmt::format("wrote {}: config.json, model.safetensors{}\n", options.output.string(),
                           r.vocab.empty()
                               ? std::string(" (no vocab.txt found: give --vocab)")
                               : ", vocab.txt, tokenizer_config.json (do_lower_case " +
                                     std::string(options.lower_case ? "true" : "false") + ")");
  return 0;
}

}  // namespace polyhal
