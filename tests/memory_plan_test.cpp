// The CPU memory plan against what a run really holds: the plan counts the
// tensors, every kernel's own memory (oneDNN scratch, packed weights,
// attention scores), the host's copies (weights as read, a checkpoint
// snapshot) and the process itself, so it lands within 20% of the measured
// peak resident size, here at three inference sizes and in training.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace polyhal {
namespace {

/// Runs `config` with `sets` and returns (planned bytes, peak RSS bytes)
/// from the run's summary.
std::pair<double, double> planned_and_peak(const std::string& config, const std::string& sets) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  const auto r = test::run_polyhal("run --config " + std::string(POLYHAL_SOURCE_DIR) + "/configs/" +
                                   config + " --metrics-out " + metrics.string() + " " + sets);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto summary = test::last_json_line(metrics);
  return {summary.value("memory_required_bytes", 0.0), summary.value("peak_rss_bytes", 0.0)};
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // shadow memory and quarantine change RSS
#else
constexpr bool kSanitized = false;
#endif

TEST(MemoryPlan, CpuInferencePlanIsWithinTwentyPercentOfPeakRssAtThreeSizes) {
  if (kSanitized) GTEST_SKIP() << "RSS under a sanitizer is not the program's";
  for (const auto& [seq, batch] : {std::pair{128, 8}, std::pair{256, 8}, std::pair{512, 16}}) {
    const auto [planned, peak] = planned_and_peak(
        "inference-bert-base-seq128-cpu.yaml",
        fmt::format("--set model.seq_len={} --set batch.micro={} --set inference.iterations=1 "
                    "--set inference.warmup=0",
                    seq, batch));
    ASSERT_GT(peak, 0) << "no peak_rss_bytes in the summary";
    EXPECT_NEAR(planned / peak, 1.0, 0.2)
        << "seq " << seq << " batch " << batch << ": planned " << planned / 1048576 << " MiB, peak "
        << peak / 1048576 << " MiB";
  }
}

TEST(MemoryPlan, CpuTrainingPlanIsWithinTwentyPercentOfPeakRss) {
  if (kSanitized) GTEST_SKIP() << "RSS under a sanitizer is not the program's";
  const test::TempDir checkpoints;
  const auto [planned, peak] = planned_and_peak(
      "pretrain-bert-base-phase1-cpu.yaml",
      "--set batch.micro=8 --set batch.grad_accum=1 --set steps=1 --set checkpoint.dir=" +
          checkpoints.path().string());
  ASSERT_GT(peak, 0) << "no peak_rss_bytes in the summary";
  EXPECT_NEAR(planned / peak, 1.0, 0.2)
      << "planned " << planned / 1048576 << " MiB, peak " << peak / 1048576 << " MiB";
}

}  // namespace
}  // namespace polyhal
