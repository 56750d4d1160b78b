// resolve_run: the config as written and the opened devices, turned once
// into the run's decisions; and the plan as validate prints it.
#include "polyhal/app/run_plan.hpp"

#include <fmt/format.h>

#include "plan/placement_plan.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Where the run resumes from and what it writes, for validate.
std::string output_lines(const OutputPlan& outputs) {
  std::string text;
  if (!outputs.checkpoint_dir.empty()) {
    text +=
        fmt::format("  checkpoints in {}; {}\n", outputs.checkpoint_dir.string(),
                    !outputs.resume               ? "checkpoint.resume is false: starts anew"
                    : outputs.resume_from.empty() ? "none there yet: starts anew"
                                                  : "resumes from " + outputs.resume_from.string());
  }
  if (!outputs.export_dir.empty())
    text += fmt::format("  exports the final weights to {} (a Hugging Face directory)\n",
                        outputs.export_dir.string());
  for (const OutputPlace& place : outputs.places) {
    if (place.key == "checkpoint.dir") continue;
    text += fmt::format("  writes {} ({})\n", place.path.string(), place.key);
  }
  return text;
}

/// The model card beyond its dimensions, each value with where it came from.
std::string card_lines(const ModelPlan& m) {
  std::string text = fmt::format("  sequences of {} tokens ({})\n", m.seq_len, m.seq_len_source);
  if (!m.tokenizer.file.empty())
    text += fmt::format("  tokenizer {} ({}), {}\n", m.tokenizer.file.string(), m.vocab_source,
                        m.tokenizer.options.lower_case ? "lower-cased" : "cased");
  if (m.heads || m.head != "none")
    text += fmt::format("  head {}{} ({})\n", m.heads ? "pretraining" : m.head,
                        m.head == "classification" ? fmt::format(", {} labels", m.num_labels) : "",
                        m.head_source);
  return text;
}

}  // namespace

RunPlan resolve_run(const RunConfig& config, const std::vector<Device*>& devices,
                    const DeviceOptions& device_options, const WorldShape& world, bool plan_only) {
  if (devices.empty()) throw DeviceUnavailableError("the backend opened no devices");
  RunPlan plan;
  if (config.schema && config.schema->reads("model")) plan.model = resolve_model(config, plan_only);
  plan.placement = resolve_placement(config, devices, device_options, world);
  plan.precision = resolve_precision(config, *devices.front(), plan.model);
  plan.outputs = resolve_outputs(config);
  return plan;
}

std::string plan_lines(const RunPlan& plan, const Device& device) {
  std::string text;
  if (const ModelPlan& m = plan.model; !m.origin.empty()) {
    text += fmt::format("  model bert-{} ({} layers, hidden {}, {} heads, vocabulary {}){}; {}\n",
                        m.name, m.dims.num_hidden_layers, m.dims.hidden_size,
                        m.dims.num_attention_heads, m.dims.vocab_size,
                        m.config_file.empty() ? "" : " from " + m.config_file.string(),
                        m.weights.empty() ? "weights from a seeded initialisation"
                                          : "weights from " + m.weights.string());
    text += card_lines(m);
  }
  if (!plan.precision.reason.empty())
    text += fmt::format("  precision {} on {}: {}\n", plan.precision.name(), device.name(),
                        plan.precision.reason);
  if (const auto& scales = plan.precision.int8_scales)
    text += fmt::format("  int8 scales of {} linears from {} batch(es) at {}\n",
                        scales->max_abs.size(), scales->batches, scales->precision);
  if (plan.precision.inference.encoder_math == LinearMath::f16_products)
    text +=
        "  f16 products in the encoder's linears, f32 tensors (the device keeps no f16 "
        "tensors)\n";
  const PlacementPlan& p = plan.placement;
  text += fmt::format("  batch {} = {} replica{} x {} accumulated x {} micro", p.global_batch(),
                      p.replicas, p.replicas == 1 ? "" : "s", p.grad_accum, p.micro);
  if (p.stages_per_replica > 1)
    text += fmt::format("; {} pipeline stages per replica{}", p.stages_per_replica,
                        p.balanced_stages > 0 ? " (balanced)" : "");
  if (p.replicas > 1)
    text += fmt::format("; gradients all-reduced {}{}",
                        p.overlap_all_reduce ? "during backward" : "after backward",
                        p.plugin_collectives ? "" : " on polyhal's engine");
  return text + "\n" + output_lines(plan.outputs);
}

}  // namespace polyhal
