// Tasks `squad` and `glue`: fine-tuning with a question-answering or
// classification head, evaluation every epoch and prediction; one replica
// per mpirun rank under `collective: mpi`.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <cstring>

#include <iostream>
#include <nlohmann/json.hpp>

#include "finetune_section.hpp"
#include "polyhal/app/finetune_task.hpp"
#include "polyhal/app/run_outputs.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/step_progress.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

std::string metrics_text(const std::map<std::string, double>& metrics) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : metrics) {
    parts.push_back(name.ends_with("total") ? fmt::format("{} {:.0f}", name, value)
                                            : fmt::format("{} {:.4g}", name, value));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// The steps a run made: the summary's figures and the "done" line.
void report_steps(const FinetuneResult& r, std::int64_t global_batch, bool model,
                  nlohmann::json& summary) {
  double total = 0;
  for (const auto& s : r.steps) total += s.seconds;
  const double sequences =
      static_cast<double>(global_batch * static_cast<std::int64_t>(r.steps.size()));
  summary["final_loss"] = r.steps.back().loss();
  summary["steps_run"] = r.steps.size();
  if (!model) summary["sequences_per_second"] = sequences / total;
  if (r.first_step > 1) std::cout << fmt::format("  resumed at step {}\n", r.first_step);
  std::cout << fmt::format("  done: {} steps in {} ({}), final loss {:.4f} (first {:.4f})\n",
                           r.steps.size(), clock_text(total),
                           model ? "host simulation of the modelled device"
                                 : fmt::format("{:.1f} sequences/s", sequences / total),
                           r.steps.back().loss(), r.steps.front().loss());
}

int run_finetune(const TaskContext& context) {
  Device& device = context.device;
  const RunConfig& config = context.config;
  const RunOptions& run = context.options;
  MetricsWriter& metrics = context.metrics;
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const std::int64_t replicas = context.plan.placement.replicas;
  const std::int64_t global_batch = context.plan.placement.global_batch();
  const auto& f = config.section<FinetuneSection>();
  std::vector<std::string> what;
  if (f.train)
    what.push_back(f.max_steps > 0
                       ? fmt::format("train {:g} epochs, at most {} steps", f.epochs, f.max_steps)
                       : fmt::format("train {:g} epochs", f.epochs));
  if (f.eval) what.push_back("eval");
  if (f.predict) what.push_back("predict");
  std::cout << fmt::format(
      "{}{}: {}, seq {}, micro-batch {} x grad_accum {} x replicas {} = global batch {}, {}, {} "
      "on {} ({})\n",
      config.task, config.task == "glue" ? " " + f.glue_task : "", fmt::join(what, ", "),
      context.plan.model.seq_len, context.plan.placement.micro, context.plan.placement.grad_accum,
      replicas, global_batch, config.optimizer.name, context.plan.precision.name(), p.name,
      p.product);
  StepProgress on_step(config.log_every, global_batch, false, model, metrics, run.progress);
  const auto on_eval = [&](const FinetuneEvaluation& e) {
    nlohmann::json line{{"event", e.split},
                        {"epoch", e.epoch},
                        {"step", e.step},
                        {"rows", e.rows},
                        {"seconds", e.seconds}};
    for (const auto& [name, value] : e.metrics) line[name] = value;
    metrics.write(line);
    std::cout << fmt::format(
        "{} after epoch {} (step {}): {} rows in {:.1f} s{}{}\n", e.split, e.epoch, e.step, e.rows,
        e.seconds, e.metrics.empty() ? "" : ": " + metrics_text(e.metrics),
        e.files.empty() ? "" : "; wrote " + e.files.front().parent_path().string());
  };
  const auto trace = make_step_trace(device, run, context.world);
  const auto r = run_finetuning(context, run.compile_only, std::ref(on_step), on_eval, trace.get());
  const nlohmann::json stages =
      print_plan(r.stages, r.stage_memory, r.memory, r.config.num_hidden_layers,
                 context.plan.placement.grad_accum);
  nlohmann::json summary{{"backend", config.backend},
                         {"device", p.name},
                         {"mode", std::string(device_mode_name(p.mode))},
                         {"task", config.task},
                         {"architecture", hf_architecture(r.head)},
                         {"precision", context.plan.precision.name()},
                         {"precision_reason", context.plan.precision.reason},
                         {"seq_len", context.plan.model.seq_len},
                         {"micro_batch", context.plan.placement.micro},
                         {"grad_accum", context.plan.placement.grad_accum},
                         {"replicas", replicas},
                         {"global_batch", global_batch},
                         {"optimizer", config.optimizer.name},
                         {"compile_only", run.compile_only},
                         {"fits", r.memory.fits},
                         {"memory_required_bytes", r.memory.required_bytes}};
  if (!stages.empty()) summary["pipeline_stages"] = stages;
  if (f.train && !run.compile_only) {
    summary["train_rows"] = r.train_rows;
    summary["steps_per_epoch"] = r.steps_per_epoch;
    summary["total_steps"] = r.total_steps;
    summary["first_step"] = r.first_step;
  }
  if (!r.steps.empty()) report_steps(r, global_batch, model, summary);
  for (const auto& e : r.evaluations) {
    if (e.split != "eval") continue;
    nlohmann::json last = nlohmann::json::object();
    for (const auto& [name, value] : e.metrics) last[name] = value;
    summary["eval"] = last;  // the last evaluation's metrics
  }
  if (!r.checkpoints.empty())
    std::cout << fmt::format("  last checkpoint: {}\n", r.checkpoints.back().string());
  if (!r.exported.empty())
    std::cout << fmt::format("  fine-tuned model (Hugging Face {}): {}\n", hf_architecture(r.head),
                             r.exported.string());
  report_training_estimate(r.estimate, p, summary);
  if (!run.compile_only) report_peak_memory(device, r.memory, summary);
  write_step_trace(trace.get(), run, context.world, summary);
  write_memory_report(run, config, device, r.stages, r.stage_memory, r.memory,
                      r.config.num_hidden_layers, static_cast<int>(replicas), summary);
  if (r.stopped_by_signal) {
    summary["stopped_by_signal"] = strsignal(r.stopped_by_signal);
    std::cout << fmt::format(
        "  stopped by {} after step {}: run the same command to resume from its checkpoint\n",
        strsignal(r.stopped_by_signal), r.steps.empty() ? 0 : r.steps.back().step);
  }
  metrics.write_summary(summary);
  if (run.compile_only && !r.memory.fits) return static_cast<int>(ExitCode::failure);
  return 0;
}

class FinetuneTask final : public Task {
 public:
  explicit FinetuneTask(const TaskSchema& schema) : schema_(schema) {}
  const TaskSchema& schema() const override { return schema_; }
  bool multi_process() const override { return true; }
  PlanSummary plan(const TaskContext& context) const override {
    return fit_summary(run_finetuning(context, true, {}, {}).memory);
  }
  std::optional<MemoryPage> memory_page(const TaskContext& context) const override {
    const auto r = run_finetuning(context, true, {}, {});
    return polyhal::memory_page(context.config, context.device, r.stages, r.stage_memory, r.memory,
                                r.config.num_hidden_layers, context.plan.placement.replicas);
  }
  int run(const TaskContext& context) const override { return run_finetune(context); }

 private:
  const TaskSchema& schema_;
};

}  // namespace

std::unique_ptr<Task> make_squad_task() {
  return std::make_unique<FinetuneTask>(squad_schema());
}
std::unique_ptr<Task> make_glue_task() {
  return std::make_unique<FinetuneTask>(glue_schema());
}

}  // namespace polyhal
