// The parts pre-training is built from: LossScaler, CheckpointStore and
// ReplicaGroup, each on its own.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <stdexcept>

#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/loss_scaler.hpp"
#include "polyhal/app/replica_group.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

TEST(LossScaler, DynamicHalvesOnOverflowAndDoublesAfterAGoodRun) {
  LossScaler scaler(LossScaler::Mode::dynamic, 1024.0, 3);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512.0);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 512.0);
  scaler.update(false);  // the third good step in a row
  EXPECT_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.good_steps(), 3);
}

TEST(LossScaler, StaticKeepsItsScaleAndAutoFollowsThePrecision) {
  LossScaler fixed(LossScaler::Mode::fixed, 4096.0, 10);
  fixed.update(true);
  fixed.update(false);
  EXPECT_EQ(fixed.scale(), 4096.0);
  OptimizerSection o;  // loss_scaling: auto
  EXPECT_EQ(resolve_loss_scaling(o, DType::f16).mode(), LossScaler::Mode::dynamic);
  EXPECT_EQ(resolve_loss_scaling(o, DType::bf16).mode(), LossScaler::Mode::none);
  EXPECT_EQ(resolve_loss_scaling(o, DType::bf16).scale(), 1.0);
}

TEST(LossScaler, StateRoundTripsThroughCheckpointMetadataAndRefusesGarbage) {
  LossScaler a(LossScaler::Mode::dynamic, 1024.0, 5);
  a.update(true);
  a.update(false);
  LossScaler b(LossScaler::Mode::dynamic, 65536.0, 5);
  b.restore(a.metadata());
  EXPECT_EQ(b.scale(), 512.0);
  EXPECT_EQ(b.good_steps(), 1);
  EXPECT_THROW(b.restore({{"loss_scale", "lots"}}), ConfigError);
  EXPECT_THROW(b.restore({{"loss_scale", "-2"}}), ConfigError);
  EXPECT_THROW(b.restore({{"good_steps", "3x"}}), ConfigError);
}

TEST(CheckpointStore, NewestCompleteCheckpointAndItsStep) {
  test::TempDir dir;
  const CheckpointStore store(dir.path() / "ck");
  EXPECT_FALSE(store.latest());
  const TensorMap state{{"w", {{2}, {1.0f, 2.0f}}}};
  store.save(3, state, {{"loss_scale", "8"}});
  const auto newest = store.save(12, state, {});
  std::ofstream(dir.path() / "ck" / "checkpoint-00000099.safetensors.tmp") << "half";
  ASSERT_TRUE(store.latest());
  EXPECT_EQ(*store.latest(), newest);
  const auto loaded = CheckpointStore::load(newest);
  EXPECT_EQ(loaded.step, 12);
  EXPECT_EQ(loaded.state.at("w").values, state.at("w").values);
}

TEST(CheckpointStore, AStepThatIsNotANumberIsAConfigErrorNamingTheFile) {
  test::TempDir dir;
  const auto file = dir.path() / "checkpoint-00000001.safetensors";
  write_safetensors({{"w", {{1}, {1.0f}}}}, DType::f32, file, {{"step", "one"}});
  try {
    CheckpointStore::load(file);
    FAIL() << "a step of \"one\" was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ": checkpoint step \"one\""),
              std::string::npos)
        << e.what();
  }
}

// The cause of a failed group is the replica that failed, not the replicas
// that stopped because of it, whichever thread finishes first.
TEST(ReplicaGroup, RethrowsTheCauseNotTheReplicasThatStoppedWithIt) {
  for (int failing = 0; failing < 3; ++failing) {
    ReplicaGroup group(3, nullptr);
    std::atomic<int> stopped{0};
    try {
      group.run([&](int r) {
        if (r == failing) throw std::runtime_error("disk full on replica " + std::to_string(r));
        float x = 1;
        try {
          group.communicator(r).all_reduce(&x, 1, DType::f32, ReduceOp::mean);
        } catch (const ReplicaStopped& e) {
          EXPECT_EQ(e.failed_rank(), failing);
          ++stopped;
          throw;
        }
      });
      FAIL() << "the group's failure was not rethrown";
    } catch (const ReplicaStopped& e) {
      FAIL() << "a consequence was reported as the cause: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "disk full on replica " + std::to_string(failing));
    }
    EXPECT_EQ(stopped.load(), 2);
  }
}

}  // namespace
}  // namespace polyhal
