// Pipeline stages: BERT split into stages (embeddings + layers, layers,
// layers + heads), each its own program, chained through their boundary
// activations and gradients, trains exactly as the whole model: the same
// losses, gradients and weights after a step, with dropout on, in f32 on
// every backend.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/pipelined_training.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

class PipelineStageTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineStageTest, ChainedStagesTrainExactlyAsTheWholeModel) {
  auto device = test::first_device(GetParam());
  const BertConfig config = test::small_bert(4);
  const BertShape shape{4, 16};
  const DataSection data = test::pattern_data();
  OptimizerSettings lamb;  // per-tensor trust ratios: no global norm across stages
  const DropoutSettings dropout{0.1, 0.1};
  const auto weights = init_bert_weights(config, 3);
  const auto make = [&](PipelineStage stage) {
    auto model = std::make_unique<BertTraining>(
        *device, config, shape,
        BertTrainingOptions{
            .optimizer = lamb, .dropout = dropout, .seed = 11, .max_predictions = 3},
        stage);
    model->load_weights(weights);
    return model;
  };
  auto whole = make({});
  std::vector<std::unique_ptr<BertTraining>> stages;
  stages.push_back(make({0, 1, true, false}));
  stages.push_back(make({1, 3, false, false}));
  stages.push_back(make({3, -1, false, true}));
  for (std::uint64_t micro = 0; micro < 2; ++micro) {
    TrainingBatch batch = make_pretraining_batch(config, shape, data, micro);
    batch.index = micro;
    const StepLosses expected = whole->forward_backward(batch, 2);
    std::vector<float> boundary;
    for (auto& stage : stages) boundary = stage->stage_forward(batch, boundary, 2);
    const StepLosses got = stages.back()->last_losses();
    EXPECT_EQ(got.mlm, expected.mlm);
    EXPECT_EQ(got.nsp, expected.nsp);
    std::vector<float> gradient;
    for (auto it = stages.rbegin(); it != stages.rend(); ++it)
      gradient = (*it)->stage_backward(gradient);
    EXPECT_TRUE(gradient.empty());  // the first stage has no input to differentiate
  }
  // The word embeddings are tied to the MLM decoder of the last stage: both
  // copies take the sum of the two gradients.
  const std::string word = "bert.embeddings.word_embeddings.weight";
  std::vector<float> tied = stages.front()->gradients().at(word).values;
  const auto decoder = stages.back()->gradients().at(word).values;
  for (std::size_t i = 0; i < tied.size(); ++i) tied[i] += decoder[i];
  stages.front()->set_gradient(word, tied);
  stages.back()->set_gradient(word, tied);
  // Every other parameter lives in exactly one stage, with the whole
  // model's gradient bit for bit; the tied one up to the order of its sum.
  const auto near = [&](const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& name) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-6 + 1e-5 * std::fabs(b[i])) << name << "[" << i << "]";
  };
  const TensorMap all = whole->gradients();
  std::size_t found = 0;
  for (const auto& stage : stages) {
    for (const auto& [name, g] : stage->gradients()) {
      if (name == word) {
        near(g.values, all.at(name).values, name);
        continue;
      }
      EXPECT_EQ(g.values, all.at(name).values) << name;
      ++found;
    }
  }
  EXPECT_EQ(found + 1, all.size());
  whole->optimizer_step(1e-3);
  for (auto& stage : stages) stage->optimizer_step(1e-3);
  const TensorMap after = whole->weights();
  for (const auto& stage : stages)
    for (const auto& [name, w] : stage->weights()) near(w.values, after.at(name).values, name);
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, PipelineStageTest, ::testing::Values("cpu", "ipu", "gaudi"));

// 1F1B: every stage runs each micro-batch's forward and backward once, in
// dependency order, and holds at most S - s micro-batches between them.
TEST(PipelineSchedule, OneForwardOneBackwardIsCompleteOrderedAndBounded) {
  for (const auto& [stages, micro] : {std::pair{4, 8}, std::pair{3, 2}, std::pair{1, 5}}) {
    const auto order = one_forward_one_backward(stages, micro);
    ASSERT_EQ(order.size(), static_cast<std::size_t>(2 * stages * micro));
    std::map<std::tuple<int, bool, int>, int> at;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto& a = order[i];
      EXPECT_TRUE(at.emplace(std::tuple{a.stage, a.forward, a.micro_batch}, i).second);
    }
    std::vector<int> holding(static_cast<std::size_t>(stages), 0), most = holding;
    for (const auto& a : order) {
      const auto s = static_cast<std::size_t>(a.stage);
      if (a.forward) {
        if (a.stage > 0) {
          EXPECT_LT(at.at({a.stage - 1, true, a.micro_batch}),
                    at.at({a.stage, true, a.micro_batch}));
        }
        most[s] = std::max(most[s], ++holding[s]);
      } else {
        EXPECT_LT(at.at({a.stage, true, a.micro_batch}), at.at({a.stage, false, a.micro_batch}));
        if (a.stage + 1 < stages) {
          EXPECT_LT(at.at({a.stage + 1, false, a.micro_batch}),
                    at.at({a.stage, false, a.micro_batch}));
        }
        --holding[s];
      }
    }
    for (int s = 0; s < stages; ++s)
      EXPECT_EQ(most[static_cast<std::size_t>(s)], in_flight(stages, s, micro))
          << stages << " " << s;
  }
}

// The 1F1B pipeline with stashes, gradient accumulation 4 over 3 stages,
// trains as the whole model: the same losses, and the same weights after
// the step (the tied word embeddings up to the order of their sum).
TEST_P(PipelineStageTest, OneForwardOneBackwardPipelineTrainsAsTheWholeModel) {
  auto device = test::first_device(GetParam());
  const BertConfig config = test::small_bert(4);
  const BertShape shape{2, 16};
  const DataSection data = test::pattern_data();
  OptimizerSettings adamw;
  adamw.kind = "adamw";
  const DropoutSettings dropout{0.1, 0.1};
  const auto weights = init_bert_weights(config, 3);
  const BertTrainingOptions options{
      .optimizer = adamw, .dropout = dropout, .seed = 11, .max_predictions = 3};
  BertTraining whole(*device, config, shape, options);
  whole.load_weights(weights);
  const std::vector<PipelineStage> layout{
      {0, 1, true, false}, {1, 3, false, false}, {3, -1, false, true}};
  BertTrainingOptions recomputed = options;
  recomputed.recompute = {1, 2};
  PipelinedTraining pipeline({device.get(), device.get(), device.get()}, config, shape, recomputed,
                             layout);
  pipeline.load_weights(weights);
  std::vector<TrainingBatch> batches;
  double mlm = 0;
  for (std::uint64_t micro = 0; micro < 4; ++micro) {
    batches.push_back(make_pretraining_batch(config, shape, data, micro));
    batches.back().index = micro;
    mlm += whole.forward_backward(batches.back(), 4).mlm / 4;
  }
  const StepLosses losses = pipeline.forward_backward(batches);
  EXPECT_NEAR(losses.mlm, mlm, 1e-6);
  whole.optimizer_step(1e-3);
  pipeline.optimizer_step(1e-3);
  const TensorMap expected = whole.weights(), got = pipeline.weights();
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [name, w] : expected) {
    const auto& other = got.at(name).values;
    for (std::size_t i = 0; i < w.values.size(); ++i)
      ASSERT_NEAR(other[i], w.values[i], 1e-6 + 1e-5 * std::fabs(w.values[i]))
          << name << "[" << i << "]";
  }
  // Memory per stage: stage s keeps min(S - s, M) - 1 stashes beyond its program's.
  const auto plans = pipeline.plan_memory(4);
  ASSERT_EQ(plans.size(), 3u);
  const auto stash = [](const MemoryReport& r) {
    std::uint64_t bytes = 0;
    for (const auto& item : r.items)
      if (item.category == "pipeline stash") bytes += item.bytes;
    return bytes;
  };
  EXPECT_GT(stash(plans[0]), 0u);
  EXPECT_GT(stash(plans[1]), 0u);
  EXPECT_EQ(stash(plans[2]), 0u);
}

TEST(PipelineStage, AStageThatDoesNotFitTheModelIsRefused) {
  auto cpu = test::first_device("cpu");
  const BertConfig config = test::small_bert(2);
  const auto make = [&](PipelineStage stage) {
    return BertTraining(*cpu, config, {2, 8}, {}, stage);
  };
  EXPECT_THROW(make({1, 2, true, false}), ConfigError);  // embeddings before layer 0 only
  EXPECT_THROW(make({0, 1, true, true}), ConfigError);   // heads after the last layer only
  EXPECT_THROW(make({1, 5, false, true}), ConfigError);  // the model has 2 layers
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

using test::step_losses;

// `pretrain` with model.pipeline on the CPU trains as without it, with the
// global gradient norm clipped over all stages, static loss scaling, and
// checkpoints it resumes from exactly.
TEST(PipelinedPretrain, RunsLikeTheUnpipelinedModelOnTheCpu) {
  test::TempDir dir;
  const auto config = dir.write(
      "p.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16, vocab_size: 64, "
      "num_hidden_layers: 4, dropout: 0.1}\nbatch: {micro: 4, grad_accum: 3}\n"
      "data: {source: pattern, max_predictions: 3}\n"
      "optimizer: {name: lamb, learning_rate: 0.005, max_grad_norm: 0.05, loss_scaling: static, "
      "loss_scale: 1024}\nsteps: 4\n");
  const auto run = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal("run --config " + config.string() + " --metrics-out " +
                                     metrics.string() + " " + sets);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::pair{step_losses(metrics), r.output};
  };
  const auto [whole, whole_output] = run("whole", "");
  const std::string pipeline = "--set 'model.pipeline=[[0], [1, 2], [3]]'";
  const auto [piped, output] =
      run("piped", pipeline + " --set checkpoint.dir=ckpt --set checkpoint.every=1");
  EXPECT_NE(output.find("pipeline: 3 stages, 1F1B over grad_accum 3 micro-batches"),
            std::string::npos)
      << output;
  ASSERT_EQ(whole.size(), 4u);
  ASSERT_EQ(piped.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(piped[i], whole[i], 1e-5) << i;
  // The trained weights as a Hugging Face directory, as unpipelined.
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "ckpt" / "hf" / "model.safetensors"));
  // As if killed after step 2: the run resumes there and repeats steps 3-4 exactly.
  std::filesystem::remove(dir.path() / "ckpt" / "checkpoint-00000004.safetensors");
  std::filesystem::remove(dir.path() / "ckpt" / "checkpoint-00000003.safetensors");
  const auto [resumed, resumed_output] =
      run("resumed", pipeline + " --set checkpoint.dir=ckpt --set checkpoint.every=1");
  EXPECT_NE(resumed_output.find("resumed at step 3"), std::string::npos) << resumed_output;
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0], piped[2]);
  EXPECT_EQ(resumed[1], piped[3]);
}

// Phase 2 from phase 1 pipelined starts as unpipelined does: the shorter
// position table of the phase 1 checkpoint is extended, not refused
// (pipelined runs once took another path that skipped the extension).
TEST(PipelinedPretrain, Phase2StartsFromPhase1WithLongerPositionTable) {
  test::TempDir dir;
  const auto config =
      dir.write("p.yaml",
                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16, vocab_size: 64, "
                "num_hidden_layers: 2, max_position_embeddings: 16, dropout: 0}\n"
                "batch: {micro: 4, grad_accum: 2}\ndata: {source: pattern, max_predictions: 3}\n"
                "optimizer: {name: lamb, learning_rate: 0.005}\nsteps: 2\n"
                "checkpoint: {dir: phase1, every: 2}\n");
  auto r = test::run_polyhal("run --config " + config.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto phase1 = dir.path() / "phase1" / "checkpoint-00000002.safetensors";
  ASSERT_TRUE(std::filesystem::exists(phase1));
  const std::string phase2 =
      " --set model.seq_len=32 --set model.max_position_embeddings=64 --set checkpoint.dir=" +
      (dir.path() / "phase2").string() + " --set checkpoint.init=" + phase1.string();
  for (const std::string pipeline : {"", " --set 'model.pipeline=[[0], [1]]'"}) {
    r = test::run_polyhal("run --config " + config.string() + phase2 + pipeline +
                          " --set checkpoint.resume=false");
    EXPECT_EQ(r.exit_code, 0) << pipeline << r.output;
    EXPECT_NE(r.output.find("extended position embeddings from 16 to 64 rows"), std::string::npos)
        << pipeline << r.output;
  }
}

// On the IPU model each stage runs on its own IPU (ipu0, ipu1, ipu2), each
// within its own memory, with the unpipelined losses.
TEST(PipelinedPretrain, RunsOneStagePerIpuOnTheIpuModel) {
  test::TempDir dir;
  const auto config = dir.write(
      "p.yaml",
      "backend: ipu\ndevice: {system: POD4}\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16, "
      "vocab_size: 64, num_hidden_layers: 3, dropout: 0.1}\nbatch: {micro: 2, grad_accum: 2}\n"
      "data: {source: pattern, max_predictions: 3}\noptimizer: {name: adamw, learning_rate: "
      "0.005}\n"
      "steps: 2\n");
  const auto run = [&](const std::string& name, const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_polyhal("run --config " + config.string() + " --metrics-out " +
                                     metrics.string() + " " + sets);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return step_losses(metrics);
  };
  const auto whole = run("whole", "");
  const auto piped = run("piped", "--set model.pipeline=3");
  ASSERT_EQ(piped.size(), 2u);
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(piped[i], whole[i], 1e-5) << i;
}

// Pipelined replicas as Graphcore runs them: 2 replicas x 2 stages on the
// four IPUs of a POD4 (replica r's stage s on IPU 2r + s), each stage's
// gradients averaged over the replicas and its optimizer state sharded;
// the same losses as 2 unpipelined replicas, and as 2 MPI ranks.
TEST(PipelinedPretrain, ReplicasOfAPipelineTrainLikeUnpipelinedReplicas) {
  test::TempDir dir;
  const auto config = dir.write(
      "p.yaml",
      "backend: ipu\ndevice: {system: POD4}\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16, "
      "vocab_size: 64, num_hidden_layers: 3, dropout: 0.1}\nbatch: {micro: 2, grad_accum: 3, "
      "replicas: 2}\ndata: {source: pattern, max_predictions: 3}\noptimizer: {name: lamb, "
      "learning_rate: 0.005, max_grad_norm: 0.05}\nsteps: 3\n");
  const auto run = [&](const std::string& name, const std::string& command,
                       const std::string& sets) {
    const auto metrics = dir.path() / (name + ".jsonl");
    const auto r = test::run_command(command + " run --config " + config.string() +
                                     " --metrics-out " + metrics.string() + " " + sets + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (sets.find("ipus_per_replica=2") != std::string::npos) {
      EXPECT_NE(r.output.find("pipeline: 2 stages"), std::string::npos) << r.output;
    }
    return step_losses(metrics);
  };
  const std::string launcher = POLYHAL_LAUNCHER;
  const auto whole = run("whole", launcher, "");
  const auto piped =
      run("piped", launcher, "--set device.ipus_per_replica=2 --set optimizer.shard_state=true");
  const auto one = run("one", launcher, "--set batch.replicas=1");
  ASSERT_EQ(whole.size(), 3u);
  ASSERT_EQ(piped.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(piped[i], whole[i], 1e-5) << i;
  EXPECT_GT(std::abs(one[2] - whole[2]), 1e-4) << "two replicas see other data than one";
  const auto mpi = run("mpi", test::mpirun(2),
                       "--set device.ipus_per_replica=2 --set collective.engine=mpi "
                       "--set collective.timeout_seconds=120");
  ASSERT_EQ(mpi.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(mpi[i], whole[i], 1e-5) << i;
}

// Graphcore's layout on an IPU-POD16: 4 replicas x 4 stages, recomputation,
// optimizer state and master weights in Streaming Memory: every IPU fits.
TEST(PipelinedPretrain, GraphcoreLayoutFitsEveryIpuOfAPod16) {
  const auto r =
      test::run_polyhal("run --compile-only --config " + std::string(POLYHAL_SOURCE_DIR) +
                        "/configs/pretrain-bert-large-phase1-ipu.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline: 4 stages"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 0: layers 0-4 + embeddings"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 3: layers 19-23 + heads"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("DOES NOT FIT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pipeline ramp"), std::string::npos) << r.output;
}

// device.ipus_per_replica places one stage per IPU, as Graphcore's
// --ipus-per-replica: alone it pipelines the model over that many IPUs; it
// must agree with model.pipeline when both are given.
TEST(PipelinedPretrain, IpusPerReplicaPlacesOneStagePerIpu) {
  const std::string large = " --config " + std::string(POLYHAL_SOURCE_DIR) +
                            "/configs/pretrain-bert-large-phase1-ipu.yaml";
  auto r = test::run_polyhal("run --compile-only" + large + " --set device.ipus_per_replica=4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = test::run_polyhal("validate" + large +
                        " --set model.pipeline=4 --set device.ipus_per_replica=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'device.ipus_per_replica': 2 IPUs per replica, but model.pipeline"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("has 4 stages"), std::string::npos) << r.output;
  r = test::run_polyhal("validate" + large + " --set device.ipus_per_replica=four");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected auto or a whole number"), std::string::npos) << r.output;
  const std::string base = " --config " + std::string(POLYHAL_SOURCE_DIR) +
                           "/configs/pretrain-bert-base-phase1-ipu.yaml";
  r = test::run_polyhal("run --compile-only" + base +
                        " --set device.ipus_per_replica=3 --set batch.replicas=1");
  EXPECT_NE(r.output.find("pipeline: 3 stages"), std::string::npos) << r.output;
  // 5 replicas x 4 IPUs do not fit in the 16 IPUs of a POD16.
  r = test::run_polyhal("validate" + large +
                        " --set device.ipus_per_replica=4 --set batch.replicas=5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("5 replicas x 4 pipeline stages need 20 devices"), std::string::npos)
      << r.output;
}

// model.pipeline: N balances compute and memory: BERT-large on 4 stages
// gets Graphcore's 5, 7, 7, 5; with a 250k-token vocabulary (multilingual)
// the embeddings and the decoder's copy outweigh layers, so the first and
// last stage take one layer each and the middle ones split the rest evenly.
TEST(PipelinedPretrain, AutomaticStagesBalanceComputeAndMemory) {
  const std::string base = "run --compile-only --config " + std::string(POLYHAL_SOURCE_DIR) +
                           "/configs/pretrain-bert-base-phase1-ipu.yaml";
  auto r = test::run_polyhal(base);
  EXPECT_NE(r.output.find("stage 0: layers 0-1 + embeddings"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 1: layers 2-5\n"), std::string::npos) << r.output;
  r = test::run_polyhal(base + " --set model.vocab_size=250000");
  EXPECT_NE(r.output.find("stage 0: layers 0-0 + embeddings"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 1: layers 1-5\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 2: layers 6-10\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 3: layers 11-11 + heads"), std::string::npos) << r.output;
}

TEST(PipelinedPretrain, APipelineThatMissesALayerNamesTheKey) {
  const std::string config = " --config " + std::string(POLYHAL_SOURCE_DIR) +
                             "/configs/pretrain-bert-base-phase1-ipu.yaml "
                             "--set device.ipus_per_replica=auto";
  auto r = test::run_polyhal("validate" + config +
                             " --set 'model.pipeline=[[0, 1, 2], [3, 5], [6, 7, 8, 9, 10, 11]]'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'model.pipeline': stage 1 lists layer 5 where layer 4 comes next"),
            std::string::npos)
      << r.output;
  r = test::run_polyhal("validate" + config + " --set 'model.pipeline=[[0, 1], [2, 3]]'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the stages cover layers 0-3, the model has 12 (0-11)"),
            std::string::npos)
      << r.output;
  r = test::run_polyhal("validate" + config + " --set model.pipeline=13 --set batch.replicas=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace polyhal
