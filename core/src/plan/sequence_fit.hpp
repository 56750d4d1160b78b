#pragma once
// The run's sequence length against the model it runs, checked alike by
// every BERT task (inference, pretrain, squad, glue).
#include "plan/model_keys.hpp"
#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config.hpp"

namespace polyhal {

/// Where the model's dimensions come from, for errors: the lines or --set
/// options of explicit model.* dimensions, then model.hf_config's file, the
/// config of checkpoint.init, or the preset ("--set model.hidden_size=40,
/// preset groupbert-mini").
std::string model_origin(const RunConfig& config, const ModelKeys& keys);

/// Refuses model.seq_len longer than the model's position embeddings, or,
/// for GroupBERT, shorter than the convolution's kernel. The error names
/// model.seq_len with its file and line, and where the model's own key came
/// from (model.hf_config's file, the preset, or checkpoint.init's config).
void check_sequence_fits(const RunConfig& config, const ModelKeys& keys, const BertConfig& model);

}  // namespace polyhal
