// Config section `inference`: how long to measure and where text results go.
#include "inference_section.hpp"

#include <fmt/format.h>

#include "polyhal/app/config_keys.hpp"
#include "serve_section.hpp"

namespace polyhal {
namespace {

ConfigSection inference_section() {
  using I = InferenceSection;
  auto section = task_section<I>();
  SectionKeys<I> keys(section, task_section_of<I>);
  keys.add("iterations", &I::iterations, "measured batches")
      .add("warmup", &I::warmup, "unmeasured batches first", repeats(0))
      .add("duration_seconds", &I::duration_seconds,
           "instead of iterations: measured batches until this many seconds have passed", seconds(),
           {.value =
                [](const I& i) {
                  return i.duration_seconds > 0 ? config_text(i.duration_seconds)
                                                : std::string("(iterations)");
                }})
      .add("output", &I::output, "text inference: JSON lines with each example's outputs", {},
           {.output = OutputPath::file})
      .add("pooling", &I::pooling,
           "text inference: sentence embedding: auto (from a sentence-transformers directory), "
           "none, mean, cls or max; splade: a *ForMaskedLM model's sparse vocabulary weights "
           "(polyhal serve's POST /embed_sparse)",
           one_of({"auto", "none", "mean", "cls", "max", "splade"}))
      .add("normalize", &I::normalize,
           "text inference: L2-normalise the embedding: auto (from modules.json), true or false",
           one_of({"auto", "true", "false"}))
      .add("hidden_states", &I::hidden_states,
           "text inference: also write each real token's last hidden state")
      .add("packed", &I::packed,
           "text inference without a head (model.head none): several lines share a row of "
           "model.seq_len tokens, each attending only to itself, so no compute goes to padding; "
           "false: one line per row, padded");
  return section;
}

}  // namespace

const TaskSchema& inference_schema() {
  static const TaskSchema schema{
      .name = "inference",
      .sections = {"model", "batch", "collective", "data"},
      .required = {},
      .own = {std::make_shared<const ConfigSection>(inference_section()),
              std::make_shared<const ConfigSection>(serve_section())},
      .check =
          [](const RunConfig& config) {
            if (config.batch.replicas != 1)
              config.fail("batch.replicas",
                          "inference runs one replica; run several processes for throughput "
                          "(mpirun -np N with collective: mpi: their sequences/s are summed)");
            // Instances under mpirun would all write the same files.
            if (config.collective.engine == "mpi") {
              if (config.data.source == "text")
                config.fail("collective",
                            "mpi runs instances of the benchmark side by side; "
                            "text inference writes one output: run it in one "
                            "process");
              for (const auto& [key, path] : {std::pair{"model.save", config.model.save},
                                              std::pair{"model.calibrate", config.model.calibrate}})
                if (!path.empty())
                  config.fail(key, "not with collective: mpi, where every rank would write it");
            }
          },
      .traits = {TaskTrait::runs_inference, TaskTrait::takes_int8}};
  return schema;
}

}  // namespace polyhal
