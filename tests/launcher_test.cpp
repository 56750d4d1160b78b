// The launcher as a user meets it: messages and exit codes (0 ok, 1 failure,
// 2 bad usage or config, 3 plugin or device unavailable).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace polyhal {
namespace {

using test::run_polyhal;

std::string config_file(const test::TempDir& dir, const std::string& backend,
                        const std::string& extra = "") {
  return dir
      .write("c.yaml",
             "backend: " + backend +
                 "\ntask: matmul-bench\nmatmul_bench:\n  shapes: [[16, 8, 4]]\n  iterations: 2\n" +
                 extra)
      .string();
}

TEST(Launcher, VersionAndPlugins) {
  auto version = run_polyhal("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("plugin ABI 1.0"), std::string::npos);
  auto plugins = run_polyhal("plugins");
  EXPECT_EQ(plugins.exit_code, 0) << plugins.output;
  EXPECT_NE(plugins.output.find("backends: cpu, gaudi, ipu"), std::string::npos) << plugins.output;
}

TEST(Launcher, UnknownCommandAndOptionAreUsageErrors) {
  auto r = run_polyhal("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos);
  r = run_polyhal("run --confg x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unrecognised option '--confg'"), std::string::npos) << r.output;
  r = run_polyhal("run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("'run' needs --config FILE"), std::string::npos);
}

TEST(Launcher, BadConfigExitsTwoNamingFileLineKey) {
  test::TempDir dir;
  const auto file = config_file(dir, "cpu", "  warmpu: 1\n");
  auto r = run_polyhal("validate --config " + file);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(
                file +
                ":6: key 'matmul_bench.warmpu': unknown key (did you mean 'matmul_bench.warmup'?)"),
            std::string::npos)
      << r.output;
  r = run_polyhal("run --config " + dir.path().string() + "/missing.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("cannot read the config file"), std::string::npos);
}

TEST(Launcher, BadDeviceOptionValueIsAConfigError) {
  test::TempDir dir;
  const auto file = config_file(dir, "ipu", "device:\n  system: POD3\n");
  auto r = run_polyhal("validate --config " + file);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(":7: key 'device.system': expected one of POD4, POD16, POD64, POD128, "
                          "POD256, got \"POD3\""),
            std::string::npos)
      << r.output;
}

TEST(Launcher, MissingBackendExitsThree) {
  test::TempDir dir;
  auto r = run_polyhal("run --config " + config_file(dir, "tpu"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("backend 'tpu' is not available"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("polyhal-plugin-tpu"), std::string::npos) << r.output;
}

TEST(Launcher, HardwareModeOnDeviceModelExitsThreeNamingRuntime) {
  test::TempDir dir;
  auto r = run_polyhal("run --config " + config_file(dir, "ipu") + " --set device.mode=hardware");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("Poplar SDK"), std::string::npos) << r.output;
  r = run_polyhal("run --config " + config_file(dir, "gaudi") + " --set device.mode=hardware");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("SynapseAI"), std::string::npos) << r.output;
}

TEST(Launcher, Bf16OnIpuIsAClearErrorSuggestingF16) {
  test::TempDir dir;
  auto r =
      run_polyhal("run --config " + config_file(dir, "ipu") + " --set matmul_bench.dtype=bf16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("use dtype f16"), std::string::npos) << r.output;
}

TEST(Launcher, RunWritesMetricsEndingInSummary) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  for (const std::string backend : {"cpu", "gaudi"}) {
    auto r = run_polyhal("run --config " + config_file(dir, backend, "  dtype: bf16\n") +
                         " --metrics-out " + metrics.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(metrics);
    std::string line, last;
    while (std::getline(in, line)) last = line;
    const auto summary = nlohmann::json::parse(last);
    EXPECT_EQ(summary["event"], "summary");
    EXPECT_EQ(summary["backend"], backend);
    for (const char* key :
         {"device", "model", "precision", "seq_len", "global_batch", "sequences_per_second"}) {
      EXPECT_TRUE(summary.contains(key)) << key;
    }
    if (backend == "gaudi") {
      EXPECT_NE(r.output.find("estimated (device model, not measured)"), std::string::npos)
          << r.output;
      EXPECT_TRUE(summary.contains("estimated_gflops"));
      EXPECT_FALSE(summary.contains("gflops")) << "a model must not report measured speed";
    } else {
      EXPECT_GT(summary["gflops"].get<double>(), 0.0);
    }
  }
}

TEST(Launcher, CompileOnlyReportsMemoryAndFailsWhenItDoesNotFit) {
  test::TempDir dir;
  auto r = run_polyhal("run --compile-only --config " + config_file(dir, "ipu", "  dtype: f16\n") +
                       " --set 'matmul_bench.shapes=[[16384, 16384, 4096]]'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("DOES NOT FIT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pipeline the model over more IPUs"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("host simulation"), std::string::npos) << "compile-only must not run";
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

/// A plugin directory holding every broken fixture next to a good plugin.
struct BrokenPluginDir {
  test::TempDir dir;
  BrokenPluginDir() {
    namespace fs = std::filesystem;
    for (const char* name : {"wrongabi", "noentry", "needsdep"}) {
      const std::string file = std::string("libpolyhal_plugin_") + name + ".so";
      fs::copy_file(fs::path(POLYHAL_FIXTURE_DIR) / file, dir.path() / file);
    }
    dir.write("libpolyhal_plugin_corrupt.so", "this is not an ELF file");
  }
  std::string flag() const { return "--plugin-path " + dir.path().string(); }
};

TEST(LauncherPlugins, BrokenPluginsAreListedWithReasonsAndOthersStillRun) {
  BrokenPluginDir broken;
  auto r = run_polyhal("plugins " + broken.flag());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* reason : {"reason: plugin ABI 2.0, host accepts 1.0-1.0",
                             "reason: no entry point 'polyhal_plugin_entry'",
                             "reason: missing dependency: libpolyhal_fixture_dependency.so",
                             "reason: not a shared library"}) {
    EXPECT_NE(r.output.find(reason), std::string::npos) << reason << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("backends: cpu, gaudi, ipu"), std::string::npos) << r.output;
  test::TempDir dir;
  r = run_polyhal("run " + broken.flag() + " --config " +
                  config_file(dir, "gaudi", "  dtype: bf16\n"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(LauncherPlugins, RunOnABrokenPluginExitsThreeWithTheReason) {
  BrokenPluginDir broken;
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"wrongabi", "plugin ABI 2.0, host accepts 1.0-1.0"},
      {"noentry", "no entry point"},
      {"needsdep", "missing dependency: libpolyhal_fixture_dependency.so"},
      {"corrupt", "not a shared library"}};
  for (const auto& [backend, reason] : cases) {
    auto r = run_polyhal("run " + broken.flag() + " --config " + config_file(dir, backend));
    EXPECT_EQ(r.exit_code, 3) << backend << ": " << r.output;
    EXPECT_NE(r.output.find("its plugin was found but refused"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(reason), std::string::npos) << backend << ": " << r.output;
  }
}

TEST(LauncherPlugins, WorldWritablePluginDirNeedsExplicitPermission) {
  test::TempDir dir;
  std::filesystem::copy_file(test::built_plugin("gaudi"),
                             dir.path() / "libpolyhal_plugin_gaudi.so");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
  auto r = run_polyhal("plugins --plugin-path " + dir.path().string());
  EXPECT_NE(r.output.find("not trusted: directory " + dir.path().string() + " is world-writable"),
            std::string::npos)
      << r.output;
  r = run_polyhal("plugins --allow-world-writable-plugins --plugin-path " + dir.path().string());
  EXPECT_NE(r.output.find(dir.path().string() + "/libpolyhal_plugin_gaudi.so\n"), std::string::npos)
      << r.output;
}

TEST(Launcher, BadLogLevelIsAUsageError) {
  auto r = run_polyhal("--log-level chatty plugins");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--log-level: unknown level 'chatty'"), std::string::npos) << r.output;
}

TEST(Launcher, CpuIsaCapIsAppliedAndReported) {
  auto r = run_polyhal("devices --backend cpu --set device.isa=avx2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("onednn isa  avx2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("capped at avx2 by device.isa"), std::string::npos) << r.output;
  r = run_polyhal("devices --backend cpu --set device.isa=amx");
  if (r.exit_code == 0) GTEST_SKIP() << "this CPU has AMX";
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("amx is not usable on this CPU"), std::string::npos) << r.output;
  r = run_polyhal("devices --set device.isa=avx2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace polyhal
