#include "polyhal/app/bert_training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "model/bert_program.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"
#include "train/overlapped_all_reduce.hpp"

namespace polyhal {
namespace {

/// Runs `work` and adds its wall time to `seconds`.
template <class Work>
void timed(double& seconds, Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// A parameter as the optimizer sees it: the program's weight and gradient
/// plus its two state tensors and kernels.
struct Param {
  std::string name;  // Hugging Face name
  int weight, grad, m, v;
  bool decay;                  // weight decay and LAMB trust ratio apply
  int owner = 0;               // the replica that updates it when optimizer state is sharded
  int copy = -1;               // its compute copy (or rows of it), written by the update; -1: none
  int update = -1, norm = -1;  // side kernels of the program
};

/// The update op of an optimizer kind (lamb | adamw | sgd).
OpKind optimizer_op(const std::string& kind) {
  if (kind == "lamb") return OpKind::lamb_update;
  if (kind == "adamw") return OpKind::adamw_update;
  if (kind == "sgd") return OpKind::sgd_update;
  throw ConfigError(fmt::format("optimizer.kind: unknown optimizer '{}' (lamb, adamw, sgd)", kind));
}

}  // namespace

/// The training program (bert_program.hpp: forward, backward and loss) plus
/// the optimizer: state per parameter, update and norm kernels, sharding.
struct BertTraining::State {
  BertShape shape;
  BertConfig config;  ///< the model's (MPNet's relative buckets are computed per batch)
  OptimizerSettings optimizer;
  std::unique_ptr<BertProgram> bert;
  std::vector<Param> params;
  int hyper = -1;     // i64 OptimizerStep of the update kernels
  int norm_out = -1;  // f32 [1] sum of squares of one gradient
  std::vector<std::vector<Tensor>> update_inputs, update_outputs;
  /// > 0: the MLM head runs on at most this many positions per sequence,
  /// gathered (as the seeds' data does); 0: on every position.
  std::int64_t max_predictions = 0;
  std::uint64_t seed = 0;
  TaskHead::Kind head = TaskHead::Kind::pretraining;
  std::int64_t steps = 0;
  bool loaded = false;
  int shard_rank = 0, shard_count = 1;  // optimizer-state sharding (1: every replica holds all)
  Communicator* shards = nullptr;       // the replicas sharing the optimizer state
  double optimizer_seconds = 0, all_reduce_seconds = 0;
  std::int64_t optimizer_calls = 0, all_reduce_calls = 0;
  // reduce_gradients_during_next_backward: the replicas, the bucket size,
  // and whether this step's gradients are reduced already.
  Communicator* overlap = nullptr;
  std::size_t bucket_bytes = 0;
  bool gradients_reduced = false;

  Program& program() const { return bert->program; }
  bool owns(const Param& p) const { return shard_count == 1 || p.owner == shard_rank; }

  /// m and v for every parameter, and the update and norm kernels (the
  /// update also writes the weights' compute copy when GEMMs read one: no
  /// separate cast pass over the weights after each step).
  void declare_optimizer() {
    Program& p = program();
    hyper = p.tensor("optimizer step", "inputs", {kOptimizerStepWords}, DType::i64);
    norm_out = p.tensor("gradient sum of squares", "activations", {1}, DType::f32);
    const OpKind update = optimizer_op(optimizer.kind);
    const OptimizerHyperParameters hyper_parameters{optimizer.beta1, optimizer.beta2,
                                                    optimizer.epsilon, optimizer.weight_decay,
                                                    optimizer.momentum};
    for (const auto& parameter : bert->parameters) {
      if (parameter.fixed) continue;  // zeros the checkpoint does not hold
      const Shape shape_of =
          p.shape(parameter.weight);  // a copy: declaring tensors moves the table
      Param param{
          parameter.name,
          parameter.weight,
          parameter.grad,
          p.tensor("m." + parameter.name, "optimizer state", shape_of, optimizer.first_moment),
          p.tensor("v." + parameter.name, "optimizer state", shape_of, DType::f32),
          parameter.decay};
      param.copy = p.compute_copy_rows(parameter.weight).value_or(-1);
      param.update = p.side_kernel(
          {update,
           DType::f32,
           {shape_of, shape_of},
           OptimizerUpdateAttrs{hyper_parameters, param.decay, param.decay, optimizer.first_moment},
           param.copy >= 0 ? p.precision() : DType::f32});
      param.norm = p.side_kernel({OpKind::sum_of_squares, DType::f32, {shape_of}, NoAttrs{}});
      params.push_back(std::move(param));
    }
  }

  void allocate() {
    Program& p = program();
    p.allocate();
    for (const auto& param : params) {
      const Tensor &w = p.bound(param.weight), &g = p.bound(param.grad), &m = p.bound(param.m),
                   &v = p.bound(param.v);
      update_inputs.push_back({w, g, m, v, p.bound(hyper)});
      update_outputs.push_back({w, m, v, g});
      if (param.copy >= 0) update_outputs.back().push_back(p.bound(param.copy));
    }
  }

  /// The labelled positions of each sequence (row indices into the batch's
  /// tokens) and their labels, padded to max_predictions per sequence with
  /// the sequence's first row and label -100.
  std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> gather_labels(
      const std::vector<std::int32_t>& labels) const {
    const std::int64_t b = shape.batch, s = shape.seq;
    if (labels.size() != static_cast<std::size_t>(b * s)) {
      throw RuntimeFailure(
          fmt::format("mlm_labels: expected {} values, got {}", b * s, labels.size()));
    }
    std::vector<std::int32_t> positions, gathered;
    for (std::int64_t k = 0; k < b; ++k) {
      std::int64_t found = 0;
      for (std::int64_t p = 0; p < s; ++p) {
        const std::int32_t label = labels[static_cast<std::size_t>(k * s + p)];
        if (label == -100) continue;
        if (++found > max_predictions) {
          throw RuntimeFailure(fmt::format(
              "sequence {} of the micro-batch has more than max_predictions = {} labelled "
              "positions; raise data.max_predictions",
              k, max_predictions));
        }
        positions.push_back(static_cast<std::int32_t>(k * s + p));
        gathered.push_back(label);
      }
      for (; found < max_predictions; ++found) {
        positions.push_back(static_cast<std::int32_t>(k * s));
        gathered.push_back(-100);
      }
    }
    return {positions, gathered};
  }

  /// Question answering: (start, end) per sequence (per sequence slot of
  /// packed rows).
  void upload_spans(const TrainingBatch& batch) {
    const auto slots = static_cast<std::size_t>(program().shape(bert->span_positions)[0]);
    if (batch.start_positions.size() != slots || batch.end_positions.size() != slots) {
      throw RuntimeFailure(
          fmt::format("start_positions and end_positions: expected {} values each", slots));
    }
    std::vector<std::int32_t> positions;
    for (std::size_t k = 0; k < slots; ++k) {
      positions.push_back(batch.start_positions[k]);
      positions.push_back(batch.end_positions[k]);
    }
    program().upload(bert->span_positions, positions);
  }

  /// Classification: the [CLS] rows, and labels (checked) or regression targets.
  void upload_classes(const TrainingBatch& batch) {
    std::vector<std::int32_t> rows;
    for (std::int64_t k = 0; k < shape.batch; ++k)
      rows.push_back(static_cast<std::int32_t>(k * shape.seq));
    if (bert->cls_positions >= 0) program().upload(bert->cls_positions, rows);  // else mean-pooled
    if (bert->targets >= 0) {
      program().upload(bert->targets, batch.targets);
      return;
    }
    const std::int64_t classes = program().shape(bert->head_logits)[1];
    for (const std::int32_t label : batch.labels) {
      if (label != -100 && (label < 0 || label >= classes))
        throw RuntimeFailure(fmt::format("label {} is not one of the {} classes", label, classes));
    }
    program().upload(bert->labels, batch.labels);
  }

  void zero_gradients() {
    for (const auto& p : params) program().zero(p.grad);
  }

  /// The gradient tensors (the fused Q/K/V gradients once, not their views).
  std::vector<int> gradient_tensors() const {
    std::vector<int> out;
    for (const auto& [g, name] : gradient_tensors_named()) out.push_back(g);
    return out;
  }
  /// The same, each with the name of its (first) parameter.
  std::vector<std::pair<int, std::string>> gradient_tensors_named() const {
    std::vector<std::pair<int, std::string>> out;
    for (const auto& p : params) {
      const int g = program().is_view(p.grad) ? program().view_base(p.grad) : p.grad;
      if (std::none_of(out.begin(), out.end(), [&](const auto& e) { return e.first == g; }))
        out.emplace_back(g, p.name);
    }
    return out;
  }
};

BertTraining::BertTraining(Device& device, const BertConfig& config, BertShape micro_batch,
                           BertTrainingOptions o, PipelineStage stage)
    : state_(std::make_unique<State>()) {
  for (const double p : {o.dropout.hidden, o.dropout.attention}) {
    if (p < 0.0 || p >= 1.0) throw ConfigError(fmt::format("dropout must be in [0, 1), got {}", p));
  }
  if (o.max_predictions < 0) {
    throw ConfigError(fmt::format("max_predictions must be >= 0, got {}", o.max_predictions));
  }
  const DType precision = o.precision;
  if (precision != DType::f32 && precision != DType::bf16 && precision != DType::f16) {
    throw ConfigError(
        fmt::format("training precision must be f32, bf16 or f16, got {}", dtype_name(precision)));
  }
  optimizer_op(o.optimizer.kind);  // refuses an unknown kind before anything is declared
  auto& s = *state_;
  s.shape = micro_batch;
  s.config = config;
  s.optimizer = std::move(o.optimizer);
  s.seed = o.seed;
  s.max_predictions = std::min(o.max_predictions, micro_batch.seq);
  BertProgramOptions options;
  options.config = config;
  options.shape = micro_batch;
  options.training = true;
  options.max_predictions = s.max_predictions;
  options.dropout = o.dropout.hidden;
  options.attention_dropout = o.dropout.attention;
  options.head = {o.head.kind, o.head.num_labels, {}};
  options.recompute = std::move(o.recompute);
  options.stage = stage;
  options.packed_sequences = o.packed_sequences;
  if (o.products != DType::f32 && (precision != DType::f32 || o.products != DType::bf16))
    throw ConfigError(
        fmt::format("training products in {} need f32 tensors and bf16 (bf32), got "
                    "{} tensors",
                    dtype_name(o.products), dtype_name(precision)));
  options.products = o.products;
  s.head = o.head.kind;
  s.bert = declare_bert(device, precision, options);
  s.declare_optimizer();
}

BertTraining::~BertTraining() = default;

MemoryReport BertTraining::plan_memory() const {
  return plan_memory({});
}

MemoryReport BertTraining::plan_memory(const std::vector<MemoryItem>& extra) const {
  auto items = state_->program().memory_items();
  if (state_->program().device().properties().mode != DeviceMode::model) {
    // The host runs it, so its own copies count: a checkpoint's snapshot of
    // the f32 weights and the optimizer state (the larger of the two host
    // copies; the other is the weights as read, while loading).
    std::uint64_t snapshot = 0;
    for (const auto& item : items) {
      if ((item.category == "weights" && item.name == "f32") || item.category == "optimizer state")
        snapshot += item.bytes;
    }
    items.push_back({"host", "checkpoint snapshot (f32 weights and optimizer state)", snapshot});
  }
  items.insert(items.end(), extra.begin(), extra.end());
  return state_->program().plan_memory(std::move(items));
}

void BertTraining::load_weights(const TensorMap& weights) {
  auto& s = *state_;
  Program& p = s.program();
  if (!s.loaded) s.allocate();
  for (const auto& param : s.params) {
    auto it = weights.find(param.name);
    if (it == weights.end())
      throw ConfigError(fmt::format("weights: missing tensor '{}'", param.name));
    p.upload(param.weight, it->second.values);
    p.zero(param.grad);
    if (!s.owns(param)) continue;
    p.zero(param.m);
    p.zero(param.v);
  }
  // What the family's checkpoints do not hold: zeros, whatever the map says.
  for (const auto& parameter : s.bert->parameters) {
    if (!parameter.fixed) continue;
    p.zero(parameter.weight);
    p.zero(parameter.grad);
  }
  p.run(Phase::refresh);
  s.steps = 0;
  s.loaded = true;
}

StepLosses BertTraining::forward_backward(const TrainingBatch& batch, int accumulation_steps,
                                          double loss_scale) {
  stage_forward(batch, {}, accumulation_steps, loss_scale);
  stage_backward({});
  return last_losses();
}

std::vector<float> BertTraining::stage_forward(const TrainingBatch& batch,
                                               const std::vector<float>& input,
                                               int accumulation_steps, double loss_scale) {
  auto& s = *state_;
  if (!s.loaded) throw RuntimeFailure("BertTraining: load_weights before training");
  Program& p = s.program();
  const BertProgram& b = *s.bert;
  std::optional<TraceTrack::Scope> upload;
  upload.emplace(p.trace(), "upload", "host");
  p.upload(b.mask, batch.inputs.attention_mask);
  p.upload(b.rng, std::vector<std::int32_t>{static_cast<std::int32_t>(s.seed & 0x7fffffff),
                                            static_cast<std::int32_t>(batch.index & 0x7fffffff)});
  if (b.stage_input >= 0) {
    p.upload_floats(b.stage_input, input);
  } else {
    p.upload(b.ids, batch.inputs.input_ids);
    p.upload(b.types, b.types_of(batch.inputs.token_type_ids));
    if (b.positions >= 0) p.upload(b.positions, batch.inputs.position_ids);
  }
  if (b.relative_buckets >= 0)
    p.upload(b.relative_buckets,
             relative_bucket_input(
                 s.config, s.shape,
                 b.positions >= 0 ? batch.inputs.position_ids : std::vector<std::int32_t>{}));
  if (b.stage_output < 0) {  // the last stage: the head's labels and the loss scale
    p.upload(b.loss_scale, std::vector<float>{static_cast<float>(loss_scale / accumulation_steps)});
    if (s.head == TaskHead::Kind::question_answering) {
      s.upload_spans(batch);
    } else if (s.head == TaskHead::Kind::classification) {
      s.upload_classes(batch);
    } else if (s.max_predictions > 0) {
      const auto [positions, labels] = s.gather_labels(batch.mlm_labels);
      p.upload(b.mlm_positions, positions);
      p.upload(b.mlm_labels, labels);
    } else {
      p.upload(b.mlm_labels, batch.mlm_labels);
    }
    if (s.head == TaskHead::Kind::pretraining) p.upload(b.nsp_labels, batch.nsp_labels);
    if (b.nsp_positions >= 0) p.upload(b.nsp_positions, batch.nsp_positions);
  }
  upload.reset();
  p.run(Phase::forward);
  if (b.stage_output < 0) return {};
  return p.read_floats(b.stage_output);
}

std::vector<float> BertTraining::stage_backward(const std::vector<float>& output_grad) {
  auto& s = *state_;
  Program& p = s.program();
  const BertProgram& b = *s.bert;
  if (b.stage_output_grad >= 0) p.upload_floats(b.stage_output_grad, output_grad);
  if (s.overlap != nullptr) {
    Communicator& replicas = *std::exchange(s.overlap, nullptr);
    std::vector<GradientToReduce> gradients;
    for (const auto& [g, name] : s.gradient_tensors_named()) {
      const Tensor& t = p.bound(g);
      gradients.push_back({static_cast<float*>(t.buffer->data()),
                           static_cast<std::size_t>(t.numel()), name,
                           p.last_writer(Phase::backward, g).value_or(0)});
    }
    OverlappedAllReduce reduction(replicas, std::move(gradients), s.bucket_bytes);
    p.run(Phase::backward, [&](std::size_t op) { reduction.before_op(op); });
    // What backward did not hide is what the step waits for.
    s.all_reduce_seconds += reduction.finish();
    ++s.all_reduce_calls;
    s.gradients_reduced = true;
  } else {
    p.run(Phase::backward);
  }
  if (b.stage_input_grad < 0) return {};
  return p.read_floats(b.stage_input_grad);
}

StepLosses BertTraining::last_losses() const {
  const auto& s = *state_;
  const BertProgram& b = *s.bert;
  if (b.stage_output >= 0) return {};
  const Program& p = s.program();
  if (s.head != TaskHead::Kind::pretraining) {
    StepLosses task;
    task.task = p.download(b.head_loss)[0];
    return task;
  }
  const auto losses = p.download(b.losses);
  return {losses[0], losses[1]};
}

std::optional<double> BertTraining::optimizer_step(double learning_rate, double loss_scale) {
  std::optional<double> norm;
  timed(state_->optimizer_seconds, [&] { norm = apply_optimizer(learning_rate, loss_scale); });
  ++state_->optimizer_calls;
  return norm;
}

void BertTraining::reduce_gradients_during_next_backward(Communicator& replicas,
                                                         std::size_t bucket_bytes) {
  if (replicas.size() == 1) return;
  state_->overlap = &replicas;
  state_->bucket_bytes = bucket_bytes;
}

void BertTraining::all_reduce_gradients(Communicator& replicas) {
  if (replicas.size() == 1) return;
  auto& s = *state_;
  if (std::exchange(s.gradients_reduced, false)) return;
  timed(s.all_reduce_seconds, [&] {
    for (const auto& [g, name] : s.gradient_tensors_named()) {
      const Tensor& t = s.program().bound(g);
      replicas.set_purpose("gradient of " + name);
      replicas.all_reduce(t.buffer->data(), static_cast<std::size_t>(t.numel()), DType::f32,
                          ReduceOp::mean);
    }
  });
  ++s.all_reduce_calls;
}

std::vector<OpTime> BertTraining::profile() const {
  const auto& s = *state_;
  auto by_op = s.program().profile();
  by_op["optimizer"] = {"optimizer", s.optimizer.kind + " (sum of squares + update per tensor)",
                        s.optimizer_calls, s.optimizer_seconds};
  if (s.all_reduce_calls > 0) {
    by_op["gradient all-reduce"] = {"gradient all-reduce", "mean over replicas, per tensor",
                                    s.all_reduce_calls, s.all_reduce_seconds};
  }
  std::vector<OpTime> out;
  for (auto& [name, t] : by_op) out.push_back(std::move(t));
  std::sort(out.begin(), out.end(),
            [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

double BertTraining::gradient_sum_of_squares() const {
  auto& s = *state_;
  const Program& p = s.program();
  // Over every parameter (views included once: q, k and v are disjoint rows
  // of the fused projection).
  double sum = 0;
  for (const auto& param : s.params) {
    const std::array in{p.bound(param.grad)};
    const std::array out{p.bound(s.norm_out)};
    p.side(param.norm)->run(in, out);
    sum += p.download(s.norm_out)[0];
  }
  return sum;
}

std::optional<double> BertTraining::apply_optimizer(double learning_rate, double loss_scale) {
  return apply_update(learning_rate, loss_scale, gradient_sum_of_squares());
}

std::optional<double> BertTraining::apply_update(double learning_rate, double loss_scale,
                                                 double sum) {
  auto& s = *state_;
  Program& p = s.program();
  const auto& o = s.optimizer;
  if (!std::isfinite(sum)) {  // overflow under loss scaling: skip, as the seeds' scalers do
    s.zero_gradients();
    return std::nullopt;
  }
  ++s.steps;
  const double norm = std::sqrt(sum) / loss_scale;
  const double clip = o.max_grad_norm > 0 && norm > o.max_grad_norm ? o.max_grad_norm / norm : 1.0;
  const double scale = clip / loss_scale;
  const auto words = optimizer_step_words({learning_rate, scale, s.steps, 0});
  p.upload(s.hyper, std::vector<std::int64_t>(words.begin(), words.end()));
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    if (s.owns(s.params[i])) {
      p.side(s.params[i].update)->run(s.update_inputs[i], s.update_outputs[i]);  // zeroes the grad
    } else {
      p.zero(s.params[i].grad);  // its owner applies it
    }
  }
  if (s.shard_count > 1) {  // every replica takes each tensor from the replica that updated it
    for (const auto& param : s.params) {
      const Tensor& w = p.bound(param.weight);
      s.shards->set_purpose("updated " + param.name + " from its owner");
      s.shards->broadcast(w.buffer->data(), static_cast<std::size_t>(w.numel()), DType::f32,
                          param.owner);
    }
    // The updates wrote the compute copies of the tensors this replica owns;
    // the others arrived by broadcast, in f32 only.
    p.run(Phase::refresh);
  }
  return norm;
}

TensorMap BertTraining::weights() const {
  TensorMap out;
  for (const auto& param : state_->params) {
    out[param.name] = {state_->program().shape(param.weight),
                       state_->program().download(param.weight)};
  }
  return out;
}

TensorMap BertTraining::gradients() const {
  TensorMap out;
  for (const auto& param : state_->params) {
    out[param.name] = {state_->program().shape(param.grad), state_->program().download(param.grad)};
  }
  return out;
}

BertTraining::Stash BertTraining::stash() const {
  return state_->program().stash();
}

void BertTraining::unstash(const Stash& saved) {
  state_->program().unstash(saved);
}

std::uint64_t BertTraining::stash_bytes() const {
  return state_->program().stash_bytes();
}

void BertTraining::set_gradient(const std::string& name, const std::vector<float>& values) {
  for (const auto& param : state_->params) {
    if (param.name != name) continue;
    state_->program().upload_floats(param.grad, values);
    return;
  }
  throw RuntimeFailure(fmt::format("set_gradient: no parameter '{}' in this stage", name));
}

std::int64_t BertTraining::steps_taken() const {
  return state_->steps;
}

std::optional<std::vector<EstimatedSlice>> BertTraining::estimated_kernels(bool backward) const {
  return state_->program().estimated_ops(backward ? Phase::backward : Phase::forward);
}

void BertTraining::set_trace(TraceTrack* track) noexcept {
  state_->program().set_trace(track);
}

std::optional<TrainingWorkEstimate> BertTraining::estimate_work() const {
  const Program& p = state_->program();
  const auto forward = p.estimate_seconds(Phase::forward);
  const auto backward = p.estimate_seconds(Phase::backward);
  const auto refresh = p.estimate_seconds(Phase::refresh);
  const auto updates = p.estimate_side_seconds();
  std::uint64_t input_bytes = 0;
  for (const auto& item : p.memory_items())
    if (item.category == "inputs") input_bytes += item.bytes;
  const auto host_io =
      p.device().estimate_seconds(KernelDesc{OpKind::host_transfer,
                                             DType::i32,
                                             {{static_cast<std::int64_t>((input_bytes + 3) / 4)}},
                                             NoAttrs{}});
  if (!forward || !backward || !refresh || !updates || !host_io) return std::nullopt;
  // With sharded state each replica updates about 1/N of the parameters.
  return TrainingWorkEstimate{*forward, *backward,
                              (*updates + *refresh) / static_cast<double>(state_->shard_count),
                              *host_io};
}

std::int64_t BertTraining::parameter_count() const {
  std::int64_t count = 0;
  for (const int g : state_->gradient_tensors()) count += element_count(state_->program().shape(g));
  return count;
}

TensorMap BertTraining::state() const {
  const auto& s = *state_;
  TensorMap out = weights();
  for (const auto& param : s.params) {
    const auto& shape = s.program().shape(param.weight);
    for (const auto& [prefix, tensor] :
         {std::pair{"optimizer.m.", param.m}, std::pair{"optimizer.v.", param.v}}) {
      std::vector<float> values =
          s.owns(param) ? s.program().read_floats(tensor)
                        : std::vector<float>(static_cast<std::size_t>(element_count(shape)));
      if (s.shard_count > 1) {  // the owner's copy, to every replica
        s.shards->set_purpose(std::string(prefix) + param.name + " for the checkpoint");
        s.shards->broadcast(values.data(), values.size(), DType::f32, param.owner);
      }
      out[prefix + param.name] = {shape, std::move(values)};
    }
  }
  return out;
}

void BertTraining::shard_optimizer_state(Communicator& replicas) {
  auto& s = *state_;
  if (s.loaded) throw RuntimeFailure("shard_optimizer_state: call before load_weights");
  s.shards = &replicas;
  s.shard_rank = replicas.rank();
  s.shard_count = replicas.size();
  // Largest tensors first, each to the replica holding the least so far: the
  // same assignment on every replica, and shards within one tensor of equal.
  std::vector<std::size_t> order(s.params.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto size_of = [&](std::size_t i) {
    return element_count(s.program().shape(s.params[i].m));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return size_of(a) > size_of(b); });
  std::vector<std::int64_t> held(static_cast<std::size_t>(s.shard_count));
  for (std::size_t i : order) {
    const auto lightest =
        static_cast<int>(std::min_element(held.begin(), held.end()) - held.begin());
    auto& p = s.params[i];
    p.owner = lightest;
    held[static_cast<std::size_t>(lightest)] += size_of(i);
    for (int t : {p.m, p.v}) s.program().set_elsewhere(t, !s.owns(p));
  }
}

void BertTraining::load_state(const TensorMap& state, std::int64_t steps) {
  load_weights(state);
  auto& s = *state_;
  for (const auto& param : s.params) {
    for (const auto& [prefix, tensor] :
         {std::pair{"optimizer.m.", param.m}, std::pair{"optimizer.v.", param.v}}) {
      if (!s.owns(param)) break;  // another replica's shard
      auto it = state.find(prefix + param.name);
      if (it == state.end()) {
        throw ConfigError(fmt::format("missing tensor '{}{}'", prefix, param.name));
      }
      const auto wanted = static_cast<std::size_t>(element_count(s.program().shape(tensor)));
      if (it->second.values.size() != wanted)
        throw ConfigError(fmt::format("tensor '{}{}' holds {} values; the model's {} needs {}",
                                      prefix, param.name, it->second.values.size(),
                                      shape_string(s.program().shape(tensor)), wanted));
      s.program().upload_floats(tensor, it->second.values);
    }
  }
  s.steps = steps;
}

}  // namespace polyhal
