#pragma once
// What text inference and the embedding server (served_model.hpp) open a
// model with (inside libpolyhal).
#include <memory>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "text/sentence_pooling.hpp"

namespace polyhal {

/// The model's weights: seeded, or from model.weights. Without heads the
/// encoder of any BERT file serves (a BertModel as sentence-transformers
/// ships it); the heads a file has beyond it are logged as unused.
/// `pooler_absent` is set when the file has no pooler.
TensorMap read_inference_weights(const RunConfig& config, const BertConfig& model,
                                 const TaskHead& head, bool with_heads, bool* pooler_absent);

/// data.vocab's tokenizer (a vocab.txt or a tokenizer.json) for text inference; ConfigError when it
/// has more tokens than `model`'s vocabulary.
std::unique_ptr<Tokenizer> open_text_tokenizer(const RunConfig& config, const BertConfig& model);

/// The sentence embedding the config and the model's directory ask for, said once.
SentencePooling text_pooling(const RunConfig& config);

}  // namespace polyhal
