// Task `pretrain`: BERT MLM + NSP pre-training with progress, metrics and
// checkpoints; one replica per mpirun rank under `collective: mpi`.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <cstring>

#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/step_progress.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "pretrain_section.hpp"

#include "polyhal/app/pretrain_task.hpp"
#include "polyhal/app/run_outputs.hpp"

namespace polyhal {
namespace {

/// One evaluation: a metrics line and a line on stdout.
void report_evaluation(const PretrainEvaluation& e, const RunConfig& config,
                       MetricsWriter& metrics) {
  metrics.write({{"event", "eval"},
                 {"step", e.step},
                 {"sequences", e.sequences},
                 {"masked_tokens", e.masked_tokens},
                 {"mlm_accuracy", e.mlm_accuracy},
                 {"nsp_accuracy", e.nsp_accuracy},
                 {"mlm_loss", e.mlm_loss},
                 {"nsp_loss", e.nsp_loss},
                 {"seconds", e.seconds}});
  std::cout << fmt::format(
      "eval after step {}: masked-LM accuracy {:.4f} ({} tokens), NSP accuracy {:.4f}, loss "
      "{:.4f} + {:.4f} ({} sequences in {:.1f} s){}\n",
      e.step, e.mlm_accuracy, e.masked_tokens, e.nsp_accuracy, e.mlm_loss, e.nsp_loss, e.sequences,
      e.seconds,
      e.reached_target ? fmt::format(": target {} reached, the run ends here",
                                     config.section<EvalSection>().stop_at)
                       : "");
}

/// optimizer.shard_state: what sharding saves per replica.
void print_sharding_saving(const PretrainResult& r, std::int64_t replicas) {
  const auto state_bytes = [](const MemoryReport& m) {
    std::uint64_t bytes = 0;
    for (const auto& item : m.items)
      if (item.category.starts_with("optimizer state")) bytes += item.bytes;
    return bytes;
  };
  const double mib = 1024.0 * 1024.0;
  const auto sharded = state_bytes(r.memory), whole = state_bytes(*r.unsharded_memory);
  std::cout << fmt::format(
      "  optimizer state sharded over {} replicas: {:.1f} MiB per replica instead of {:.1f} MiB "
      "(saves {:.1f} MiB: {:.1f} MiB per replica in all instead of {:.1f} MiB)\n",
      replicas, static_cast<double>(sharded) / mib, static_cast<double>(whole) / mib,
      static_cast<double>(whole - sharded) / mib,
      static_cast<double>(r.memory.required_bytes) / mib,
      static_cast<double>(r.unsharded_memory->required_bytes) / mib);
}

/// The steps run: throughput and loss in the summary and on stdout.
void report_steps(const PretrainResult& r, std::int64_t global_batch, bool model,
                  nlohmann::json& summary) {
  double total = 0;
  std::int64_t trained = 0;  // sequences: packed rows hold several
  for (const auto& s : r.steps) {
    total += s.seconds;
    trained += s.sequences > 0 ? s.sequences : global_batch;
  }
  summary["final_loss"] = r.steps.back().loss();
  summary["steps_run"] = r.steps.size();
  summary["sequences_trained"] = trained;
  if (!model) summary["sequences_per_second"] = static_cast<double>(trained) / total;
  if (r.first_step > 1) std::cout << fmt::format("  resumed at step {}\n", r.first_step);
  // The end-of-run summary a person reads: time, throughput, where the loss ended.
  std::cout << fmt::format(
      "  done: {} steps in {} ({}), {} sequences, final loss {:.4f} (first {:.4f})\n",
      r.steps.size(), clock_text(total),
      model ? "host simulation of the modelled device"
            : fmt::format("{:.1f} sequences/s", static_cast<double>(trained) / total),
      trained, r.steps.back().loss(), r.steps.front().loss());
}

/// A finished run run again: what it had reached, not silence.
void report_done_before(const PretrainResult& r, nlohmann::json& summary) {
  summary["steps_run"] = 0;
  summary["steps_done_before"] = r.first_step - 1;
  if (r.resumed_loss) summary["final_loss"] = *r.resumed_loss;
  std::cout << fmt::format(
      "  done before: {} of {} steps{} (checkpoint {})\n", r.first_step - 1, r.total_steps,
      r.resumed_loss ? fmt::format(", final loss {:.4f}", *r.resumed_loss) : std::string(),
      r.resumed_checkpoint.string());
}

/// The last evaluation and the host profile, in the summary.
void summarise_evaluation_and_profile(const PretrainResult& r, bool model,
                                      nlohmann::json& summary) {
  if (!r.evaluations.empty()) {
    const auto& e = r.evaluations.back();
    summary["eval_step"] = e.step;
    summary["eval_mlm_accuracy"] = e.mlm_accuracy;
    summary["eval_nsp_accuracy"] = e.nsp_accuracy;
    summary["eval_mlm_loss"] = e.mlm_loss;
    summary["eval_nsp_loss"] = e.nsp_loss;
    summary["reached_target"] = e.reached_target;
  }
  if (!r.profile.empty()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& t : r.profile) {
      ops.push_back({{"op", t.op}, {"calls", t.calls}, {"seconds", t.seconds}});
      spdlog::debug("profile {:<22} {:>6} calls {:>9.3f} s  {}", t.op, t.calls, t.seconds,
                    t.implementation);
    }
    summary[model ? "host_simulation_profile" : "profile"] = ops;
  }
}

int run_bert_pretraining(const TaskContext& context) {
  Device& device = context.device;
  const RunConfig& config = context.config;
  const RunOptions& run = context.options;
  MetricsWriter& metrics = context.metrics;
  Communicator* world = context.world;
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const std::int64_t replicas = context.plan.placement.replicas;
  const std::int64_t global_batch = context.plan.placement.global_batch();
  StepProgress observer(config.log_every, global_batch, true, model, metrics, run.progress);
  std::cout << fmt::format(
      "pretrain: BERT {} seq {}, micro-batch {} x grad_accum {} x replicas {} = global batch {}, "
      "{}, {} on {} ({})\n",
      config.model.hf_config.empty() && config.model.dir.empty() ? config.model.preset : "custom",
      context.plan.model.seq_len, context.plan.placement.micro, context.plan.placement.grad_accum,
      replicas, global_batch, config.optimizer.name, dtype_name(context.plan.precision.activations),
      p.name, p.product);
  const auto on_eval = [&](const PretrainEvaluation& e) { report_evaluation(e, config, metrics); };
  const auto trace = make_step_trace(device, run, world);
  const auto r =
      run_pretraining(context, run.compile_only, std::ref(observer), on_eval, trace.get());
  if (!r.eval_data.empty()) std::cout << fmt::format("  evaluation: {}\n", r.eval_data);
  const nlohmann::json stages =
      print_plan(r.stages, r.stage_memory, r.memory, r.config.num_hidden_layers,
                 context.plan.placement.grad_accum);
  if (r.estimated_all_reduce_seconds) {
    std::cout << fmt::format(
        "  estimated gradient all-reduce: {:.2f} ms per optimizer step ({:.1f} MiB f32 over {} "
        "replicas, {} model's links; estimate, not measured)\n",
        *r.estimated_all_reduce_seconds * 1e3,
        static_cast<double>(r.parameters) * 4.0 / (1024.0 * 1024.0), replicas, p.name);
  }
  if (r.collective_engine) std::cout << "  " << *r.collective_engine << "\n";
  if (r.unsharded_memory) print_sharding_saving(r, replicas);
  nlohmann::json summary{{"backend", config.backend},
                         {"device", p.name},
                         {"mode", std::string(device_mode_name(p.mode))},
                         {"task", config.task},
                         {"model", "bert-" + r.model_name},
                         {"precision", std::string(dtype_name(context.plan.precision.activations))},
                         {"precision_reason", context.plan.precision.reason},
                         {"seq_len", context.plan.model.seq_len},
                         {"micro_batch", context.plan.placement.micro},
                         {"grad_accum", context.plan.placement.grad_accum},
                         {"replicas", replicas},
                         {"collective", config.collective.engine},
                         {"global_batch", global_batch},
                         {"optimizer", config.optimizer.name},
                         {"compile_only", run.compile_only},
                         {"fits", r.memory.fits},
                         {"memory_required_bytes", r.memory.required_bytes},
                         {"first_step", r.first_step}};
  if (r.estimated_all_reduce_seconds)
    summary["estimated_all_reduce_seconds"] = *r.estimated_all_reduce_seconds;
  if (r.collective_engine) summary["collective_engine"] = *r.collective_engine;
  if (r.stopped_by_signal) {
    summary["stopped_by_signal"] = strsignal(r.stopped_by_signal);
    std::cout << fmt::format(
        "  stopped by {} after step {}: run the same command to resume from its checkpoint\n",
        strsignal(r.stopped_by_signal), r.steps.empty() ? r.first_step - 1 : r.steps.back().step);
  }
  if (!stages.empty()) summary["pipeline_stages"] = stages;
  if (!r.steps.empty()) report_steps(r, global_batch, model, summary);
  if (r.steps.empty() && !run.compile_only && !r.resumed_checkpoint.empty())
    report_done_before(r, summary);
  summarise_evaluation_and_profile(r, model, summary);
  if (!r.checkpoints.empty())
    std::cout << fmt::format("  last checkpoint: {}\n", r.checkpoints.back().string());
  if (!r.exported.empty()) {
    std::cout << fmt::format("  Hugging Face weights: {}\n", r.exported.string());
  }
  report_training_estimate(r.estimate, p, summary);
  if (!run.compile_only) report_peak_memory(device, r.memory, summary);
  write_step_trace(trace.get(), run, world, summary);
  write_memory_report(run, config, device, r.stages, r.stage_memory, r.memory,
                      r.config.num_hidden_layers, static_cast<int>(replicas), summary);
  metrics.write_summary(summary);
  if (run.compile_only && !r.memory.fits) return static_cast<int>(ExitCode::failure);
  return 0;
}

class PretrainTask final : public Task {
 public:
  const TaskSchema& schema() const override { return pretrain_schema(); }
  bool multi_process() const override { return true; }
  PlanSummary plan(const TaskContext& context) const override {
    return fit_summary(run_pretraining(context, true, {}).memory);
  }
  std::optional<MemoryPage> memory_page(const TaskContext& context) const override {
    const auto r = run_pretraining(context, true, {});
    return polyhal::memory_page(context.config, context.device, r.stages, r.stage_memory, r.memory,
                                r.config.num_hidden_layers, context.plan.placement.replicas);
  }
  int run(const TaskContext& context) const override { return run_bert_pretraining(context); }
};

}  // namespace

std::unique_ptr<Task> make_pretrain_task() {
  return std::make_unique<PretrainTask>();
}

}  // namespace polyhal
