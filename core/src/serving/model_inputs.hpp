#pragma once
// What text inference and the embedding server (served_model.hpp) open a
// model with, from its card (inside libpolyhal): the serving core's, below
// the tasks, so the inference task shares it.
#include <memory>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "text/sentence_pooling.hpp"

namespace polyhal {

/// The model's weights: seeded, or from the card's model.weights (or
/// model.dir's model file). Without heads the
/// encoder of any BERT file serves (a BertModel as sentence-transformers
/// ships it); the heads a file has beyond it are logged as unused.
/// `pooler_absent` is set when the file has no pooler.
TensorMap read_inference_weights(const RunConfig& config, const ModelPlan& card,
                                 const TaskHead& head, bool with_heads, bool* pooler_absent,
                                 TensorMap* head_tensors = nullptr);

/// The card's tokenizer (a vocab.txt or a tokenizer.json) for text
/// inference; ConfigError when it has more tokens than the model's vocabulary.
std::unique_ptr<Tokenizer> open_text_tokenizer(const ModelPlan& card);

/// The sentence embedding inference.pooling and inference.normalize
/// (`pooling_key`, `normalize_key`) and the model's directory ask for, said once.
SentencePooling text_pooling(const std::string& pooling_key, const std::string& normalize_key,
                             const ModelPlan& card);

}  // namespace polyhal
