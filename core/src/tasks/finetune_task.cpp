#include "polyhal/finetune_task.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "polyhal/bert_inference.hpp"
#include "polyhal/bert_training.hpp"
#include "polyhal/bert_weights.hpp"
#include "polyhal/checkpoint_store.hpp"
#include "polyhal/error.hpp"
#include "polyhal/inference_task.hpp"
#include "polyhal/pretraining_data.hpp"
#include "polyhal/replica_group.hpp"
#include "tasks/finetune_data.hpp"
#include "tasks/pipeline_plan.hpp"
#include "tasks/trainer.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {
namespace {

bool given(const RunConfig& config, const std::string& key) {
  return config.lines.contains(key) || config.overrides.contains(key);
}

/// The weights to start from, the model they fit and its vocabulary.
struct StartingPoint {
  std::filesystem::path weights;  ///< empty: a seeded random initialisation
  std::filesystem::path hf_dir;   ///< checkpoint.init when it is a directory
  BertConfig model;
  std::filesystem::path vocab;
};

/// checkpoint.init is a pre-training checkpoint (.safetensors) or a Hugging
/// Face directory (config.json + model.safetensors [+ vocab.txt]); the
/// directory's config.json gives the model unless model.preset or
/// model.hf_config is set, and its vocab.txt the vocabulary unless data.vocab is.
/// `compile_only` with model.preset or model.hf_config set: checkpoint.init
/// need not exist yet (a plan before pre-training has finished).
StartingPoint starting_point(const RunConfig& config, bool compile_only) {
  StartingPoint s;
  const auto& init = config.checkpoint.init;
  if (compile_only && !init.empty() && !std::filesystem::exists(init) &&
      (given(config, "model.preset") || !config.model.hf_config.empty())) {
    // Planning needs the model's dimensions only, not its weights.
    s.model = resolve_bert_config(config.model);
    return s;
  }
  ModelSection model = config.model;
  const auto fail = [&](const std::string& problem) {
    throw ConfigError(
        fmt::format("{}: key 'checkpoint.init': {}", config.locate("checkpoint.init"), problem));
  };
  if (!init.empty() && std::filesystem::is_directory(init)) {
    s.hf_dir = init;
    s.weights = init / "model.safetensors";
    if (!std::filesystem::exists(s.weights))
      fail(
          fmt::format("{} has no model.safetensors (a Hugging Face directory holds config.json "
                      "and model.safetensors)",
                      init.string()));
    if (!given(config, "model.preset") && model.hf_config.empty()) {
      if (!std::filesystem::exists(init / "config.json"))
        fail(fmt::format("{} has no config.json: set model.preset or model.hf_config",
                         init.string()));
      model.hf_config = init / "config.json";
    }
  } else if (!init.empty()) {
    if (!std::filesystem::exists(init)) fail(fmt::format("no such file: {}", init.string()));
    s.weights = init;
  } else {
    s.weights = config.model.weights;
  }
  s.model = resolve_bert_config(model);
  s.vocab = config.data.vocab;
  if (s.vocab.empty() && !s.hf_dir.empty() && std::filesystem::exists(s.hf_dir / "vocab.txt"))
    s.vocab = s.hf_dir / "vocab.txt";
  return s;
}

/// The pre-trained encoder with the task's head, said out loud: which head
/// tensors were freshly initialised and which of the file's were not used.
TensorMap starting_weights(const StartingPoint& start, const RunConfig& config,
                           const TaskHead& head) {
  if (start.weights.empty()) {
    spdlog::warn(
        "no checkpoint.init or model.weights: fine-tuning randomly initialised weights "
        "(seed {}); results mean nothing beyond a smoke test",
        config.model.seed);
    return init_bert_weights(start.model, config.model.seed, head);
  }
  const std::string key = config.checkpoint.init.empty() ? "model.weights" : "checkpoint.init";
  HeadStart loaded;
  try {
    loaded = load_bert_weights_for_head(start.weights, start.model, head, config.model.seed);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: key '{}': {}", config.locate(key), key, e.what()));
  }
  spdlog::info("weights: {} ({})", start.weights.string(), hf_architecture(head));
  if (!loaded.initialised.empty())
    spdlog::info("  newly initialised (not in the file): {}", fmt::join(loaded.initialised, ", "));
  if (!loaded.unused.empty()) {
    const std::size_t shown = std::min<std::size_t>(loaded.unused.size(), 4);
    spdlog::info("  not used by {}: {} tensors ({}{})", hf_architecture(head), loaded.unused.size(),
                 fmt::join(loaded.unused.begin(),
                           loaded.unused.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                 loaded.unused.size() > shown ? ", ..." : "");
  }
  return std::move(loaded.weights);
}

/// The training row at stream position `position`: epochs of `per_epoch`
/// rows, each a shuffled order of the `rows` rows keyed by (seed, epoch).
std::int64_t training_row(std::uint64_t position, std::int64_t per_epoch, std::int64_t rows,
                          std::uint64_t seed) {
  const auto epoch = position / static_cast<std::uint64_t>(per_epoch);
  const auto offset = position % static_cast<std::uint64_t>(per_epoch);
  return sample_at(epoch * static_cast<std::uint64_t>(rows) + offset, rows, seed, true);
}

/// The head's outputs for every row of `rows` (row-major, `width` each):
/// replica r runs batches r, r + N, ...; the sum over replicas fills them all.
std::vector<float> head_outputs(BertInference& model, const ModelRows& rows, std::int64_t width,
                                Communicator& replicas) {
  const std::int64_t batch = model.shape().batch, seq = model.shape().seq;
  const std::int64_t count = rows.count();
  const std::int64_t batches = (count + batch - 1) / batch;
  std::vector<float> out(static_cast<std::size_t>(count * width), 0.0f);
  const bool spans = model.head().kind == TaskHead::Kind::question_answering;
  BertOutputs outputs;
  const auto begin = std::chrono::steady_clock::now();
  std::int64_t done = 0;
  for (std::int64_t b = replicas.rank(); b < batches; b += replicas.size()) {
    const std::int64_t first = b * batch, real = std::min(batch, count - first);
    std::vector<std::int64_t> indices(static_cast<std::size_t>(batch));
    for (std::int64_t j = 0; j < batch; ++j)  // a short last batch repeats its last row
      indices[static_cast<std::size_t>(j)] = first + std::min(j, real - 1);
    model.run(rows.batch(indices).inputs, &outputs);
    for (std::int64_t j = 0; j < real; ++j) {
      float* row = out.data() + (first + j) * width;
      if (spans) {
        std::copy_n(outputs.start_logits.begin() + j * seq, seq, row);
        std::copy_n(outputs.end_logits.begin() + j * seq, seq, row + seq);
      } else {
        std::copy_n(outputs.logits.begin() + j * width, width, row);
      }
    }
    // SQuAD's dev set is minutes of work on a CPU: say how far it is.
    ++done;
    const std::int64_t mine = (batches - replicas.rank() + replicas.size() - 1) / replicas.size();
    if (replicas.rank() == 0 && mine >= 20 && done % (mine / 10) == 0) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      spdlog::info("evaluating: {}/{} batches, ETA {:.0f} s", done, mine,
                   elapsed / static_cast<double>(done) * static_cast<double>(mine - done));
    }
  }
  if (replicas.size() > 1) replicas.all_reduce(out.data(), out.size(), DType::f32, ReduceOp::sum);
  return out;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw RuntimeFailure(fmt::format("{}: cannot read", file.string()));
  return text.str();
}

/// The fine-tuned model as Hugging Face's save_pretrained writes it, with
/// the vocabulary, so `from_pretrained(dir)` and checkpoint.init both take it.
void export_model(const std::filesystem::path& dir, const BertConfig& model, const TaskHead& head,
                  const TensorMap& weights, const std::filesystem::path& vocab) {
  std::filesystem::create_directories(dir);
  write_hf_config(model, dir / "config.json", head);
  save_bert_weights(weights, DType::f32, dir / "model.safetensors");
  if (!vocab.empty() &&
      std::filesystem::absolute(vocab) != std::filesystem::absolute(dir / "vocab.txt"))
    detail::write_file_atomically(dir / "vocab.txt", read_text(vocab));
}

}  // namespace

FinetuneResult run_finetuning(Device& device, const RunConfig& config, bool compile_only,
                              const PretrainObserver& on_step, const FinetuneObserver& on_eval,
                              Communicator* across_processes,
                              const std::vector<Device*>& stage_devices) {
  FinetuneResult result;
  const FinetuneSection& f = config.finetune;
  const StartingPoint start = starting_point(config, compile_only);
  const BertConfig& model = result.config = start.model;
  result.head = finetune_head(config);
  check_training_setup(device, config, across_processes);
  const std::int64_t seq = config.model.seq_len;
  if (seq > model.max_position_embeddings) {
    throw ConfigError(
        fmt::format("{}: key 'model.seq_len': {} tokens, but the model has {} "
                    "position embeddings",
                    config.locate("model.seq_len"), seq, model.max_position_embeddings));
  }
  const BertShape train_shape{config.batch.micro, seq};
  const BertShape eval_shape{f.eval_batch > 0 ? f.eval_batch : config.batch.micro, seq};
  const DType precision = config.model.precision;
  const int local_replicas = across_processes ? 1 : static_cast<int>(config.batch.replicas);
  const int total_replicas = across_processes ? across_processes->size() : local_replicas;
  const bool sharded = f.train && config.optimizer.shard_state && total_replicas > 1;
  const auto recompute = recompute_layers(config, model);
  result.stages = pipeline_stages(config, model);
  if (f.packed && seq > std::numeric_limits<std::uint16_t>::max()) {
    throw ConfigError(fmt::format("{}: key 'model.seq_len': packed rows hold at most {} tokens",
                                  config.locate("model.seq_len"),
                                  std::numeric_limits<std::uint16_t>::max()));
  }
  const int first_replica = across_processes ? across_processes->rank() : 0;
  const auto make_pipeline = [&](int replica) {
    return std::make_unique<PipelinedTraining>(
        pipeline_devices(device, stage_devices, replica, static_cast<int>(result.stages.size())),
        model, train_shape, optimizer_settings(config.optimizer), precision,
        DropoutSettings{config.model.dropout,
                        config.model.attention_dropout.value_or(config.model.dropout)},
        config.model.seed, 0, result.head, recompute, result.stages,
        f.packed ? f.max_sequences_per_pack : 0);
  };
  const auto make_training = [&] {
    return std::make_unique<BertTraining>(
        device, model, train_shape, optimizer_settings(config.optimizer), precision,
        DropoutSettings{config.model.dropout,
                        config.model.attention_dropout.value_or(config.model.dropout)},
        config.model.seed, 0, result.head, recompute, PipelineStage{},
        f.packed ? f.max_sequences_per_pack : 0);
  };
  const auto make_evaluator = [&] {
    return std::make_unique<BertInference>(device, model, eval_shape, precision, result.head,
                                           f.packed);
  };
  const std::int64_t global_batch = total_replicas * config.batch.grad_accum * config.batch.micro;
  double sequences_per_row = 1.0;  // packed rows: known once the data is read
  const auto estimate = [&](const BertTraining& replica) {
    result.estimate = estimate_training_step(
        replica, config.batch.grad_accum, static_cast<double>(global_batch) * sequences_per_row,
        estimate_gradient_all_reduce(device, result.parameters, total_replicas));
  };
  // The replicas' communicators outlive the models that hold them; a
  // stand-in group plans a sharded pipeline at compile time.
  std::unique_ptr<ReplicaGroup> group;
  if (!compile_only) group = std::make_unique<ReplicaGroup>(local_replicas, across_processes);
  std::unique_ptr<InProcessGroup> stand_in;
  std::unique_ptr<Communicator> stand_in_rank;
  std::vector<std::unique_ptr<BertTraining>> trainings;
  std::vector<std::unique_ptr<PipelinedTraining>> pipelines;
  const bool pipelined = f.train && !result.stages.empty();
  if (pipelined) {
    pipelines.push_back(make_pipeline(first_replica));
    if (sharded && group) {
      pipelines.front()->shard_optimizer_state(group->communicator(0));
    } else if (sharded) {
      stand_in = std::make_unique<InProcessGroup>(total_replicas);
      stand_in_rank = stand_in->communicator(0);
      pipelines.front()->shard_optimizer_state(*stand_in_rank);
    }
    PipelinePlan plan =
        plan_pipeline(*pipelines.front(), device, static_cast<int>(config.batch.grad_accum),
                      total_replicas, config.batch.micro);
    result.stage_memory = std::move(plan.stage_memory);
    result.memory = std::move(plan.memory);
    result.parameters = plan.parameters;
    result.estimate = plan.estimate;
  } else if (f.train) {
    trainings.push_back(make_training());
    result.memory = trainings.front()->plan_memory();
    result.parameters = trainings.front()->parameter_count();
    estimate(*trainings.front());
  } else {
    result.memory = make_evaluator()->plan_memory();
  }
  if (compile_only) return result;

  if (start.vocab.empty()) {
    throw ConfigError(fmt::format(
        "{}: key 'data.vocab': required by task {}: the vocab.txt the model was pre-trained with",
        config.locate("data.vocab"), config.task));
  }
  const auto data = open_finetune_data(config, start.vocab, seq);
  RunConfig schedule = config;
  if (f.train) {
    result.train_rows = data->rows(Split::train).count();
    if (result.train_rows < global_batch) {
      throw ConfigError(fmt::format(
          "{}: key 'finetune.train_file': {} training rows, fewer than one global batch of {} "
          "(replicas x grad_accum x micro)",
          config.locate("finetune.train_file"), result.train_rows, global_batch));
    }
    if (f.packed) {
      // Packed rows: a row costs about what an unpacked one does and holds more sequences.
      const ModelRows& rows = data->rows(Split::train);
      sequences_per_row =
          static_cast<double>(rows.sequence_count()) / static_cast<double>(rows.count());
      if (pipelined) {
        result.estimate =
            plan_pipeline(*pipelines.front(), device, static_cast<int>(config.batch.grad_accum),
                          total_replicas, config.batch.micro, sequences_per_row)
                .estimate;
      } else {
        estimate(*trainings.front());
      }
    }
    result.steps_per_epoch = result.train_rows / global_batch;
    result.total_steps = result.steps_per_epoch * f.epochs;
    schedule.steps = result.total_steps;
    if (!given(config, "optimizer.warmup_steps"))
      schedule.optimizer.warmup_steps =
          std::llround(f.warmup_proportion * static_cast<double>(result.total_steps));
    result.warmup_steps = schedule.optimizer.warmup_steps;
    spdlog::info(
        "{} training rows: {} epochs of {} steps of {} rows ({} left out per epoch), "
        "{} warm-up steps",
        result.train_rows, f.epochs, result.steps_per_epoch, global_batch,
        result.train_rows - result.steps_per_epoch * global_batch, result.warmup_steps);
  }

  for (int r = 1; r < local_replicas && pipelined; ++r) {
    pipelines.push_back(make_pipeline(first_replica + r));
    if (sharded) pipelines.back()->shard_optimizer_state(group->communicator(r));
  }
  for (int r = 1; r < local_replicas && f.train && !pipelined; ++r)
    trainings.push_back(make_training());
  if (sharded && !pipelined) {
    for (int r = 0; r < local_replicas; ++r)
      trainings[static_cast<std::size_t>(r)]->shard_optimizer_state(group->communicator(r));
    result.memory = trainings.front()->plan_memory();
    estimate(*trainings.front());
  }

  // Resume only from this task's own checkpoints of the same schedule.
  const CheckpointStore store(config.checkpoint.dir);
  const std::string writer = "polyhal " + config.task;
  std::optional<CheckpointStore::Checkpoint> resume;
  if (f.train && config.checkpoint.resume) {
    if (const auto latest = store.latest()) {
      resume = CheckpointStore::load(*latest);
      const auto found = resume->metadata.find("writer");
      const std::string found_writer = found == resume->metadata.end() ? "unknown" : found->second;
      if (found_writer != writer) {
        throw ConfigError(fmt::format(
            "{}: key 'checkpoint.dir': {} holds checkpoints of '{}', not of this task: use "
            "another checkpoint.dir (checkpoint.init starts from them)",
            config.locate("checkpoint.dir"), config.checkpoint.dir.string(), found_writer));
      }
      const auto steps = resume->metadata.find("total_steps");
      if (steps == resume->metadata.end() || steps->second != std::to_string(result.total_steps)) {
        throw ConfigError(fmt::format(
            "{}: key 'checkpoint.dir': {} was written for a schedule of {} steps, this config "
            "makes {} (other data, batch or epochs): use another checkpoint.dir, or "
            "checkpoint.resume: false",
            config.locate("checkpoint.dir"), resume->path.string(),
            steps == resume->metadata.end() ? "unknown" : steps->second, result.total_steps));
      }
    }
  }
  TensorMap initial;
  if (!resume) initial = starting_weights(start, config, result.head);
  std::int64_t done = 0;
  for (auto& training : trainings) {
    if (resume) {
      training->load_state(resume->state, resume->step);
    } else {
      training->load_weights(initial);
    }
  }
  for (auto& pipeline : pipelines) {
    if (resume) {
      pipeline->load_state(resume->state, resume->step);
    } else {
      pipeline->load_weights(initial);
    }
  }
  if (resume) {
    done = resume->step;
    spdlog::info("resumed from {} at step {}", resume->path.string(), done);
  }
  result.first_step = done + 1;
  LossScaler scaler = LossScaler::from_config(config.optimizer, precision);
  if (resume) scaler.restore(resume->metadata);
  resume.reset();
  if (f.train) initial = {};  // each replica holds the weights now

  const std::uint64_t seed = config.data.seed;
  const std::int64_t per_epoch = result.steps_per_epoch * global_batch;
  const ModelRows& train_rows = data->rows(Split::train);
  const BatchSource batches = [&](std::uint64_t index) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(config.batch.micro));
    for (std::size_t j = 0; j < rows.size(); ++j)
      rows[j] = training_row(index * rows.size() + j, per_epoch, result.train_rows, seed);
    TrainingBatch batch = train_rows.batch(rows);
    batch.index = index;
    return batch;
  };
  TrainingLog log;
  group->run([&](int r) {
    Communicator& replicas = group->communicator(r);
    const bool lead = replicas.rank() == 0;
    std::unique_ptr<BertInference> evaluator;
    const auto evaluate = [&](Split split, std::int64_t epoch, std::int64_t step,
                              const TensorMap& weights) {
      const auto begin = std::chrono::steady_clock::now();
      if (!evaluator) evaluator = make_evaluator();
      evaluator->load_weights(weights);
      const auto outputs =
          head_outputs(*evaluator, data->rows(split), data->output_width(), replicas);
      if (!lead) return;
      FinetuneEvaluation e;
      e.split = split == Split::eval ? "eval" : "predict";
      e.epoch = epoch;
      e.step = step;
      e.rows = data->rows(split).count();
      auto report = data->evaluate(split, outputs,
                                   f.output_dir.empty() ? f.output_dir : f.output_dir / e.split);
      e.metrics = std::move(report.metrics);
      e.files = std::move(report.files);
      e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      result.evaluations.push_back(e);
      if (on_eval) on_eval(e);
    };
    if (!f.train) {
      if (f.eval) evaluate(Split::eval, 0, 0, initial);
      if (f.predict) evaluate(Split::predict, 0, 0, initial);
      return;
    }
    const auto training = pipelined ? training_model(*pipelines[static_cast<std::size_t>(r)])
                                    : training_model(*trainings[static_cast<std::size_t>(r)]);
    LossScaler replica_scaler = scaler;
    Trainer trainer(*training, replicas, schedule, batches, store, replica_scaler,
                    {{"model", hf_architecture(result.head)},
                     {"writer", writer},
                     {"total_steps", std::to_string(result.total_steps)}},
                    sharded);
    for (std::int64_t epoch = 1; epoch <= f.epochs; ++epoch) {
      const std::int64_t last = epoch * result.steps_per_epoch;
      const std::int64_t first = std::max(done + 1, last - result.steps_per_epoch + 1);
      if (first > last) continue;  // done before the resume
      trainer.run(first, last, on_step, log);
      if (f.eval) evaluate(Split::eval, epoch, last, training->weights());
    }
    if (f.predict) evaluate(Split::predict, f.epochs, result.total_steps, training->weights());
  });
  result.steps = std::move(log.steps);
  result.checkpoints = std::move(log.checkpoints);

  const bool lead = !across_processes || across_processes->rank() == 0;
  const std::filesystem::path export_dir = !f.output_dir.empty() ? f.output_dir / "model"
                                           : !config.checkpoint.dir.empty()
                                               ? config.checkpoint.dir / "hf"
                                               : std::filesystem::path();
  if (lead && f.train && result.total_steps > done && !export_dir.empty()) {
    export_model(export_dir, model, result.head,
                 pipelined ? pipelines.front()->weights() : trainings.front()->weights(),
                 start.vocab);
    result.exported = export_dir;
  }
  return result;
}

}  // namespace polyhal
