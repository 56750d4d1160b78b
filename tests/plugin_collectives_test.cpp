// Collectives a plugin supplies (collective.hpp's CollectiveEngine): every
// call offered to the backend's engine with its identity and deadline, the
// core's engine running what it refuses, a hanging engine given up at the
// deadline and a failing one named, all proven with the scripted fixture
// engine (tests/fixtures/collective_engine_plugin.cpp); the IPU and Gaudi
// models' engines price each call as their devices price an all-reduce.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/app/replica_group.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

/// The fixture backend alone in a directory of its own.
struct FixtureDir {
  TempDir dir;
  FixtureDir() {
    const std::string file = "libpolyhal_plugin_collfix.so";
    fs::copy_file(fs::path(POLYHAL_FIXTURE_DIR) / file, dir.path() / file);
  }
  std::shared_ptr<CollectiveEngine> engine(const std::string& behaviour,
                                           const std::string& at_call = "1") const {
    PluginSearchOptions options;
    options.explicit_dirs = {dir.path()};
    options.use_environment = false;
    PluginLoader loader(options);
    auto backend = loader.backend("collfix");
    auto devices = backend->open_devices(resolve_device_options(
        backend->device_options(), {{"engine", behaviour}, {"at_call", at_call}}));
    return devices.front()->collective_engine();
  }
};

GroupEngine with(std::shared_ptr<CollectiveEngine> engine, std::chrono::milliseconds timeout) {
  GroupEngine g;
  g.engine = std::move(engine);
  g.timeout = timeout;
  return g;
}

/// Every collective on two ranks, checked against what it must give.
void every_collective(Communicator& c) {
  const int rank = c.rank();
  std::vector<float> data(4, static_cast<float>(rank + 1));
  c.all_reduce(data.data(), data.size(), DType::f32, ReduceOp::sum);
  EXPECT_EQ(data, std::vector<float>(4, 3.0f));
  std::vector<float> blocks{1.0f * static_cast<float>(rank + 1),
                            10.0f * static_cast<float>(rank + 1)};
  float mine = 0;
  c.reduce_scatter(blocks.data(), &mine, 1, DType::f32, ReduceOp::sum);
  EXPECT_EQ(mine, rank == 0 ? 3.0f : 30.0f);
  const std::int64_t id = 100 + rank;
  std::vector<std::int64_t> ids(2);
  c.all_gather(&id, ids.data(), 1, DType::i64);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{100, 101}));
  std::int64_t value = rank == 1 ? 42 : 0;
  c.broadcast(&value, 1, DType::i64, 1);
  EXPECT_EQ(value, 42);
  c.barrier();
}

TEST(PluginCollectives, TheBackendsEngineRunsEveryCollectiveWithItsResults) {
  const FixtureDir fixture;
  ReplicaGroup group(2, nullptr, with(fixture.engine("run"), std::chrono::seconds(10)));
  ASSERT_NE(group.engine(), nullptr);
  group.run([&](int r) { every_collective(group.communicator(r)); });
  const auto counts = group.engine_counts().value();
  EXPECT_EQ(counts.run, 10u);  // 5 calls on each of 2 ranks
  EXPECT_EQ(counts.refused, 0u);
  EXPECT_TRUE(counts.modelled);
  EXPECT_NEAR(counts.modelled_seconds, 10e-3, 1e-9);  // the fixture prices 1 ms a call
}

TEST(PluginCollectives, WhatTheEngineRefusesRunsOnTheCoresEngine) {
  const FixtureDir fixture;
  for (const std::string behaviour : {"refuse", "refuse_large"}) {
    ReplicaGroup group(2, nullptr, with(fixture.engine(behaviour), std::chrono::seconds(10)));
    group.run([&](int r) {
      Communicator& c = group.communicator(r);
      every_collective(c);
      std::vector<float> large(5000, static_cast<float>(r + 1));  // refused by refuse_large
      c.all_reduce(large.data(), large.size(), DType::f32, ReduceOp::mean);
      EXPECT_EQ(large, std::vector<float>(5000, 1.5f));
    });
    const auto counts = group.engine_counts().value();
    SCOPED_TRACE(behaviour);
    EXPECT_EQ(counts.refused, behaviour == "refuse" ? 12u : 2u);
    EXPECT_EQ(counts.run, behaviour == "refuse" ? 0u : 10u);
  }
}

TEST(PluginCollectives, AHangingEngineIsGivenUpAtTheDeadlineNamingTheCall) {
  const FixtureDir fixture;
  constexpr auto kTimeout = std::chrono::milliseconds(400);
  ReplicaGroup group(2, nullptr, with(fixture.engine("hang", "2"), kTimeout));
  const auto start = std::chrono::steady_clock::now();
  try {
    group.run([&](int r) {
      Communicator& c = group.communicator(r);
      c.barrier();  // call 1 runs
      c.set_step(7);
      c.set_purpose("gradient of bert.pooler.dense.weight");
      std::vector<float> data(4, 1.0f);
      c.all_reduce(data.data(), data.size(), DType::f32, ReduceOp::mean);  // call 2 hangs
    });
    FAIL() << "a hanging engine was not given up";
  } catch (const CollectiveTimeout& e) {
    const std::string message = e.what();
    for (const char* part :
         {"collective #2 all_reduce(4 x f32, mean) at step 7, gradient of bert.pooler.dense.weight",
          "collective engine 'fixture engine (hang)' did not finish within 0.4 s",
          "collective.plugin_engine: off"})
      EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_EQ(e.exit_code(), ExitCode::lost_rank);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 0.4 + 2.0) << "given up long after the deadline";
}

TEST(PluginCollectives, AFailingEngineEndsTheRunNamingTheEngineAndTheCall) {
  const FixtureDir fixture;
  ReplicaGroup group(2, nullptr, with(fixture.engine("fail", "3"), std::chrono::seconds(10)));
  try {
    group.run([&](int r) { every_collective(group.communicator(r)); });
    FAIL() << "a failing engine was not reported";
  } catch (const ReplicaStopped& e) {
    FAIL() << "the consequence was reported, not the cause: " << e.what();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("collective #3 all_gather(1 x i64 per rank)"), std::string::npos)
        << message;
    EXPECT_NE(message.find("collective engine 'fixture engine (fail)' failed: the fixture's "
                           "links are down (scripted)"),
              std::string::npos)
        << message;
    EXPECT_EQ(e.exit_code(), ExitCode::failure);
  }
}

TEST(PluginCollectives, OneReplicaOrNoEngineLeavesTheCoresCommunicators) {
  const FixtureDir fixture;
  const ReplicaGroup one(1, nullptr, with(fixture.engine("run"), std::chrono::seconds(1)));
  EXPECT_EQ(one.engine(), nullptr);
  EXPECT_FALSE(one.engine_counts().has_value());
  EXPECT_EQ(fixture.engine("none"), nullptr);
}

TEST(PluginCollectives, DeviceModelsPriceEachCallAsTheirDevicesPriceAnAllReduce) {
  for (const auto& [backend, options] :
       std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"ipu", {{"system", "POD128"}}}, {"gaudi", {{"servers", "4"}}}}) {
    SCOPED_TRACE(backend);
    const auto device = test::first_device(backend, options);
    const auto& engine = device->collective_engine();
    ASSERT_NE(engine, nullptr);
    EXPECT_NE(engine->name().find("(modelled)"), std::string::npos) << engine->name();
    for (const int replicas : {2, 8, 32, 128}) {
      CollectiveCall call;
      call.op = CollectiveOp::all_reduce;
      call.count = 1'000'000;
      call.size = replicas;
      const double device_price =
          device
              ->estimate_seconds(
                  {OpKind::all_reduce, DType::f32, {{1'000'000}}, AllReduceAttrs{replicas}})
              .value();
      EXPECT_DOUBLE_EQ(engine->estimate_seconds(call).value(), device_price);
      call.op = CollectiveOp::reduce_scatter;
      call.count = 1'000'000 / static_cast<std::size_t>(replicas);
      EXPECT_NEAR(engine->estimate_seconds(call).value(), device_price / 2.0, device_price * 0.01);
    }
  }
  // GCL reduces the IPU's f16 and f32; a bf16 reduction is refused before
  // anything is touched (no transport needed), and the core runs it.
  const auto ipu = test::first_device("ipu");
  CollectiveCall bf16;
  bf16.op = CollectiveOp::all_reduce;
  bf16.type = DType::bf16;
  bf16.count = 8;
  bf16.size = 2;
  EXPECT_EQ(ipu->collective_engine()->run(bf16), CollectiveResult::refused);
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

/// `polyhal run` of the pre-training demo on the fixture backend, 2 replicas, 6 steps.
test::CommandResult run_demo_on_fixture(const FixtureDir& fixture, const std::string& name,
                                        const std::string& settings) {
  const auto out = fixture.dir.path() / name;
  return test::run_polyhal(
      fmt::format("run {}/configs/pretrain-demo-cpu.yaml --plugin-path {} --backend collfix --set "
                  "batch.replicas=2 --set steps=6 --set log.every=1 --set checkpoint.dir={} --set "
                  "checkpoint.every=3 --metrics-out {}.jsonl {}",
                  POLYHAL_SOURCE_DIR, fixture.dir.path().string(), (out / "ck").string(),
                  out.string(), settings));
}

TEST(PluginCollectives, PreTrainingThroughTheEngineLearnsExactlyAsOnTheCoresEngine) {
  const FixtureDir fixture;
  const auto core = run_demo_on_fixture(fixture, "off", "--set collective.plugin_engine=off");
  ASSERT_EQ(core.exit_code, 0) << core.output;
  EXPECT_EQ(core.output.find("the backend's engine"), std::string::npos) << core.output;
  const auto losses = test::step_losses(fixture.dir.path() / "off.jsonl");
  ASSERT_EQ(losses.size(), 6u);
  for (const std::string behaviour : {"run", "refuse"}) {
    SCOPED_TRACE(behaviour);
    const auto r = run_demo_on_fixture(fixture, behaviour, "--set device.engine=" + behaviour);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(test::step_losses(fixture.dir.path() / (behaviour + ".jsonl")), losses);
    const std::string note = behaviour == "run"
                                 ? "the backend's engine 'fixture engine (run)' ran "
                                 : "the backend's engine 'fixture engine (refuse)' ran 0 calls";
    EXPECT_NE(r.output.find(note), std::string::npos) << r.output;
  }
}

TEST(PluginCollectives, AHangingEngineEndsTheRunWithExitFourAndLosesNoCheckpoint) {
  const FixtureDir fixture;
  // About 40 collectives a step: call 200 is in step 5, after the checkpoint of step 3. The
  // deadline covers waiting for the peer too: under ASan, with tests in parallel, the ranks'
  // first steps have differed by over a second.
  const auto r = run_demo_on_fixture(
      fixture, "hang",
      "--set device.engine=hang --set device.at_call=200 --set collective.timeout_seconds=6");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("collective #200 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("collective engine 'fixture engine (hang)' did not finish within 6.0 s"),
            std::string::npos)
      << r.output;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(fixture.dir.path() / "hang" / "ck"))
    if (entry.path().filename() != ".polyhal.lock")
      files.push_back(entry.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"checkpoint-00000003.safetensors"});
}

TEST(PluginCollectives, RequiredWithoutAnEngineIsAConfigError) {
  const FixtureDir fixture;
  const auto r = run_demo_on_fixture(
      fixture, "none", "--set device.engine=none --set collective.plugin_engine=required");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'collective.plugin_engine': required, but backend 'collfix' has "
                          "no collective engine of its own"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
