// Task `inference`: BERT forward passes, measured (or estimated on a
// device model), or text in and pooled outputs / mask predictions out.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include <algorithm>

#include "inference_section.hpp"
#include "polyhal/app/inference_task.hpp"
#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/run_outputs.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// A median latency far above the fastest batch (or a p99 far above the
/// median) is a machine shared with other work or threads outnumbering
/// the free cores: the throughput above is then not the device's.
void warn_about_latency_spread(double min_ms, double median_ms, double p99_ms,
                               nlohmann::json& summary) {
  constexpr double kWide = 2.0;
  const bool wide_median = median_ms > kWide * min_ms;
  const bool wide_tail = p99_ms > 2.0 * kWide * median_ms;
  summary["latency_spread_wide"] = wide_median || wide_tail;
  if (!wide_median && !wide_tail) return;
  spdlog::warn(
      "the latency spread is wide ({}): other processes compete for these CPUs, or there are "
      "more threads than free cores. Set device.threads to the cores that are free (e.g. "
      "--set device.threads=1), keep the machine otherwise idle, or bind the run (taskset); "
      "OMP_WAIT_POLICY=active or a large GOMP_SPINCOUNT help only on an idle machine",
      wide_median ? fmt::format("median {:.2f} ms is {:.1f}x the fastest batch, {:.2f} ms",
                                median_ms, median_ms / min_ms, min_ms)
                  : fmt::format("p99 {:.2f} ms is {:.1f}x the median, {:.2f} ms", p99_ms,
                                p99_ms / median_ms, median_ms));
}

/// Instances under mpirun, as Graphcore's benchmark runs them: each rank
/// its own model and threads; the job's throughput is their sum.
void report_instances(const TaskContext& context, const InferenceResult& r,
                      nlohmann::json& summary) {
  if (!context.world || context.world->size() < 2) return;
  double seconds = 0;
  for (const double s : r.batch_seconds) seconds += s;
  float rate[2] = {seconds > 0
                       ? static_cast<float>(static_cast<double>(r.batch) *
                                            static_cast<double>(r.batch_seconds.size()) / seconds)
                       : 0.0f,
                   1.0f};
  context.world->all_reduce(rate, 2, DType::f32, ReduceOp::sum);
  summary["processes"] = context.world->size();
  summary["sequences_per_second_all_processes"] = rate[0];
  if (context.world->rank() == 0)
    std::cout << fmt::format(
        "  all {} processes: {:.1f} sequences/s summed (each rank its own model and "
        "device.threads; measured side by side in this job)\n",
        static_cast<int>(rate[1]), rate[0]);
}

/// A device model's estimate, when the plan fits (a speed for a plan the
/// device cannot hold would be a figure of nothing).
void report_estimate(const InferenceResult& r, nlohmann::json& summary) {
  if (!r.estimated_batch_seconds) return;
  if (!r.memory.fits) {
    std::cout << "  estimated: none, the plan does not fit the device (see the memory plan)\n";
    return;
  }
  const double estimated = static_cast<double>(r.batch) / *r.estimated_batch_seconds;
  summary["estimated_sequences_per_second"] = estimated;
  std::cout << fmt::format(
      "  estimated (device model, not measured): {:.1f} sequences/s, {:.3f} ms per batch\n",
      estimated, *r.estimated_batch_seconds * 1e3);
}

/// What really ran: int8 or bf16 GEMMs, and on which ISA (oneDNN's
/// implementation names), so no precision or ISA is claimed unseen.
void report_kernels(const InferenceResult& r, nlohmann::json& summary) {
  std::cout << "  kernels (host time per batch, most first):\n";
  nlohmann::json ops = nlohmann::json::array();
  const double batches = static_cast<double>(std::max<std::int64_t>(r.forward_runs, 1));
  for (const auto& t : r.profile) {
    ops.push_back({{"op", t.op},
                   {"calls", t.calls},
                   {"seconds", t.seconds},
                   {"implementation", t.implementation}});
    std::cout << fmt::format("    {:<18} {:>8.2f} ms  {}\n", t.op, t.seconds * 1e3 / batches,
                             t.implementation);
  }
  summary["profile"] = ops;
}

int run_bert_inference(const TaskContext& context) {
  Device& device = context.device;
  const RunConfig& config = context.config;
  const RunOptions& run = context.options;
  MetricsWriter& metrics = context.metrics;
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const auto trace = make_step_trace(device, run, nullptr);
  const auto r = run_inference(context, run.compile_only, trace.get());
  const std::string precision = context.plan.precision.name();
  const ModelPlan& card = context.plan.model;
  std::cout << fmt::format(
      "inference: BERT {} (L{} H{} A{}){}, seq {}, batch {}, {} on {} ({}{})\n", r.model_name,
      r.config.num_hidden_layers, r.config.hidden_size, r.config.num_attention_heads,
      card.head == "none" ? "" : ", head " + card.head, r.seq, r.batch, precision, p.name,
      p.product, model ? ", device model" : "");
  if (!context.plan.precision.reason.empty())
    std::cout << fmt::format("  precision {}: {}\n", precision, context.plan.precision.reason);
  print_memory(r.memory);
  nlohmann::json summary{{"backend", config.backend},
                         {"device", p.name},
                         {"product", p.product},
                         {"mode", std::string(device_mode_name(p.mode))},
                         {"task", config.task},
                         {"model", "bert-" + r.model_name},
                         {"head", card.heads ? "pretraining" : card.head},
                         {"precision", precision},
                         {"precision_reason", context.plan.precision.reason},
                         {"seq_len", r.seq},
                         {"global_batch", r.batch},
                         {"micro_batch", r.batch},
                         {"replicas", 1},
                         {"compile_only", run.compile_only},
                         {"fits", r.memory.fits},
                         {"memory_required_bytes", r.memory.required_bytes}};
  report_estimate(r, summary);
  if (!r.batch_seconds.empty()) {
    double total = 0;
    for (double s : r.batch_seconds) total += s;
    const auto count = r.batch_seconds.size();
    // Text: the lines written over the whole pass (tokenizing and writing
    // included), never padding rows or empty filler; else rows per batch time.
    const bool text = r.text_examples > 0 && r.measured_seconds > 0;
    const double per_second =
        text ? static_cast<double>(r.text_examples) / r.measured_seconds
             : static_cast<double>(r.batch) * static_cast<double>(count) / total;
    const auto [low, high] = std::minmax_element(r.batch_seconds.begin(), r.batch_seconds.end());
    // OpenVINO benchmark_app's report: count, duration, and the latency spread.
    const std::vector<std::pair<std::string, double>> latency{
        {"min", *low * 1e3},
        {"avg", total / static_cast<double>(count) * 1e3},
        {"median", percentile(r.batch_seconds, 50) * 1e3},
        {"p90", percentile(r.batch_seconds, 90) * 1e3},
        {"p99", percentile(r.batch_seconds, 99) * 1e3},
        {"max", *high * 1e3}};
    summary["batches"] = count;
    summary["duration_seconds"] = r.measured_seconds;
    if (model) {
      summary["host_simulation_seconds_per_batch"] = total / static_cast<double>(count);
      std::cout << fmt::format(
          "  host simulation: {:.1f} ms per batch (this host running the model, not the device)\n",
          total / static_cast<double>(count) * 1e3);
    } else {
      summary["sequences_per_second"] = per_second;
      summary["latency_p50_ms"] = latency[2].second;
      for (const auto& [name, ms] : latency) summary["latency_" + name + "_ms"] = ms;
      summary["model_tflops"] = r.flops_per_batch * static_cast<double>(count) / total / 1e12;
      std::cout << fmt::format(
          "  measured: {} batches in {:.2f} s: {:.1f} sequences/s; {:.2f} TFLOP/s model FLOPs\n"
          "  latency per batch (ms): min {:.2f}  avg {:.2f}  median {:.2f}  p90 {:.2f}  "
          "p99 {:.2f}  max {:.2f}\n",
          count, r.measured_seconds, per_second,
          r.flops_per_batch * static_cast<double>(count) / total / 1e12, latency[0].second,
          latency[1].second, latency[2].second, latency[3].second, latency[4].second,
          latency[5].second);
      warn_about_latency_spread(latency[0].second, latency[2].second, latency[4].second, summary);
      if (r.computed_tokens > 0) {
        summary["real_tokens"] = r.real_tokens;
        summary["computed_tokens"] = r.computed_tokens;
        std::cout << fmt::format(
            "  tokens: {} in the lines, {} computed ({:.0f}% padding{})\n", r.real_tokens,
            r.computed_tokens,
            100.0 * static_cast<double>(r.computed_tokens - r.real_tokens) /
                static_cast<double>(r.computed_tokens),
            text ? "; lines per second over the whole pass, tokenizing and writing included" : "");
      }
    }
  }
  if (!r.profile.empty() && !model) report_kernels(r, summary);
  if (r.text_examples > 0) {
    std::cout << fmt::format("  wrote {} examples to {}\n", r.text_examples,
                             config.section<InferenceSection>().output.string());
  }
  if (!run.compile_only) report_peak_memory(device, r.memory, summary);
  if (!run.compile_only) report_instances(context, r, summary);
  write_step_trace(trace.get(), run, nullptr, summary, "batches");
  write_memory_report(run, config, device, {}, {}, r.memory, r.config.num_hidden_layers, 1,
                      summary);
  metrics.write_summary(summary);
  if (run.compile_only && !r.memory.fits) return static_cast<int>(ExitCode::failure);
  return 0;
}

class InferenceTask final : public Task {
 public:
  const TaskSchema& schema() const override { return inference_schema(); }
  PlanSummary plan(const TaskContext& context) const override {
    return fit_summary(run_inference(context, true).memory);
  }
  std::optional<MemoryPage> memory_page(const TaskContext& context) const override {
    const auto r = run_inference(context, true);
    return polyhal::memory_page(context.config, context.device, {}, {}, r.memory,
                                r.config.num_hidden_layers, 1);
  }
  int run(const TaskContext& context) const override { return run_bert_inference(context); }
  /// Under `collective: mpi` each rank is one instance; the throughputs add.
  bool multi_process() const override { return true; }
};

}  // namespace

std::unique_ptr<Task> make_inference_task() {
  return std::make_unique<InferenceTask>();
}

}  // namespace polyhal
