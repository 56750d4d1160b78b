#include "polyhal/pretrain_task.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <random>
#include <regex>
#include <thread>

#include "polyhal/bert_weights.hpp"
#include "polyhal/error.hpp"
#include "polyhal/inference_task.hpp"
#include "polyhal/pretraining_data.hpp"

namespace polyhal {
namespace {

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, std::int64_t step) {
  return dir / fmt::format("checkpoint-{:08d}.safetensors", step);
}

/// Weights to start from (phase 2 from phase 1): a checkpoint or a weights
/// file; optimizer state is dropped and a shorter position table is extended
/// with freshly initialised rows.
TensorMap initial_weights(const std::filesystem::path& file, const BertConfig& config,
                          std::uint64_t seed) {
  TensorMap raw = read_safetensors(file);
  TensorMap weights;
  for (auto& [name, tensor] : raw) {
    if (!name.starts_with("optimizer.")) weights.emplace(name, std::move(tensor));
  }
  const std::string position = "bert.embeddings.position_embeddings.weight";
  if (auto it = weights.find(position); it != weights.end() && it->second.shape.size() == 2 &&
                                        it->second.shape[0] < config.max_position_embeddings) {
    const auto fresh = init_bert_weights(config, seed).at(position);
    const std::int64_t rows = it->second.shape[0], h = it->second.shape[1];
    std::vector<float> extended = fresh.values;
    std::copy(it->second.values.begin(), it->second.values.end(), extended.begin());
    spdlog::info("extended position embeddings from {} to {} rows", rows,
                 config.max_position_embeddings);
    it->second = {{config.max_position_embeddings, h}, std::move(extended)};
  }
  // Re-check against the model through the normal loader's rules.
  const auto temporary = std::filesystem::temp_directory_path() /
                         fmt::format("polyhal-init-{}.safetensors", ::getpid());
  write_safetensors(weights, DType::f32, temporary);
  try {
    auto checked = load_bert_weights(temporary, config);
    std::filesystem::remove(temporary);
    return checked;
  } catch (const ConfigError& e) {
    std::filesystem::remove(temporary);
    throw ConfigError(fmt::format("checkpoint.init {}: {}", file.string(), e.what()));
  }
}

}  // namespace

double learning_rate_at(const OptimizerSection& o, std::int64_t step, std::int64_t total) {
  if (o.warmup_steps > 0 && step <= o.warmup_steps) {
    return o.learning_rate * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  }
  if (o.schedule == "constant") return o.learning_rate;
  if (o.schedule == "exponential") {
    return o.learning_rate * std::pow(o.decay_rate, static_cast<double>(step - o.warmup_steps) /
                                                        static_cast<double>(o.decay_steps));
  }
  if (o.schedule == "steps") {
    double lr = o.learning_rate;
    for (const auto& [from, value] : o.step_list) {
      if (step >= from) lr = value;
    }
    return lr;
  }
  // Polynomial decay from the end of warm-up to `total`.
  const double span = static_cast<double>(std::max<std::int64_t>(1, total - o.warmup_steps));
  const double done = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return (o.learning_rate - o.end_learning_rate) * std::pow(1.0 - done, o.power) +
         o.end_learning_rate;
}

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return std::nullopt;
  static const std::regex pattern(R"(checkpoint-(\d{8})\.safetensors)");
  std::optional<std::filesystem::path> best;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    // Temporary files (".tmp") of an interrupted write never match.
    if (std::regex_match(entry.path().filename().string(), pattern)) {
      if (!best || entry.path().filename() > best->filename()) best = entry.path();
    }
  }
  return best;
}

PretrainResult run_pretraining(Device& device, const RunConfig& config, bool compile_only,
                               const PretrainObserver& observer, Communicator* across_processes) {
  PretrainResult result;
  result.config = resolve_bert_config(config.model);
  result.model_name =
      config.model.hf_config.empty() && config.model.dims.empty() ? config.model.preset : "custom";
  const DType precision = config.model.precision;
  if (!device.supports(precision)) {
    throw ConfigError(fmt::format(
        "{}: key 'model.precision': {} does not compute in {}{}", config.locate("model.precision"),
        device.name(), dtype_name(precision),
        precision == DType::bf16 ? " (the IPU has f16 and f32: use f16 with loss scaling)"
                                 : " (use bf16 or f32)"));
  }
  const BertShape shape{config.batch.micro, config.model.seq_len};
  OptimizerSettings settings;
  const auto& o = config.optimizer;
  settings.kind = o.name;
  settings.learning_rate = o.learning_rate;
  settings.beta1 = o.beta1;
  settings.beta2 = o.beta2;
  settings.epsilon = o.epsilon;
  settings.weight_decay = o.weight_decay;
  settings.momentum = o.momentum;
  settings.max_grad_norm = o.max_grad_norm;
  // The data never labels more than max_predictions positions per sequence,
  // so the MLM head runs on those rows only.
  const auto data = open_pretraining_data(config, result.config, shape);
  spdlog::info("data: {}", data->description());
  const auto make_replica = [&] {
    return std::make_unique<BertTraining>(
        device, result.config, shape, settings, precision,
        DropoutSettings{config.model.dropout,
                        config.model.attention_dropout.value_or(config.model.dropout)},
        config.model.seed, data->max_predictions());
  };
  const int local_replicas = across_processes ? 1 : static_cast<int>(config.batch.replicas);
  if (across_processes && config.batch.replicas != 1 &&
      config.batch.replicas != across_processes->size()) {
    throw ConfigError(fmt::format(
        "{}: key 'batch.replicas': {} replicas, but mpirun started {} ranks (one replica each); "
        "set it to {} or leave it at 1",
        config.locate("batch.replicas"), config.batch.replicas, across_processes->size(),
        across_processes->size()));
  }
  // One communicator per replica of this process: the MPI one, the ranks of
  // an in-process group, or a single rank.
  const int total_replicas = across_processes ? across_processes->size() : local_replicas;
  std::unique_ptr<InProcessGroup> group;
  std::vector<std::unique_ptr<Communicator>> owned_comms;
  std::vector<Communicator*> comms;
  if (across_processes) {
    comms.push_back(across_processes);
  } else if (local_replicas == 1) {
    owned_comms.push_back(make_single_rank_communicator());
  } else {
    group = std::make_unique<InProcessGroup>(local_replicas);
    for (int r = 0; r < local_replicas; ++r) owned_comms.push_back(group->communicator(r));
  }
  for (auto& c : owned_comms) comms.push_back(c.get());
  const bool sharded = o.shard_state && total_replicas > 1;
  if (o.shard_state && total_replicas == 1)
    spdlog::warn("optimizer.shard_state: one replica, nothing to shard");

  std::vector<std::unique_ptr<BertTraining>> replicas;
  replicas.push_back(make_replica());
  result.memory = replicas.front()->plan_memory();
  result.parameters = replicas.front()->parameter_count();
  if (total_replicas > 1) {
    // f32 master gradients, as polyhal all-reduces them.
    result.estimated_all_reduce_seconds = device.estimate_seconds(KernelDesc{
        OpKind::all_reduce, DType::f32, {{result.parameters}}, AllReduceAttrs{total_replicas}});
  }
  if (sharded) {
    result.unsharded_memory = result.memory;
    if (compile_only) {
      // The report of one replica's shard: plan with a stand-in group of the
      // run's size (no collective runs at compile time).
      InProcessGroup plan_group(total_replicas);
      const auto first = plan_group.communicator(0);
      auto planned = make_replica();
      planned->shard_optimizer_state(*first);
      result.memory = planned->plan_memory();
    } else {
      replicas.front()->shard_optimizer_state(*comms.front());
      result.memory = replicas.front()->plan_memory();
    }
  }
  if (compile_only) return result;
  for (int r = 1; r < local_replicas; ++r) {
    replicas.push_back(make_replica());
    if (sharded) replicas.back()->shard_optimizer_state(*comms[static_cast<std::size_t>(r)]);
  }

  std::int64_t done = 0;
  const auto resume_from =
      config.checkpoint.resume ? latest_checkpoint(config.checkpoint.dir) : std::nullopt;
  for (auto& training : replicas) {  // every replica starts from the same state
    if (resume_from) {
      const auto metadata = read_safetensors_metadata(*resume_from);
      auto it = metadata.find("step");
      if (it == metadata.end())
        throw ConfigError(
            fmt::format("{}: checkpoint has no step in its metadata", resume_from->string()));
      done = std::stoll(it->second);
      training->load_state(read_safetensors(*resume_from), done);
    } else if (!config.checkpoint.init.empty()) {
      training->load_weights(
          initial_weights(config.checkpoint.init, result.config, config.model.seed));
    } else if (!config.model.weights.empty()) {
      training->load_weights(load_bert_weights(config.model.weights, result.config));
    } else {
      training->load_weights(init_bert_weights(result.config, config.model.seed));
    }
  }
  if (resume_from) spdlog::info("resumed from {} at step {}", resume_from->string(), done);
  result.first_step = done + 1;
  // Loss scaling: the seeds' static --loss-scaling or a dynamic scaler that
  // halves on overflow (skipping the step) and doubles after a run of good steps.
  const std::string scaling =
      o.loss_scaling == "auto" ? (precision == DType::f16 ? "dynamic" : "none") : o.loss_scaling;
  double initial_scale = scaling == "none" ? 1.0 : o.loss_scale;
  std::int64_t initial_good_steps = 0;
  if (resume_from) {
    const auto metadata = read_safetensors_metadata(*resume_from);
    if (auto it = metadata.find("loss_scale"); it != metadata.end())
      initial_scale = std::stod(it->second);
    if (auto it = metadata.find("good_steps"); it != metadata.end())
      initial_good_steps = std::stoll(it->second);
  }

  // One replica's loop. Rank 0 (of all replicas, in any process) reports and
  // writes checkpoints; every replica computes the same loss scale and
  // update, because gradients and losses are averaged before they are used.
  const std::int64_t accumulation = config.batch.grad_accum;
  const auto train = [&](BertTraining& training, Communicator& comm) {
    const bool lead = comm.rank() == 0;
    const auto replica_count = static_cast<std::uint64_t>(comm.size());
    double loss_scale = initial_scale;
    std::int64_t good_steps = initial_good_steps;
    auto save = [&](std::int64_t step) {
      if (config.checkpoint.dir.empty()) return;
      // Sharded optimizer state is gathered from every replica: a collective.
      TensorMap snapshot;
      if (lead || sharded) snapshot = training.state();
      if (!lead) return;
      std::filesystem::create_directories(config.checkpoint.dir);
      const auto path = checkpoint_path(config.checkpoint.dir, step);
      write_safetensors(snapshot, DType::f32, path,
                        {{"step", std::to_string(step)},
                         {"model", result.model_name},
                         {"writer", "polyhal pretrain"},
                         {"loss_scale", fmt::format("{:.17g}", loss_scale)},
                         {"good_steps", std::to_string(good_steps)}});
      result.checkpoints.push_back(path);
      spdlog::info("checkpoint {}", path.string());
    };
    for (std::int64_t step = done + 1; step <= config.steps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      PretrainStep record;
      record.step = step;
      record.learning_rate = learning_rate_at(o, step, config.steps);
      std::array<float, 2> losses{};
      for (std::int64_t micro = 0; micro < accumulation; ++micro) {
        // Replica r takes every replica_count-th micro-batch of the stream, so
        // N replicas see exactly what one replica with N x the accumulation would.
        const auto index =
            (static_cast<std::uint64_t>((step - 1) * accumulation + micro)) * replica_count +
            static_cast<std::uint64_t>(comm.rank());
        const auto micro_losses = training.forward_backward(
            data->batch(index), static_cast<int>(accumulation), loss_scale);
        losses[0] += static_cast<float>(micro_losses.mlm / static_cast<double>(accumulation));
        losses[1] += static_cast<float>(micro_losses.nsp / static_cast<double>(accumulation));
      }
      comm.all_reduce(losses.data(), losses.size(), DType::f32, ReduceOp::mean);
      training.all_reduce_gradients(comm);
      record.mlm_loss = losses[0];
      record.nsp_loss = losses[1];
      record.loss_scale = loss_scale;
      const auto norm = training.optimizer_step(record.learning_rate, loss_scale);
      record.skipped = !norm.has_value();
      record.grad_norm = norm.value_or(std::numeric_limits<double>::infinity());
      if (record.skipped) {
        if (lead) {
          spdlog::warn(
              "step {}: gradient overflow at loss scale {:g}: step skipped{}", step, loss_scale,
              scaling == "dynamic" ? fmt::format(", loss scale now {:g}", loss_scale / 2) : "");
        }
        if (scaling == "dynamic") loss_scale /= 2;
        good_steps = 0;
      } else if (scaling == "dynamic" && ++good_steps % o.loss_scale_growth_interval == 0) {
        loss_scale *= 2;
      }
      record.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (lead) {
        result.steps.push_back(record);
        if (observer) observer(record, config.steps);
      }
      if (config.checkpoint.every > 0 && step % config.checkpoint.every == 0 &&
          step != config.steps)
        save(step);  // every replica: with sharding, saving is a collective
    }
    if (config.steps > done) save(config.steps);
  };

  if (replicas.size() == 1) {
    train(*replicas.front(), *comms.front());
  } else {
    // Replicas as threads sharing the device; a replica that fails abandons
    // the group so the others stop at their next collective instead of waiting.
    std::vector<std::exception_ptr> failures(replicas.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < local_replicas; ++r) {
      threads.emplace_back([&, r] {
        try {
          train(*replicas[static_cast<std::size_t>(r)], *comms[static_cast<std::size_t>(r)]);
        } catch (...) {
          failures[static_cast<std::size_t>(r)] = std::current_exception();
          group->abandon(r);
        }
      });
    }
    for (auto& t : threads) t.join();
    // The first failure is the cause; the others only report that it happened.
    std::exception_ptr cause;
    for (const auto& f : failures) {
      if (!f) continue;
      try {
        std::rethrow_exception(f);
      } catch (const RuntimeFailure& e) {
        if (std::string(e.what()).find("; stopping with it") == std::string::npos) cause = f;
      } catch (...) {
        cause = f;
      }
      if (cause) break;
    }
    for (const auto& f : failures)
      if (!cause && f) cause = f;
    if (cause) std::rethrow_exception(cause);
  }
  result.profile = replicas.front()->profile();
  const bool lead = !across_processes || across_processes->rank() == 0;
  if (lead && !config.checkpoint.dir.empty() && config.steps > done) {
    // The final weights as a Hugging Face directory (BertForPreTraining.from_pretrained).
    result.exported = config.checkpoint.dir / "hf";
    std::filesystem::create_directories(result.exported);
    write_hf_config(result.config, result.exported / "config.json");
    save_bert_weights(replicas.front()->weights(), DType::f32,
                      result.exported / "model.safetensors");
  }
  return result;
}

}  // namespace polyhal
