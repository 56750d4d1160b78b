// resolve_outputs: where a run resumes from and what it writes, from the
// keys its schema declares as output places, so that validate shows them
// and the training call reads them from one place.
#include <fmt/format.h>

#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/run_plan.hpp"

namespace polyhal {

OutputPlan resolve_outputs(const RunConfig& config) {
  OutputPlan outputs;
  if (!config.schema) return outputs;
  const TaskSchema& schema = *config.schema;
  for (const ConfigKey* key : task_keys(schema)) {
    if (key->output == OutputPath::none) continue;
    const std::filesystem::path place = key->value(config);
    if (!place.empty()) outputs.places.push_back({key->path, place, key->output});
  }
  if (!schema.has(TaskTrait::trains)) return outputs;
  outputs.checkpoint_dir = config.checkpoint.dir;
  outputs.resume = config.checkpoint.resume && !outputs.checkpoint_dir.empty();
  if (outputs.resume) {
    if (auto latest = CheckpointStore(outputs.checkpoint_dir).latest())
      outputs.resume_from = *latest;
  }
  // model.save names the export of a training task as it names inference's.
  if (!config.model.save.empty())
    outputs.export_dir = config.model.save;
  else if (schema.export_dir)
    outputs.export_dir = schema.export_dir(config);
  else if (!outputs.checkpoint_dir.empty())
    outputs.export_dir = outputs.checkpoint_dir / "hf";
  return outputs;
}

}  // namespace polyhal
