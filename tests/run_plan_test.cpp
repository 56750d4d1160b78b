// The plan layer: the config as written and the opened devices, resolved
// once (run_plan.hpp). What the devices decide lives in the plan; the
// config is never written back, and the launcher hands tasks a const one.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <type_traits>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

// A task can only read the config: the launcher resolves, it never rewrites.
static_assert(std::is_same_v<decltype(TaskContext::config), const RunConfig&>);
static_assert(std::is_same_v<decltype(TaskContext::plan), const RunPlan&>);

struct Opened {
  std::shared_ptr<Backend> backend;
  DeviceOptions options;
  std::vector<std::shared_ptr<Device>> devices;
  std::vector<Device*> raw() const {
    std::vector<Device*> out;
    for (const auto& d : devices) out.push_back(d.get());
    return out;
  }
};

Opened open(const RunConfig& config) {
  Opened o;
  o.backend = test::load_backend(config.backend);
  o.options = config.resolve_device(o.backend->device_options());
  o.devices = o.backend->open_devices(o.options);
  return o;
}

RunConfig config_of(test::TempDir& dir, const std::string& yaml) {
  return load_task_config(dir.write("c.yaml", yaml));
}

const char* kPretrain =
    "task: pretrain\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64, precision: mixed}\n"
    "batch: {micro: 4, grad_accum: 2}\ndata: {source: pattern, max_predictions: 3}\nsteps: 2\n";

TEST(RunPlan, MixedResolvesInThePlanAndLeavesTheConfigAsWritten) {
  test::TempDir dir;
  // gaudi computes bf16 natively; ipu has f16 and gets dynamic loss scaling.
  for (const auto& [backend, dtype, scaling] :
       std::vector<std::tuple<std::string, DType, LossScaler::Mode>>{
           {"gaudi", DType::bf16, LossScaler::Mode::none},
           {"ipu", DType::f16, LossScaler::Mode::dynamic}}) {
    const RunConfig config = config_of(dir, "backend: " + backend + "\n" + kPretrain);
    const Opened o = open(config);
    const RunPlan plan = resolve_run(config, o.raw(), o.options, {});
    EXPECT_EQ(plan.precision.written, "mixed");
    EXPECT_EQ(plan.precision.activations, dtype) << backend;
    EXPECT_EQ(plan.precision.loss_scaler.mode(), scaling) << backend;
    EXPECT_NE(plan.precision.reason.find("mixed, as"), std::string::npos) << plan.precision.reason;
    EXPECT_EQ(config.model.precision_text(), "mixed") << "the config keeps what was written";
    EXPECT_EQ(plan.placement.global_batch(), 8);
  }
}

TEST(RunPlan, IpusPerReplicaBalancesStagesWithoutTouchingTheModelSection) {
  test::TempDir dir;
  const RunConfig config = config_of(dir,
                                     "backend: ipu\ndevice: {ipu: {ipus_per_replica: 2}}\n"
                                     "task: pretrain\nmodel: {preset: tiny, seq_len: 32, "
                                     "vocab_size: 64}\ndata: {source: pattern}\nsteps: 2\n");
  const Opened o = open(config);
  const RunPlan plan = resolve_run(config, o.raw(), o.options, {});
  EXPECT_EQ(plan.placement.balanced_stages, 2);
  EXPECT_EQ(plan.placement.stages_per_replica, 2);
  EXPECT_EQ(config.model.pipeline_stages, 0) << "the plan holds the stages, not the config";
  // Against model.pipeline's own count: an error naming both keys and the line.
  const RunConfig both = config_of(dir,
                                   "backend: ipu\ndevice: {ipu: {ipus_per_replica: 2}}\n"
                                   "task: pretrain\nmodel: {preset: tiny, seq_len: 32, "
                                   "vocab_size: 64, pipeline: 3}\n"
                                   "data: {source: pattern}\nsteps: 2\n");
  const Opened o2 = open(both);
  try {
    resolve_run(both, o2.raw(), o2.options, {});
    FAIL() << "ipus_per_replica 2 against 3 stages resolved";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("c.yaml:2: key 'device.ipus_per_replica'"), std::string::npos) << what;
    EXPECT_NE(what.find("model.pipeline"), std::string::npos) << what;
  }
}

TEST(RunPlan, OverlapAutoAndReplicasFollowTheMpiWorld) {
  test::TempDir dir;
  const RunConfig config = config_of(dir, std::string("backend: cpu\n") + kPretrain);
  const Opened o = open(config);
  const RunPlan alone = resolve_run(config, o.raw(), o.options, {});
  EXPECT_FALSE(alone.placement.overlap_all_reduce);
  EXPECT_TRUE(alone.placement.estimate_overlaps);
  const RunPlan spanning = resolve_run(config, o.raw(), o.options, {4, 2, true});
  EXPECT_TRUE(spanning.placement.overlap_all_reduce);
  EXPECT_EQ(spanning.placement.replicas, 4);
  EXPECT_EQ(spanning.placement.global_batch(), 32);
  EXPECT_NE(spanning.placement.overlap_reason.find("span several hosts"), std::string::npos);
  const RunPlan one_host = resolve_run(config, o.raw(), o.options, {4, 4, true});
  EXPECT_FALSE(one_host.placement.overlap_all_reduce);
  EXPECT_EQ(config.collective.overlap, TriState::automatic) << "the config keeps what was written";
  // batch.replicas other than the ranks: refused with its line.
  std::string yaml = std::string("backend: cpu\n") + kPretrain;
  yaml.replace(yaml.find("grad_accum: 2}"), 14, "grad_accum: 2, replicas: 3}");
  const RunConfig three = config_of(dir, yaml);
  EXPECT_THROW(
      {
        try {
          resolve_run(three, o.raw(), o.options, {4, 4, true});
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("but mpirun started 4 ranks"), std::string::npos)
              << e.what();
          throw;
        }
      },
      ConfigError);
}

// One rule for the model of every task: a model directory's config.json, or
// the bert_config.json beside a TensorFlow checkpoint prefix, gives the
// dimensions unless model.preset or model.hf_config is set.
TEST(RunPlan, TheModelBesideCheckpointInitGivesTheDimensionsInEveryForm) {
  test::TempDir dir;
  const auto google = std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/tf_checkpoint/google";
  const std::string pretrain =
      "backend: cpu\ntask: pretrain\nmodel: {seq_len: 32}\ndata: {source: pattern, "
      "max_predictions: 3}\nbatch: {micro: 2}\nsteps: 1\n";
  const RunConfig prefix =
      config_of(dir, pretrain + "checkpoint: {init: " + (google / "model.ckpt-7").string() + "}\n");
  const ModelPlan from_prefix = resolve_model(prefix, false);
  EXPECT_EQ(from_prefix.dims.hidden_size, 32);
  EXPECT_EQ(from_prefix.dims.num_hidden_layers, 2);
  EXPECT_EQ(from_prefix.dims.vocab_size, 99);
  EXPECT_EQ(from_prefix.config_file, google / "bert_config.json");
  EXPECT_EQ(from_prefix.weights, google / "model.ckpt-7");
  // A Hugging Face directory: its config.json and model.safetensors.
  BertConfig tiny = bert_preset("tiny");
  tiny.vocab_size = 64;
  std::filesystem::create_directories(dir.path() / "hf");
  write_hf_config(tiny, dir.path() / "hf" / "config.json");
  save_bert_weights(init_bert_weights(tiny, 1), DType::f32, dir.path() / "hf/model.safetensors");
  const RunConfig hf =
      config_of(dir, pretrain + "checkpoint: {init: " + (dir.path() / "hf").string() + "}\n");
  const ModelPlan from_dir = resolve_model(hf, false);
  EXPECT_EQ(from_dir.dims.hidden_size, tiny.hidden_size);
  EXPECT_EQ(from_dir.dims.vocab_size, 64);
  EXPECT_EQ(from_dir.weights, dir.path() / "hf/model.safetensors");
  // model.preset set: the preset, as written.
  const RunConfig preset =
      config_of(dir,
                "backend: cpu\ntask: pretrain\nmodel: {preset: mini, seq_len: 32}\n"
                "data: {source: pattern}\nsteps: 1\ncheckpoint: {init: " +
                    (google / "model.ckpt-7").string() + "}\n");
  EXPECT_EQ(resolve_model(preset, false).dims.hidden_size, bert_preset("mini").hidden_size);
  // Pre-training from the prefix runs (it fell back to preset base before,
  // and failed with a shape error per tensor).
  const auto file = dir.write(
      "p.yaml", pretrain + "checkpoint: {init: " + (google / "model.ckpt-7").string() + "}\n");
  const auto r = test::run_polyhal("run " + file.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(RunPlan, OutputsAreResolvedOnceForEveryTask) {
  test::TempDir dir;
  const Opened o = open(config_of(dir, std::string("backend: cpu\n") + kPretrain));
  // Pre-training exports beside its checkpoints; resumes from the newest there.
  const auto ckpt = dir.path() / "ckpt";
  const RunConfig pretrain = config_of(dir, std::string("backend: cpu\n") + kPretrain +
                                                "checkpoint: {dir: " + ckpt.string() + "}\n");
  OutputPlan outputs = resolve_run(pretrain, o.raw(), o.options, {}).outputs;
  EXPECT_EQ(outputs.checkpoint_dir, ckpt);
  EXPECT_TRUE(outputs.resume);
  EXPECT_TRUE(outputs.resume_from.empty()) << "nothing there yet";
  EXPECT_EQ(outputs.export_dir, ckpt / "hf");
  std::filesystem::create_directories(ckpt);
  std::ofstream(ckpt / "checkpoint-000000004.safetensors") << "x";
  outputs = resolve_run(pretrain, o.raw(), o.options, {}).outputs;
  EXPECT_EQ(outputs.resume_from.filename(), "checkpoint-000000004.safetensors");
  // Fine-tuning exports into finetune.output_dir/model, which wins over checkpoint.dir.
  const RunConfig glue = config_of(
      dir, "backend: cpu\ntask: glue\nmodel: {preset: tiny}\ncheckpoint: {dir: " + ckpt.string() +
               ", resume: false}\nfinetune: {glue_task: mrpc, train_file: t.tsv, "
               "output_dir: " +
               (dir.path() / "out").string() + "}\n");
  outputs = resolve_run(glue, o.raw(), o.options, {}).outputs;
  EXPECT_FALSE(outputs.resume);
  EXPECT_TRUE(outputs.resume_from.empty()) << "checkpoint.resume: false looks for none";
  EXPECT_EQ(outputs.export_dir, dir.path() / "out" / "model");
  ASSERT_FALSE(outputs.places.empty());
  EXPECT_TRUE(std::any_of(outputs.places.begin(), outputs.places.end(),
                          [](const OutputPlace& p) { return p.key == "finetune.output_dir"; }));
  // A task that does not train writes no checkpoints and no export.
  const RunConfig inference = config_of(
      dir, "backend: cpu\ntask: inference\nmodel: {preset: tiny}\ninference: {output: e.jsonl}\n");
  outputs = resolve_run(inference, o.raw(), o.options, {}).outputs;
  EXPECT_TRUE(outputs.checkpoint_dir.empty());
  EXPECT_TRUE(outputs.export_dir.empty());
  ASSERT_EQ(outputs.places.size(), 1u);
  EXPECT_EQ(outputs.places[0].key, "inference.output");
}

TEST(RunPlan, ValidatePrintsThePlan) {
  test::TempDir dir;
  const auto file = dir.write("v.yaml", std::string("backend: cpu\n") + kPretrain);
  const auto r = test::run_polyhal("validate " + file.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  precision "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mixed, as"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  batch 8 = 1 replica x 2 accumulated x 4 micro"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  model bert-custom (2 layers, hidden 128"), std::string::npos)
      << r.output;
  const auto with_outputs =
      dir.write("w.yaml", std::string("backend: cpu\n") + kPretrain + "checkpoint: {dir: " +
                              (dir.path() / "ck").string() + "}\nlog: {file: run.log}\n");
  const auto w = test::run_polyhal("validate " + with_outputs.string());
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_NE(w.output.find("/ck; none there yet: starts anew"), std::string::npos) << w.output;
  EXPECT_NE(w.output.find("exports the final weights to " + (dir.path() / "ck" / "hf").string()),
            std::string::npos)
      << w.output;
  EXPECT_NE(w.output.find("run.log (log.file)"), std::string::npos) << w.output;
}

}  // namespace
}  // namespace polyhal
