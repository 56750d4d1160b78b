// One config on every backend: model.precision mixed picks each backend's
// own low precision and says so, device options live under their backend,
// and every shipped recipe validates with --backend switched, or says which
// key to set.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kConfigs = std::filesystem::path(POLYHAL_SOURCE_DIR) / "configs";

TEST(PrecisionPolicy, MixedPicksEachBackendsOwnAndSaysSo) {
  test::TempDir dir;
  const auto config = dir.write(
      "m.yaml",
      "backend: cpu\ndevice:\n  ipu: {partials: f16}\n  cpu: {threads: 1}\ntask: pretrain\n"
      "model: {preset: tiny, seq_len: 32, vocab_size: 64, precision: mixed}\nbatch: {micro: 4}\n"
      "data: {source: pattern, max_predictions: 3}\nsteps: 2\nlog: {every: 1}\n");
  struct Case {
    std::string backend, precision, says;
    double loss_scale;
  };
  for (const auto& c : std::vector<Case>{
           {"cpu", "bf16", "model.precision mixed: bf16 on cpu0", 1.0},
           {"gaudi", "bf16", "model.precision mixed: bf16 on hpu0", 1.0},
           {"ipu", "f16",
            "model.precision mixed: f16 on ipu0 (GC200 Mk2 IPU (IPU-POD4 model, 1 of 4)), as it "
            "has f16, not bf16; loss scaling dynamic from 65536 (optimizer.loss_scaling auto), "
            "f16 partials (device.ipu.partials)",
            65536.0}}) {
    const auto metrics = dir.path() / (c.backend + ".jsonl");
    const auto r = test::run_polyhal("run --config " + config.string() + " --backend " + c.backend +
                                     " --metrics-out " + metrics.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << r.output;
    EXPECT_EQ(test::last_json_line(metrics)["precision"], c.precision) << c.backend;
    const auto steps = test::step_records(metrics);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps.front()["loss_scale"].get<double>(), c.loss_scale) << c.backend;
  }
  // config show: the policy as written, each backend's device options.
  const auto shown = test::run_polyhal("config show " + config.string());
  EXPECT_NE(shown.output.find("model.precision:"), std::string::npos);
  EXPECT_NE(shown.output.find("mixed"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("{cpu: {threads: 1}, ipu: {partials: f16}}"), std::string::npos)
      << shown.output;
  EXPECT_NE(shown.output.find("m.yaml:5"), std::string::npos) << "device.cpu.threads' line\n"
                                                              << shown.output;
  // An option the backend lacks, under that backend's name, is its error.
  const auto bad =
      test::run_polyhal("validate --config " + config.string() + " --set device.cpu.partials=f16");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("key 'device.cpu.partials': backend 'cpu' has no such device option"),
            std::string::npos)
      << bad.output;
  // An explicit precision the device lacks names the key and the policy.
  const auto explicit_bf16 = test::run_polyhal("validate --config " + config.string() +
                                               " --backend ipu --set model.precision=bf16");
  EXPECT_EQ(explicit_bf16.exit_code, 2) << explicit_bf16.output;
  EXPECT_NE(explicit_bf16.output.find("key 'model.precision': ipu0 does not compute in bf16"),
            std::string::npos)
      << explicit_bf16.output;
  EXPECT_NE(explicit_bf16.output.find("model.precision: mixed"), std::string::npos)
      << explicit_bf16.output;
}

// Every shipped recipe, on every backend, with nothing but --backend changed:
// ok, or a plan that does not fit with the keys that would make it fit, or
// an error naming the key to set.
TEST(PrecisionPolicy, EveryShippedRecipeValidatesWithTheBackendSwitched) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml") continue;
    for (const std::string backend : {"cpu", "ipu", "gaudi"}) {
      const auto r =
          test::run_polyhal("validate --config " + entry.path().string() + " --backend " + backend);
      const std::string what = entry.path().filename().string() + " on " + backend + ":\n";
      if (r.exit_code == 0) {
        EXPECT_NE(r.output.find(": ok (backend " + backend), std::string::npos) << what << r.output;
      } else if (r.exit_code == 1) {
        EXPECT_NE(r.output.find("DOES NOT FIT"), std::string::npos) << what << r.output;
        EXPECT_NE(r.output.find("to fit on " + backend + ", set: "), std::string::npos)
            << what << r.output;
      } else {
        EXPECT_EQ(r.exit_code, 2) << what << r.output;
        EXPECT_NE(r.output.find(": key '"), std::string::npos) << what << r.output;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 3 * 40);
}

}  // namespace
}  // namespace polyhal
