// Task pretrain's schema: the common sections it reads, its `steps` and its `eval`.
#include "pretrain_section.hpp"

#include <filesystem>
#include <system_error>

#include "polyhal/app/config_keys.hpp"

namespace polyhal {
namespace {

ConfigSection steps_section() {
  auto section = task_section<StepsSection>();
  section.shorthand = "steps";
  section.keys.push_back(ConfigKey{
      .path = "steps",
      .help = "optimizer steps to train (0: evaluate the starting weights on eval's data only)",
      .read = [](const ConfigValue& v,
                 RunConfig& c) { c.section<StepsSection>().steps = v.integer(0); },
      .value = [](const RunConfig& c) { return config_text(c.section<StepsSection>().steps); }});
  return section;
}

/// eval.source when not given: data.source when that reads files, else
/// what eval.files holds (HDF5 files, else TFRecord).
std::string default_source(const EvalSection& e, const DataSection& data) {
  if (e.files.empty() || data.source == "mlperf_hdf5" || data.source == "tfrecord")
    return data.source;
  const auto is_hdf5 = [](const std::filesystem::path& p) {
    return p.extension() == ".hdf5" || p.extension() == ".h5";
  };
  std::error_code error;
  if (std::filesystem::is_directory(e.files, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(e.files, error))
      if (is_hdf5(entry.path())) return "mlperf_hdf5";
    return "tfrecord";
  }
  return is_hdf5(e.files) ? "mlperf_hdf5" : "tfrecord";
}

ConfigSection samples_section() {
  auto section = task_section<SamplesSection>();
  section.shorthand = "samples";
  section.keys.push_back(
      ConfigKey{.path = "samples",
                .help = "samples to train instead of steps: ceil(samples / global batch) steps",
                .read = [](const ConfigValue& v,
                           RunConfig& c) { c.section<SamplesSection>().samples = v.integer(1); },
                .value =
                    [](const RunConfig& c) {
                      const auto samples = c.section<SamplesSection>().samples;
                      return samples > 0 ? config_text(samples) : std::string("(steps decide)");
                    }});
  return section;
}

ConfigSection eval_section() {
  using E = EvalSection;
  auto section = task_section<E>();
  SectionKeys<E> keys(section, task_section_of<E>);
  keys.add("source", &E::source,
           "held-out data: mlperf_hdf5, tfrecord, generated or pattern (default: data.source, "
           "or what eval.files holds)",
           one_of({"mlperf_hdf5", "tfrecord", "generated", "pattern"}))
      .add("files", &E::files, "held-out evaluation file or directory (MLPerf's eval set)", {},
           {.input = InputPath::file_or_directory})
      .add("seed", &E::seed, "generated / pattern held-out data: its seed (default data.seed + 1)",
           {},
           {.value =
                [](const E& e) {
                  return e.seed ? config_text(*e.seed) : std::string("(data.seed + 1)");
                }})
      .add("samples", &E::samples, "rows evaluated (0: every row of the files; 256 generated)",
           at_least(0))
      .add("micro", &E::micro, "rows per evaluation batch (0: batch.micro)", at_least(0))
      .add("every_steps", &E::every_steps, "evaluate every this many steps (0: off)", at_least(0))
      .add("every_samples", &E::every_samples,
           "evaluate every this many training samples (0: off); always at the end", at_least(0))
      .add("stop_at", &E::stop_at,
           "end the run, with a checkpoint, once masked-LM accuracy reaches this (MLPerf: 0.720; "
           "0: off)",
           [](const ConfigValue& v) {
             const double target = v.number();
             if (!(target >= 0.0 && target <= 1.0)) v.fail("expected an accuracy in [0, 1]");
             return target;
           });
  section.check = [](const ConfigValue&, RunConfig& config) {
    auto& e = config.section<E>();
    const bool asked = e.every_steps > 0 || e.every_samples > 0 || e.stop_at > 0.0 ||
                       e.samples > 0 || e.micro > 0 || e.seed;
    if (!e.enabled()) {
      if (asked)
        config.fail("eval.files", "required by the eval keys given: the held-out data to evaluate");
      return;
    }
    if (e.source.empty()) e.source = default_source(e, config.data);
    const bool from_files = e.source == "mlperf_hdf5" || e.source == "tfrecord";
    if (from_files && e.files.empty())
      config.fail("eval.files", "required by eval.source " + e.source);
    if (!from_files && !e.files.empty())
      config.fail("eval.files", "eval.source " + e.source + " reads no files");
    if (e.source != "mlperf_hdf5" && e.source != "tfrecord" && e.source != "generated" &&
        e.source != "pattern")
      config.fail("eval.source",
                  "pre-training evaluates mlperf_hdf5, tfrecord, generated or "
                  "pattern data, not \"" +
                      e.source + "\"");
    if (e.every_steps > 0 && e.every_samples > 0)
      config.fail("eval.every_samples", "give eval.every_steps or eval.every_samples, not both");
  };
  return section;
}

}  // namespace

std::int64_t pretrain_steps(const RunConfig& config, std::int64_t global_batch) {
  const std::int64_t samples = config.section<SamplesSection>().samples;
  if (samples <= 0) return config.section<StepsSection>().steps;
  return samples / global_batch + (samples % global_batch != 0 ? 1 : 0);
}

const TaskSchema& pretrain_schema() {
  static const TaskSchema schema{
      .name = "pretrain",
      .sections = {"model", "batch", "collective", "data", "optimizer", "checkpoint"},
      .required = {},
      .own = {std::make_shared<const ConfigSection>(steps_section()),
              std::make_shared<const ConfigSection>(samples_section()),
              std::make_shared<const ConfigSection>(eval_section())},
      .check =
          [](const RunConfig& config) {
            if (config.data.source == "text")
              config.fail("data.source", "pretrain reads generated or pattern data");
            const bool by_samples = config.section<SamplesSection>().samples > 0;
            if (by_samples &&
                (config.lines.contains("steps") || config.overrides.contains("steps")))
              config.fail("samples", "give steps or samples, not both");
            if (!by_samples && config.section<StepsSection>().steps == 0 &&
                !config.section<EvalSection>().enabled())
              config.fail("steps",
                          "0 trains nothing and only evaluates: give eval.files (or "
                          "eval.source) to evaluate on");
          },
      .traits = {TaskTrait::trains, TaskTrait::reads_pretraining_data}};
  return schema;
}

}  // namespace polyhal
