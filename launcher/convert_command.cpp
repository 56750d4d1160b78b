// `polyhal convert`: a TensorFlow checkpoint into a Hugging Face directory
// (convert_model.hpp), and what it found.
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"

namespace polyhal {

int convert_model(const ConvertOptions& options) {
  const ConvertResult r = convert_tf_to_hf(options);
  std::cout << fmt::format(
      "read {} ({} BERT tensors; {} of optimizer and training state left out)\n"
      "  model: {} ({} layers, hidden {}, {} heads, vocabulary {}) from {}\n",
      r.checkpoint.string(), r.tensors, r.training_state.size(), hf_architecture(r.head),
      r.model.num_hidden_layers, r.model.hidden_size, r.model.num_attention_heads,
      r.model.vocab_size, r.bert_config.string());
  std::cout << fmt::format("wrote {}: config.json, model.safetensors{}\n", options.output.string(),
                           r.vocab.empty()
                               ? std::string(" (no vocab.txt found: give --vocab)")
                               : ", vocab.txt, tokenizer_config.json (do_lower_case " +
                                     std::string(options.lower_case ? "true" : "false") + ")");
  return 0;
}

}  // namespace polyhal
