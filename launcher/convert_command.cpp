// `polyhal convert`: a TensorFlow checkpoint into a Hugging Face directory
// (convert_model.hpp), and what it found.
#include <fmt/format.h>

#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/error.hpp"

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

int convert_command(CommandLine& cl, int, char**) {
  if (cl.inputs.size() != 1 || cl.pack.output.empty())
    throw UsageError(
        fmt::format("'convert' needs one --input and --output\n{}", command_help("convert")));
  if (cl.convert_to != "hf" && cl.convert_to != "checkpoint")
    throw UsageError(fmt::format(
        "--to {}: expected hf (a Hugging Face directory) or checkpoint (a polyhal checkpoint "
        "directory to resume from)",
        cl.convert_to));
  ConvertOptions options;
  options.input = cl.inputs.front();
  options.output = cl.pack.output;
  options.bert_config = cl.bert_config;
  options.vocab = cl.vocab;
  options.lower_case = !cl.cased;
  options.to = cl.convert_to;
  return convert_model(options);
}

}  // namespace polyhal
