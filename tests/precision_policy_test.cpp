// One config on every backend: model.precision mixed picks each backend's
// own low precision and says so, device options live under their backend,
// and every shipped recipe validates with --backend switched, or says which
// key to set.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_isa.hpp"
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
  // The CPU's choice depends on the host: bf16 only where it is native.
  const auto features = cpu::detect_cpu_features();
  const bool native_bf16 = cpu::isa_has_avx512(cpu::choose_isa(features, "auto").isa) &&
                           cpu::isa_supported(features, cpu::Isa::avx512_core_bf16);
  const std::string cpu_choice = native_bf16 ? "bf16" : "f32";
  for (const auto& c : std::vector<Case>{
           {"cpu", cpu_choice, "model.precision mixed: " + cpu_choice + " on cpu0", 1.0},
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

// On every CPU tier this host can run: mixed takes bf16 only where bf16 is
// native, and says why; an explicit precision the tier emulates still runs
// and warns once, naming the key and the better choice; int8 runs on VNNI
// with f32 activations where bf16 is not native.
TEST(PrecisionPolicy, MixedComputesNativelyOnEveryCpuTier) {
  test::TempDir dir;
  const auto config = dir.write(
      "i.yaml",
      "backend: cpu\ndevice: {cpu: {threads: 1}}\ntask: inference\n"
      "model: {preset: tiny, seq_len: 16, vocab_size: 64, precision: mixed}\n"
      "batch: {micro: 2}\ndata: {source: generated}\ninference: {iterations: 1, warmup: 0}\n");
  const auto features = cpu::detect_cpu_features();
  int tiers = 0;
  for (const cpu::Isa isa : {cpu::Isa::avx512_core_bf16, cpu::Isa::avx512_core_vnni,
                             cpu::Isa::avx512_core, cpu::Isa::avx2}) {
    const std::string tier = cpu::isa_name(isa);
    if (!cpu::isa_supported(features, isa)) {
      std::cout << "tier " << tier << " skipped: above this CPU\n";
      continue;
    }
    ++tiers;
    const std::string cap = " --set device.cpu.isa=" + tier;
    const auto checked = test::run_polyhal("validate --config " + config.string() + cap);
    ASSERT_EQ(checked.exit_code, 0) << tier << "\n" << checked.output;
    const std::string says = isa == cpu::Isa::avx512_core_bf16
                                 ? "precision bf16 on cpu0: mixed, as it computes bf16 natively"
                             : isa == cpu::Isa::avx2
                                 ? "precision f32 on cpu0: mixed, as it has neither native bf16"
                                 : "precision f32 on cpu0: mixed, as its bf16 would be emulated";
    EXPECT_NE(checked.output.find(says), std::string::npos) << tier << "\n" << checked.output;
    if (!cpu::isa_has_avx512(isa) || isa == cpu::Isa::avx512_core_bf16) continue;
    const auto metrics = dir.path() / (tier + ".jsonl");
    const auto emulated =
        test::run_polyhal("run --config " + config.string() + cap +
                          " --set model.precision=bf16 --metrics-out " + metrics.string());
    ASSERT_EQ(emulated.exit_code, 0) << tier << "\n" << emulated.output;
    EXPECT_NE(emulated.output.find("key 'model.precision': bf16 runs emulated on cpu0"),
              std::string::npos)
        << emulated.output;
    EXPECT_NE(emulated.output.find("f32 (or mixed, which picks it) computes natively here"),
              std::string::npos)
        << emulated.output;
    EXPECT_EQ(test::last_json_line(metrics)["precision_reason"].get<std::string>().substr(0, 24),
              "as written; emulated on ")
        << tier;
    if (isa != cpu::Isa::avx512_core_vnni) continue;
    const auto int8 = test::run_polyhal("run --config " + config.string() + cap +
                                        " --set model.precision=int8 --log-level debug");
    ASSERT_EQ(int8.exit_code, 0) << int8.output;
    EXPECT_NE(int8.output.find("precision int8: as written; native on cpu0: AVX512-VNNI"),
              std::string::npos)
        << int8.output;
  }
  EXPECT_GE(tiers, 1) << "every x86-64 CPU polyhal supports has AVX2";
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
