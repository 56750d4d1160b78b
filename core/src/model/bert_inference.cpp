#include "polyhal/bert_inference.hpp"

#include <fmt/format.h>

#include "model/bert_program.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// The forward part of the BERT program (bert_program.hpp): inference ops
/// with fused epilogues, weights bound as kernel constants, activations
/// reused from layer to layer.
struct BertInference::State {
  BertConfig config;
  BertShape shape;
  bool with_heads;
  std::unique_ptr<BertProgram> bert;
  bool loaded = false;

  Program& program() { return bert->program; }
};

BertInference::BertInference(Device& device, const BertConfig& config, BertShape shape,
                             DType precision, bool with_heads)
    : state_(std::make_unique<State>()) {
  BertProgramOptions options;
  options.config = config;
  options.shape = shape;
  options.heads = with_heads;
  state_->config = config;
  state_->shape = shape;
  state_->with_heads = with_heads;
  state_->bert = declare_bert(device, precision, options);
  // Every kernel is prepared here: a device lacking one fails now, and the
  // plan knows the kernels' scratch. Nothing is allocated until load_weights.
  state_->program().prepare_kernels();
}

BertInference::~BertInference() = default;

MemoryReport BertInference::plan_memory() const {
  auto items = state_->program().memory_items();
  // Kernels hold their own scratch; a device that shares scratch between
  // kernels needs only the largest. Reported as the largest single kernel.
  items.push_back({"workspace", "largest kernel scratch", state_->program().largest_workspace()});
  return state_->program().device().plan_memory(items);
}

void BertInference::load_weights(const TensorMap& weights) {
  auto& s = *state_;
  Program& program = s.program();
  program.allocate();
  for (const auto& parameter : s.bert->parameters) {
    const auto it = weights.find(parameter.name);
    if (it == weights.end())
      throw ConfigError(fmt::format("weights: missing tensor '{}'", parameter.name));
    program.upload_floats(parameter.weight, it->second.values);
  }
  program.bind_constants();
  s.loaded = true;
}

void BertInference::run(const BertInputs& in, BertOutputs* out) {
  auto& s = *state_;
  if (!s.loaded) throw RuntimeFailure("BertInference::run before load_weights");
  const std::int64_t tokens = s.shape.batch * s.shape.seq;
  const auto expected = static_cast<std::size_t>(tokens);
  if (in.input_ids.size() != expected || in.token_type_ids.size() != expected ||
      in.attention_mask.size() != expected) {
    throw RuntimeFailure(fmt::format("inputs must hold batch {} x seq {} = {} tokens each",
                                     s.shape.batch, s.shape.seq, tokens));
  }
  Program& program = s.program();
  program.upload(s.bert->ids, in.input_ids);
  program.upload(s.bert->types, in.token_type_ids);
  program.upload(s.bert->mask, in.attention_mask);
  program.run(Phase::forward);
  program.device().synchronize();
  if (out != nullptr) {
    out->last_hidden_state = program.read_floats(s.bert->hidden);
    out->pooled = program.read_floats(s.bert->pooled);
    if (s.with_heads) {
      out->mlm_logits = program.read_floats(s.bert->mlm_logits);
      out->nsp_logits = program.read_floats(s.bert->nsp_logits);
    }
  }
}

const BertConfig& BertInference::config() const {
  return state_->config;
}
BertShape BertInference::shape() const {
  return state_->shape;
}

std::optional<double> BertInference::estimate_seconds() const {
  return state_->program().estimate_seconds(Phase::forward);
}

double BertInference::flops() const {
  const auto& c = state_->config;
  const double t = static_cast<double>(state_->shape.batch * state_->shape.seq),
               h = static_cast<double>(c.hidden_size);
  const double i = static_cast<double>(c.intermediate_size),
               s = static_cast<double>(state_->shape.seq);
  const double per_layer = 2.0 * t * (3 * h * h + h * h + 2 * h * i) + 4.0 * t * s * h;
  double total = static_cast<double>(c.num_hidden_layers) * per_layer +
                 2.0 * static_cast<double>(state_->shape.batch) * h * h;
  if (state_->with_heads) total += 2.0 * t * h * (h + static_cast<double>(c.vocab_size));
  return total;
}

}  // namespace polyhal
