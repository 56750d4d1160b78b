// polyhal run --profile: measured traces of CPU runs (whole model, replicas,
// pipeline), estimated traces of device models, and the flag's errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "polyhal/app/step_trace.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"
#include "trace_format.hpp"

namespace polyhal {
namespace {

constexpr const char* kSmallPretraining =
    "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16, vocab_size: 64, "
    "num_hidden_layers: 4, dropout: 0.1}\nbatch: {micro: 4, grad_accum: 2}\n"
    "data: {source: pattern, max_predictions: 3}\noptimizer: {name: lamb, learning_rate: 0.005}\n"
    "checkpoint: {dir: ckpt, every: 3}\nsteps: 5\n";

struct TracedRun {
  std::vector<double> losses;
  nlohmann::json trace;
  std::string output;
};

TracedRun run_traced(const test::TempDir& dir, const std::string& name, const std::string& flags) {
  const auto config = dir.write(name + ".yaml", kSmallPretraining);
  const auto metrics = dir.path() / (name + ".jsonl");
  const auto trace = dir.path() / (name + ".trace.json");
  const auto r = test::run_polyhal(
      fmt::format("run --config {} --metrics-out {} --set checkpoint.dir={} --profile-out {} {}",
                  config.string(), metrics.string(), (dir.path() / (name + "-ckpt")).string(),
                  trace.string(), flags));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  TracedRun run{test::step_losses(metrics), nullptr, r.output};
  if (std::filesystem::exists(trace)) run.trace = test::read_trace(trace);
  return run;
}

std::vector<nlohmann::json> named(const std::vector<nlohmann::json>& slices,
                                  const std::string& name) {
  std::vector<nlohmann::json> out;
  for (const auto& s : slices)
    if (s["name"] == name) out.push_back(s);
  return out;
}

bool inside(const nlohmann::json& inner, const nlohmann::json& outer) {
  const double a = inner["ts"], b = a + inner["dur"].get<double>();
  const double c = outer["ts"], d = c + outer["dur"].get<double>();
  return inner["tid"] == outer["tid"] && a >= c - 1e-3 && b <= d + 1e-3;
}

// Steps 2..3 of a CPU run: every kernel run with its op, shapes, dtype and
// implementation inside its step, the host phases around them, the trace
// well formed, and the losses the same as without --profile.
TEST(StepTrace, MeasuredWindowHoldsEveryKernelRunAndChangesNoLoss) {
  test::TempDir dir;
  const auto plain = run_traced(dir, "plain", "");
  const auto traced = run_traced(dir, "traced", "--profile 2:3");
  ASSERT_EQ(plain.losses.size(), 5u);
  EXPECT_EQ(traced.losses, plain.losses) << "tracing changed the run";
  ASSERT_TRUE(traced.trace.is_object()) << traced.output;
  EXPECT_NE(traced.output.find("trace of steps 2..3"), std::string::npos) << traced.output;
  const auto problems = test::trace_format_problems(traced.trace);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  EXPECT_EQ(traced.trace["otherData"]["timeline"], "measured");

  const auto slices = test::trace_slices(traced.trace);
  const auto steps = named(slices, "step 2").size() + named(slices, "step 3").size();
  EXPECT_EQ(steps, 2u);
  EXPECT_TRUE(named(slices, "step 1").empty() && named(slices, "step 4").empty())
      << "only the window is recorded";
  std::set<std::string> host;
  std::size_t kernels = 0;
  for (const auto& s : slices) {
    if (s["cat"] == "host" || s["cat"] == "collective") host.insert(s["name"]);
    if (s["cat"] != "kernel") continue;
    ++kernels;
    const auto& args = s["args"];
    EXPECT_FALSE(args.value("implementation", "").empty()) << s.dump();
    EXPECT_FALSE(args.value("kernel", "").empty()) << s.dump();
    EXPECT_TRUE(args.contains("dtype") && args.contains("op") && args.contains("output"));
    bool in_step = false;
    for (const auto& step : slices)
      if (step["cat"] == "step" && inside(s, step)) in_step = true;
    EXPECT_TRUE(in_step) << "a kernel outside the window's steps: " << s.dump();
  }
  // 2 steps x 2 micro-batches, each a forward and a backward of every op.
  EXPECT_GT(kernels, 100u);
  for (const char* phase :
       {"data", "upload", "all-reduce losses", "all-reduce gradients", "optimizer", "checkpoint"})
    EXPECT_TRUE(host.contains(phase)) << phase;
  EXPECT_EQ(named(slices, "checkpoint").size(), 1u) << "step 3 checkpoints (every 3)";
  EXPECT_EQ(named(slices, "forward").size(), 4u);
  EXPECT_EQ(named(slices, "backward").size(), 4u);
}

// Two replica threads in mixed precision (bf16 where the CPU computes it,
// else f32): a lane of tracks per replica, oneDNN's
// implementation names on the GEMMs; a pipeline: one track per stage with
// its 1F1B passes, and the host phases on their own track.
TEST(StepTrace, ReplicasAndPipelineStagesGetTracksOfTheirOwn) {
  test::TempDir dir;
  const auto replicas =
      run_traced(dir, "replicas", "--profile 1 --set batch.replicas=2 --set model.precision=mixed");
  ASSERT_TRUE(replicas.trace.is_object()) << replicas.output;
  EXPECT_TRUE(test::trace_format_problems(replicas.trace).empty());
  const auto tracks = test::trace_track_names(replicas.trace);
  std::set<std::string> names;
  for (const auto& [tid, name] : tracks) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"replica 0", "replica 1"}));
  bool onednn = false;
  for (const auto& s : test::trace_slices(replicas.trace))
    if (s["cat"] == "kernel" && s["name"] == "dense")
      onednn = onednn ||
               s["args"]["implementation"].get<std::string>().find("onednn") != std::string::npos;
  EXPECT_TRUE(onednn) << "dense runs oneDNN on this CPU";

  const auto piped =
      run_traced(dir, "piped", "--profile 2 --set 'model.pipeline=[[0], [1, 2], [3]]'");
  ASSERT_TRUE(piped.trace.is_object()) << piped.output;
  const auto problems = test::trace_format_problems(piped.trace);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  names.clear();
  for (const auto& [tid, name] : test::trace_track_names(piped.trace)) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"replica 0 host", "replica 0 stage 0",
                                          "replica 0 stage 1", "replica 0 stage 2"}));
  const auto slices = test::trace_slices(piped.trace);
  // 3 stages x 2 micro-batches, each a forward and a backward pass.
  std::size_t passes = 0;
  for (const auto& s : slices) passes += s["cat"] == "pipeline" ? 1 : 0;
  EXPECT_EQ(passes, 12u);
  EXPECT_EQ(named(slices, "F1").size(), 3u);
  EXPECT_EQ(named(slices, "step 2").size(), 1u);
}

// Under mpirun each rank writes its own trace (.rankN), its process the rank.
TEST(StepTrace, EachMpiRankWritesItsOwnTrace) {
  test::TempDir dir;
  const auto config = dir.write("mpi.yaml", kSmallPretraining);
  const auto r = test::run_command(fmt::format(
      "cd {} && {} run --config {} --set collective.engine=mpi --set batch.grad_accum=1 "
      "--profile 2 --profile-out {}/t.json 2>&1",
      dir.path().string(), test::mpirun(2), config.string(), dir.path().string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const auto file = dir.path() / fmt::format("t.rank{}.json", rank);
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    const auto t = test::read_trace(file);
    const auto problems = test::trace_format_problems(t);
    EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
    const auto slices = test::trace_slices(t);
    ASSERT_EQ(named(slices, "step 2").size(), 1u) << rank;
    EXPECT_EQ(named(slices, "step 2")[0]["pid"], rank);
    EXPECT_FALSE(named(slices, "all-reduce gradients").empty());
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "t.json"));
}

// On a device model the trace is the estimated 1F1B timeline, labelled so:
// no pass starts before its inputs exist, stages idle in the ramp
// (bubbles), and it needs no run (--compile-only).
TEST(StepTrace, DeviceModelsWriteTheEstimatedPipelineTimeline) {
  test::TempDir dir;
  const auto trace = dir.path() / "ipu.json";
  const auto r = test::run_polyhal(fmt::format(
      "run --config {}/configs/pretrain-bert-large-phase1-ipu.yaml --compile-only --profile 1:2 "
      "--profile-out {}",
      POLYHAL_SOURCE_DIR, trace.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("estimated by the device model"), std::string::npos) << r.output;
  const auto t = test::read_trace(trace);
  const auto problems = test::trace_format_problems(t);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  EXPECT_EQ(t["otherData"]["timeline"], "estimated");
  EXPECT_NE(t["otherData"]["note"].get<std::string>().find("not measured"), std::string::npos);
  const auto tracks = test::trace_track_names(t);
  ASSERT_EQ(tracks.size(), 4u) << "4 pipeline stages of replica 0";
  for (const auto& [tid, name] : tracks) EXPECT_TRUE(name.ends_with("(estimated)")) << name;
  // scripts/trace_summary.py: the stages run side by side, so shares are of
  // the four tracks' time and none is over 100% (issue 54, item 13).
  const auto summary = test::run_command(
      fmt::format("python3 {}/scripts/trace_summary.py {}", POLYHAL_SOURCE_DIR, trace.string()));
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_NE(summary.output.find("4 tracks run side by side"), std::string::npos) << summary.output;
  for (std::size_t at = summary.output.find('%'); at != std::string::npos;
       at = summary.output.find('%', at + 1)) {
    const auto start = summary.output.find_last_of(' ', at);
    EXPECT_LE(std::stod(summary.output.substr(start + 1, at - start - 1)), 100.0) << summary.output;
  }

  const auto slices = test::trace_slices(t);
  // Stage s runs forward of micro-batch m only after stage s-1 finished it.
  std::map<std::pair<int, int>, double> start, end;  // (stage, micro) of step 1's forwards
  for (const auto& s : slices) {
    if (s["cat"] != "pipeline" || s["name"].get<std::string>()[0] != 'F') continue;
    const std::pair key{s["args"]["stage"].get<int>(), s["args"]["micro_batch"].get<int>()};
    if (start.contains(key)) continue;  // the first step's
    start[key] = s["ts"];
    end[key] = s["ts"].get<double>() + s["dur"].get<double>();
  }
  for (const auto& [key, begin] : start) {
    if (key.first == 0) continue;
    EXPECT_GE(begin + 1e-3, end.at({key.first - 1, key.second}));
  }
  // The bubble: the last stage waits for the first 3 stages' first forward.
  EXPECT_GT(start.at({3, 0}), 0.0);
  // Kernels shown for the first micro-batches only: a long accumulation
  // stays a small trace.
  struct Pass {
    int tid, micro_batch;
    double begin, end;
  };
  std::vector<Pass> passes;
  for (const auto& p : slices)
    if (p["cat"] == "pipeline")
      passes.push_back({p["tid"].get<int>(), p["args"]["micro_batch"].get<int>(),
                        p["ts"].get<double>(), p["ts"].get<double>() + p["dur"].get<double>()});
  std::set<int> detailed;  // micro-batches whose passes hold kernels
  for (const auto& k : slices) {
    if (k["cat"] != "kernel") continue;
    const int tid = k["tid"];
    const double ts = k["ts"];
    for (const auto& p : passes)
      if (p.tid == tid && ts >= p.begin - 1e-3 && ts < p.end) detailed.insert(p.micro_batch);
  }
  EXPECT_EQ(detailed, (std::set<int>{0, 1}));
  EXPECT_LT(slices.size(), 100000u);
  EXPECT_GT(t["otherData"]["estimated_step_seconds"].get<double>(), 0.0);
}

// An overlapped all-reduce (collective.overlap, the estimate's default) is
// drawn on a communication track of its own, under the last backward; the
// step waits only for what it does not hide.
TEST(StepTrace, EstimatedAllReduceOverlapsTheLastBackwardOnItsOwnTrack) {
  test::TempDir dir;
  const auto trace = dir.path() / "gaudi.json";
  const auto r = test::run_polyhal(
      fmt::format("run --config {}/configs/pretrain-bert-large-phase1-16gaudi2.yaml --compile-only "
                  "--set batch.grad_accum=2 --profile 1 --profile-out {}",
                  POLYHAL_SOURCE_DIR, trace.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto t = test::read_trace(trace);
  const auto problems = test::trace_format_problems(t);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  int communication = -1;
  for (const auto& [tid, name] : test::trace_track_names(t))
    if (name.starts_with("replica 0 communication")) communication = tid;
  ASSERT_GE(communication, 0) << "no communication track";
  double backward_begin = 0, backward_end = 0, reduce_begin = -1, reduce_end = 0, wait_end = 0;
  for (const auto& s : test::trace_slices(t)) {
    const double ts = s["ts"], end = ts + s["dur"].get<double>();
    if (s["name"] == "backward") backward_begin = ts, backward_end = end;  // the last one
    if (s["name"] == "all-reduce gradients (overlapped)") {
      EXPECT_EQ(s["tid"].get<int>(), communication);
      reduce_begin = ts, reduce_end = end;
    }
    if (s["name"] == "waiting for the all-reduce") wait_end = end;
  }
  ASSERT_GE(reduce_begin, 0.0) << "no overlapped all-reduce";
  EXPECT_GE(reduce_begin + 1e-3, backward_begin);  // buckets exist only once backward runs
  EXPECT_LT(reduce_begin, backward_end);           // and reduce while it still runs
  EXPECT_NEAR(wait_end, reduce_end, 1e-3);         // the step waits for the rest only
}

// Inference: batch N is the Nth forward pass; measured on the CPU with
// every kernel inside its batch, estimated on the IPU model without a run.
TEST(StepTrace, InferenceTracesBatchesMeasuredOrEstimated) {
  test::TempDir dir;
  const auto cpu = dir.path() / "cpu.json", ipu = dir.path() / "ipu.json";
  auto r = test::run_polyhal(
      fmt::format("run --config {}/configs/bert-demo-cpu.yaml --profile 2:3 --profile-out {}",
                  POLYHAL_SOURCE_DIR, cpu.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trace of batches 2..3"), std::string::npos) << r.output;
  auto t = test::read_trace(cpu);
  auto problems = test::trace_format_problems(t);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  auto slices = test::trace_slices(t);
  ASSERT_EQ(named(slices, "batch 2").size(), 1u);
  ASSERT_EQ(named(slices, "batch 3").size(), 1u);
  EXPECT_TRUE(named(slices, "batch 1").empty());
  std::size_t kernels = 0;
  for (const auto& s : slices) {
    if (s["cat"] != "kernel") continue;
    ++kernels;
    EXPECT_TRUE(inside(s, named(slices, "batch 2")[0]) || inside(s, named(slices, "batch 3")[0]));
  }
  EXPECT_GT(kernels, 20u);

  r = test::run_polyhal(fmt::format(
      "run --config {}/configs/inference-bert-base-seq128-ipu.yaml --compile-only --profile 1:2 "
      "--profile-out {}",
      POLYHAL_SOURCE_DIR, ipu.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  t = test::read_trace(ipu);
  problems = test::trace_format_problems(t);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  EXPECT_EQ(t["otherData"]["timeline"], "estimated");
  slices = test::trace_slices(t);
  ASSERT_EQ(named(slices, "batch 2").size(), 1u);
  // Each batch lasts the model's estimate of a forward pass.
  EXPECT_NEAR(named(slices, "batch 2")[0]["dur"].get<double>() / 1e6,
              t["otherData"]["estimated_batch_seconds"].get<double>(), 1e-9);
}

TEST(StepTrace, AWindowThatIsNotOneIsAUsageErrorNamingTheFlag) {
  for (const char* bad : {"3:2", "0:1", "abc", "2:", "1:2:3"}) {
    const auto r = test::run_polyhal(fmt::format(
        "run --config {}/configs/pretrain-demo-cpu.yaml --profile {}", POLYHAL_SOURCE_DIR, bad));
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--profile"), std::string::npos) << r.output;
  }
  // Where the trace or the page would go is checked before the run.
  test::TempDir dir;
  auto r = test::run_polyhal(fmt::format(
      "run --config {}/configs/pretrain-demo-cpu.yaml --profile 1 --profile-out {}/no/t.json",
      POLYHAL_SOURCE_DIR, dir.path().string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--profile-out"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step"), std::string::npos) << "refused before any step: " << r.output;
  const auto blocker = dir.write("file", "x");
  r = test::run_polyhal(
      fmt::format("validate --config {}/configs/pretrain-demo-cpu.yaml --report {}",
                  POLYHAL_SOURCE_DIR, blocker.string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--report"), std::string::npos) << r.output;
  EXPECT_EQ(parse_step_window("30:31", "--profile").first, 30);
  EXPECT_EQ(parse_step_window("30:31", "--profile").last, 31);
  EXPECT_EQ(parse_step_window("7", "--profile").size(), 1);
  EXPECT_THROW(parse_step_window("99999999999999999999", "--profile"), ConfigError);
}

}  // namespace
}  // namespace polyhal
