#include "polyhal/app/bert_inference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/bert_program.hpp"
#include "model/families/model_family.hpp"
#include "polyhal/app/int8_scales.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// The forward part of the BERT program (bert_program.hpp): inference ops
/// with fused epilogues, weights bound as kernel constants, activations
/// reused from layer to layer.
struct BertInference::State {
  BertConfig config;
  BertShape shape;
  bool with_heads;
  TaskHead head;
  std::unique_ptr<BertProgram> bert;
  bool loaded = false;
  bool calibrating = false;
  std::int64_t runs = 0;
  TraceLane* lane = nullptr;  // --profile: batch N is run N (from 1)
  TraceTrack* track = nullptr;
  std::int64_t calibrated_batches = 0;
  std::map<std::string, float> max_abs;  // calibration
  std::map<std::string, std::vector<float>> channel_max_abs;
  /// Dynamic int8: the calibrated per-channel maxima the smoothing comes from.
  std::map<std::string, std::vector<float>> smoothing_channels;

  Program& program() { return bert->program; }
};

namespace {

/// Declares the program (the encoder, and the head's outputs when
/// `with_heads`) and prepares every kernel: a device lacking one fails now,
/// and the plan knows the kernels' scratch. Nothing is allocated until
/// load_weights.
std::unique_ptr<BertInference::State> declare_inference(
    Device& device, const BertConfig& config, BertShape shape, const InferencePrecision& precision,
    const TaskHead& head, bool with_heads, bool packed = false, std::int64_t mlm_predictions = 0) {
  BertProgramOptions options;
  options.encoder_math = precision.encoder_math;

  options.config = config;
  options.shape = shape;
  options.heads = with_heads;
  options.head = head;
  options.packed_sequences = packed ? 1 : 0;  // inference needs only the position ids
  options.max_predictions = mlm_predictions;
  auto state = std::make_unique<BertInference::State>();
  state->config = config;
  state->shape = shape;
  state->with_heads = with_heads;
  state->head = head;
  options.int8_max_abs = precision.int8_max_abs;
  options.int8_channel_max_abs = precision.int8_channel_max_abs;
  state->smoothing_channels = precision.int8_channel_max_abs;
  state->bert = declare_bert(device, precision.dtype, options);
  state->program().prepare_kernels();
  return state;
}

}  // namespace

BertInference::BertInference(Device& device, const BertConfig& config, BertShape shape,
                             const InferencePrecision& precision, bool with_heads, bool packed)
    : state_(declare_inference(device, config, shape, precision, TaskHead{}, with_heads, packed)) {}

BertInference::BertInference(Device& device, const BertConfig& config, BertShape shape,
                             const InferencePrecision& precision, const TaskHead& head, bool packed,
                             std::int64_t mlm_predictions)
    : state_(declare_inference(device, config, shape, precision, head, true, packed,
                               mlm_predictions)) {}

BertInference::~BertInference() = default;

MemoryReport BertInference::plan_memory() const {
  // Each kernel keeps its own scratch (and a linear its packed weights):
  // Program::plan_memory adds them.
  auto items = state_->program().memory_items();
  if (state_->program().device().properties().mode != DeviceMode::model) {
    // The host runs it: the weights as read live there while loading.
    items.push_back({"host", "weights as read (f32, while loading)",
                     static_cast<std::uint64_t>(state_->config.parameter_count()) * 4});
  }
  return state_->program().plan_memory(std::move(items));
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
  for (const auto& point : s.bert->smoothing_points) {
    const Shape& shape = program.shape(point.weight);
    program.upload_floats(point.smoothing,
                          int8_smoothing(s.smoothing_channels.at(point.name),
                                         program.read_floats(point.weight), shape[0], shape[1]));
  }
  program.bind_constants();
  s.loaded = true;
}

void BertInference::share_weights(const BertInference& loaded) {
  auto& s = *state_;
  const auto& from = *loaded.state_;
  if (!from.loaded) throw std::logic_error("BertInference::share_weights from an unloaded model");
  const auto& mine = s.bert->parameters;
  const auto& theirs = from.bert->parameters;
  if (mine.size() != theirs.size() ||
      s.bert->smoothing_points.size() != from.bert->smoothing_points.size())
    throw std::logic_error("BertInference::share_weights: another model");
  std::map<int, Tensor> given;
  const Program& source = from.bert->program;
  Program& program = s.program();
  // A weight that is rows of a fused one (Q, K and V) is shared as the whole.
  const auto share = [&](int mine_slot, int their_slot) {
    if (program.is_view(mine_slot)) mine_slot = program.view_base(mine_slot);
    if (source.is_view(their_slot)) their_slot = source.view_base(their_slot);
    given[mine_slot] = source.bound(their_slot);
  };
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (mine[i].name != theirs[i].name)
      throw std::logic_error("BertInference::share_weights: another model (" + mine[i].name + ")");
    share(mine[i].weight, theirs[i].weight);
  }
  for (std::size_t i = 0; i < s.bert->smoothing_points.size(); ++i)
    share(s.bert->smoothing_points[i].smoothing, from.bert->smoothing_points[i].smoothing);
  // One set of activations too: the shapes of a served model run one at a
  // time, and 72 shapes' own would not fit a device model's memory.
  given.merge(program.rows_of(source));
  program.allocate(given);
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
  if (s.lane) s.lane->set_step(s.runs + 1);
  const TraceTrack::Scope batch(s.track, fmt::format("batch {}", s.runs + 1), "step",
                                {{"batch", s.runs + 1}});
  std::optional<TraceTrack::Scope> upload;
  upload.emplace(s.track, "upload", "host");
  program.upload(s.bert->ids, in.input_ids);
  program.upload(s.bert->types, s.bert->types_of(in.token_type_ids));
  program.upload(s.bert->mask, in.attention_mask);
  if (s.bert->positions >= 0) {
    if (in.position_ids.size() != expected)
      throw RuntimeFailure(fmt::format("packed rows: position_ids must hold {} tokens", tokens));
    program.upload(s.bert->positions, in.position_ids);
  } else if (!in.position_ids.empty()) {
    throw RuntimeFailure("position_ids given to a model not prepared for packed rows");
  }
  if (s.bert->relative_buckets >= 0)
    program.upload(s.bert->relative_buckets,
                   relative_bucket_input(s.config, s.shape, in.position_ids));
  if (s.bert->mlm_positions >= 0) {
    const auto wanted = static_cast<std::size_t>(s.bert->program.shape(s.bert->mlm_positions)[0]);
    if (in.mlm_positions.size() != wanted)
      throw RuntimeFailure(fmt::format("mlm_positions must hold {} token indices", wanted));
    for (const std::int32_t t : in.mlm_positions)
      if (t < 0 || t >= tokens)
        throw RuntimeFailure(fmt::format("mlm_positions: {} outside the {} tokens", t, tokens));
    program.upload(s.bert->mlm_positions, in.mlm_positions);
  }
  upload.reset();
  if (s.calibrating) {
    const auto& points = s.bert->calibration_points;
    std::size_t next = 0;
    program.run(Phase::forward, [&](std::size_t op) {
      if (next >= points.size() || points[next].forward_op != op) return;
      program.device().synchronize();
      const auto& name = points[next].name;
      float& seen = s.max_abs[name];
      const auto columns = static_cast<std::size_t>(program.shape(points[next].input)[1]);
      auto& channels = s.channel_max_abs[name];
      channels.resize(columns, 0.0f);
      const auto values = program.read_floats(points[next].input);
      for (std::size_t i = 0; i < values.size(); ++i) {
        const float v = std::fabs(values[i]);
        if (!std::isfinite(v)) continue;
        seen = std::max(seen, v);
        channels[i % columns] = std::max(channels[i % columns], v);
      }
      ++next;
    });
    ++s.calibrated_batches;
  } else {
    program.run(Phase::forward);
  }
  ++s.runs;
  program.device().synchronize();
  const TraceTrack::Scope download(out != nullptr ? s.track : nullptr, "download", "host");
  if (out != nullptr) {
    out->last_hidden_state = program.read_floats(s.bert->hidden);
    if (s.bert->pooled >= 0) out->pooled = program.read_floats(s.bert->pooled);
    if (s.with_heads) read_head_outputs(*out);
  }
}

std::vector<OpTime> BertInference::profile() const {
  std::vector<OpTime> out;
  for (auto& [name, t] : state_->program().profile())
    if (t.calls > 0) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

std::int64_t BertInference::runs() const {
  return state_->runs;
}

void BertInference::start_calibration() {
  state_->calibrating = true;
}
bool BertInference::calibrating() const noexcept {
  return state_->calibrating;
}
const std::map<std::string, float>& BertInference::calibrated_max_abs() const {
  return state_->max_abs;
}
const std::map<std::string, std::vector<float>>& BertInference::calibrated_channel_max_abs() const {
  return state_->channel_max_abs;
}
std::int64_t BertInference::calibrated_batches() const {
  return state_->calibrated_batches;
}

void BertInference::read_head_outputs(BertOutputs& out) const {
  const auto& s = *state_;
  const Program& program = s.bert->program;
  switch (s.head.kind) {
    case TaskHead::Kind::pretraining:
      out.mlm_logits = program.read_floats(s.bert->mlm_logits);
      out.nsp_logits = program.read_floats(s.bert->nsp_logits);
      break;
    case TaskHead::Kind::question_answering: {
      // [tokens, 2] interleaved start/end -> two [batch, seq] planes.
      const auto both = program.read_floats(s.bert->head_logits);
      const std::size_t tokens = both.size() / 2;
      out.start_logits.resize(tokens);
      out.end_logits.resize(tokens);
      for (std::size_t t = 0; t < tokens; ++t) {
        out.start_logits[t] = both[2 * t];
        out.end_logits[t] = both[2 * t + 1];
      }
      break;
    }
    case TaskHead::Kind::classification:
      out.logits = program.read_floats(s.bert->head_logits);
      break;
  }
}

const BertConfig& BertInference::config() const {
  return state_->config;
}
const TaskHead& BertInference::head() const {
  return state_->head;
}
BertShape BertInference::shape() const {
  return state_->shape;
}

void BertInference::set_trace(TraceLane* lane) {
  auto& s = *state_;
  s.lane = lane;
  s.track = lane ? &lane->track("inference") : nullptr;
  s.program().set_trace(s.track);
}

std::optional<std::vector<EstimatedSlice>> BertInference::estimated_kernels() const {
  return state_->program().estimated_ops(Phase::forward);
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
  if (!state_->with_heads) return total;
  switch (state_->head.kind) {
    case TaskHead::Kind::pretraining:
      total += 2.0 * t * h * (h + static_cast<double>(c.vocab_size));
      break;
    case TaskHead::Kind::question_answering:
      total += 2.0 * t * h * 2.0 - 2.0 * static_cast<double>(state_->shape.batch) * h * h;
      if (families::model_family(c.model_type).qa_prediction_head()) total += 2.0 * t * h * h;
      break;
    case TaskHead::Kind::classification:
      total += 2.0 * static_cast<double>(state_->shape.batch) * h *
               static_cast<double>(state_->head.num_labels);
      break;
  }
  return total;
}

}  // namespace polyhal
