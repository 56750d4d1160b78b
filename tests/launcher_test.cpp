// The launcher as a user meets it: messages and exit codes (0 ok, 1 failure,
// 2 bad usage or config, 3 plugin or device unavailable).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/app/task.hpp"
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
  EXPECT_NE(version.output.find("plugin ABI 8.0, op schema 11"), std::string::npos);
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

TEST(LauncherCli, HelpForEveryCommandAndTheOverview) {
  auto r = run_polyhal("help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Every command has its own one-line summary, within 80 columns (issue 35, item 2).
  std::istringstream lines(r.output.substr(r.output.find("commands:\n") + 10));
  int listed = 0;
  for (std::string line; std::getline(lines, line) && !line.empty(); ++listed) {
    EXPECT_LE(line.size(), 80u) << line;
    const auto summary = line.find_first_not_of(' ', line.find(' ', 2));
    EXPECT_NE(summary, std::string::npos) << "no summary: " << line;
  }
  EXPECT_EQ(listed, 12) << r.output;
  for (const char* command : {"plugins", "devices", "run", "serve", "validate", "pack",
                              "prepare-data", "convert", "config", "report", "supervise", "help"})
    EXPECT_NE(r.output.find(std::string("\n  ") + command), std::string::npos) << command;
  EXPECT_NE(r.output.find("4 a replica was lost"), std::string::npos) << r.output;
  r = run_polyhal("help run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("usage: polyhal run CONFIG"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--compile-only"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--rows-per-file"), std::string::npos) << "pack's option in run's help";
  EXPECT_EQ(run_polyhal("run --help").output, r.output) << "'run --help' is 'help run'";
  r = run_polyhal("pack --help");
  EXPECT_NE(r.output.find("--rows-per-file"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--compile-only"), std::string::npos) << r.output;
}

TEST(LauncherCli, MistypedCommandsAndOptionsGetTheNearest) {
  auto r = run_polyhal("rnu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command 'rnu' (did you mean 'run'?)"), std::string::npos)
      << r.output;
  r = run_polyhal("help valdiate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("(did you mean 'validate'?)"), std::string::npos) << r.output;
  r = run_polyhal("validate --bakend cpu x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unrecognised option '--bakend' for 'validate' (did you mean "
                          "'--backend'?)"),
            std::string::npos)
      << r.output;
  r = run_polyhal("plugins --compile-only");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("('--compile-only' is an option of 'run')"), std::string::npos)
      << r.output;
}

TEST(LauncherCli, DevicesListsEachBackendsOptionsWithTypeDefaultAndHelp) {
  auto r = run_polyhal("devices --backend gaudi --options");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gaudi device options"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  cards "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("default 8"), std::string::npos) << r.output;
  r = run_polyhal("devices --options");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* backend : {"cpu", "ipu", "gaudi"})
    EXPECT_NE(r.output.find(std::string(backend) + " device options"), std::string::npos)
        << backend;
  EXPECT_NE(r.output.find("isa "), std::string::npos) << r.output;
}

TEST(LauncherCli, DevicesAlikeAreShownOnceInAlignedColumns) {
  const auto r = run_polyhal("devices --backend gaudi");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The 8 cards of a server, once; named apart from the generation gaudi3.
  EXPECT_EQ(r.output.find("hpu0 .. hpu7 (8 alike)  [gaudi]"), 0u) << r.output;
  EXPECT_EQ(r.output.find("hpu1 "), std::string::npos) << r.output;
  // Every row's provenance column starts at the same place.
  std::istringstream lines(r.output);
  std::string line;
  std::set<std::size_t> columns;
  while (std::getline(lines, line))
    for (const char* source : {"  datasheet", "  modelled", "  derived", "  measured"})
      if (const auto at = line.find(source); line.starts_with("  ") && at != std::string::npos) {
        columns.insert(at);
        break;
      }
  EXPECT_EQ(columns.size(), 1u) << r.output;
  const auto all = run_polyhal("devices");
  EXPECT_LT(std::count(all.output.begin(), all.output.end(), '\n'), 60) << all.output;
}

TEST(LauncherCpu, ComputesWithTheCpusItMayRunOnNotTheMachinesTotal) {
  // A process bound to one core (taskset here; mpirun binds each rank) runs
  // one OpenMP thread: two would spin against each other on that core.
  auto r = test::run_command("env -u OMP_NUM_THREADS taskset -c 0 " POLYHAL_LAUNCHER
                             " devices --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("threads     1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the 1 CPU this process may run on"), std::string::npos) << r.output;
  r = test::run_command("OMP_NUM_THREADS=3 " POLYHAL_LAUNCHER " devices --backend cpu");
  EXPECT_NE(r.output.find("threads     3 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("OMP_NUM_THREADS=3"), std::string::npos) << r.output;
  r = run_polyhal("devices --backend cpu --set device.threads=2");
  EXPECT_NE(r.output.find("OpenMP threads oneDNN uses: device.threads"), std::string::npos)
      << r.output;
}

TEST(LauncherCli, ShellCompletionOffersTheValuesOfAnOption) {
  const auto lines = [](const std::string& words) {
    std::set<std::string> out;
    std::istringstream text(run_polyhal("__complete " + words).output);
    for (std::string line; std::getline(text, line);) out.insert(line);
    return out;
  };
  EXPECT_EQ(lines("run c.yaml --backend ''"), (std::set<std::string>{"cpu", "gaudi", "ipu"}));
  EXPECT_EQ(lines("--log-level ''"),
            (std::set<std::string>{"trace", "debug", "info", "warn", "error", "off"}));
  EXPECT_EQ(lines("run c.yaml --progress ''"),
            (std::set<std::string>{"auto", "bar", "lines", "none"}));
  EXPECT_EQ(lines("config ''"), (std::set<std::string>{"show", "reference"}));
  const auto keys = lines("run c.yaml --set ''");
  for (const char* key : {"batch.micro=", "collective.plugin_engine=", "checkpoint.keep_last="})
    EXPECT_EQ(keys.count(key), 1u) << key;
}

TEST(LauncherCli, ShellCompletionComesFromTheCommandTable) {
  auto r = run_polyhal("__complete ru");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("run\n"), std::string::npos) << r.output;
  r = run_polyhal("__complete run --c");
  EXPECT_NE(r.output.find("--config\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--compile-only\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--rows-per-file"), std::string::npos) << r.output;
  // The installed bash function, as bash calls it.
  r = test::run_command("bash -c 'source " POLYHAL_SOURCE_DIR
                        "/packaging/completion/polyhal.bash; COMP_WORDS=(" POLYHAL_LAUNCHER
                        " run --comp); COMP_CWORD=2; _polyhal; echo \"${COMPREPLY[*]}\"'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "--compile-only\n");
  r = test::run_command("bash -c 'source " POLYHAL_SOURCE_DIR
                        "/packaging/completion/polyhal.bash; COMP_WORDS=(" POLYHAL_LAUNCHER
                        " vali); COMP_CWORD=1; _polyhal; echo \"${COMPREPLY[*]}\"'");
  EXPECT_EQ(r.output, "validate\n");
}

TEST(LauncherConfig, ShowGivesEveryKeyOfTheTaskWithItsValueAndOrigin) {
  test::TempDir dir;
  const auto file =
      dir.write("p.yaml",
                "backend: cpu\ntask: pretrain\nmodel: {preset: tiny}\nbatch:\n  micro: 4\n")
          .string();
  auto r = run_polyhal("config show " + file + " --set model.seq_len=32");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto line_of = [&](const std::string& key) {
    const auto at = r.output.find("\n" + key + ":");
    return at == std::string::npos ? std::string()
                                   : r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line_of("batch.micro").find("4"), std::string::npos) << r.output;
  EXPECT_NE(line_of("batch.micro").find("# " + file + ":5"), std::string::npos) << r.output;
  EXPECT_NE(line_of("model.seq_len").find("# --set model.seq_len=32"), std::string::npos);
  EXPECT_NE(line_of("optimizer.name").find("lamb"), std::string::npos) << r.output;
  EXPECT_NE(line_of("optimizer.name").find("# default"), std::string::npos) << r.output;
  EXPECT_EQ(line_of("inference.iterations"), "") << "an inference key in a pretrain config";
  // A bad file gives validate's error, file:line and key.
  const auto bad = dir.write("bad.yaml", "backend: cpu\ntask: pretrain\nbatch:\n  mikro: 4\n");
  r = run_polyhal("config show " + bad.string());
  const auto v = run_polyhal("validate " + bad.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(bad.string() + ":4: key 'batch.mikro': unknown key (did you mean "
                                         "'batch.micro'?)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output, v.output);
}

TEST(LauncherConfig, ShowListsEveryDeviceOptionOfTheBackendCheckedAsValidateChecksIt) {
  test::TempDir dir;
  const auto file =
      dir.write("g.yaml",
                "backend: gaudi\ntask: inference\nmodel: {preset: tiny}\ndevice:\n  cards: 2\n")
          .string();
  auto r = run_polyhal("config show " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto line_of = [&](const std::string& key) {
    const auto at = r.output.find("\n" + key + ":");
    return at == std::string::npos ? std::string()
                                   : r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line_of("device.cards").find("# " + file + ":5"), std::string::npos) << r.output;
  // Options the config leaves out, with the backend's defaults.
  EXPECT_NE(line_of("device.generation").find("gaudi2"), std::string::npos) << r.output;
  EXPECT_NE(line_of("device.generation").find("# default of backend gaudi"), std::string::npos);
  EXPECT_NE(line_of("device.mode").find("model"), std::string::npos) << r.output;
  // A value the plugin refuses (its own range check) and an unknown option:
  // validate's error, word for word, and its exit code.
  for (const std::string set : {"device.cards=9", "device.cardz=2", "device.generation=gaudi9"}) {
    r = run_polyhal("config show " + file + " --set " + set);
    const auto v = run_polyhal("validate " + file + " --set " + set);
    EXPECT_EQ(r.exit_code, 2) << set << ": " << r.output;
    EXPECT_NE(r.output.find("--set " + set + ": key 'device."), std::string::npos) << r.output;
    EXPECT_EQ(r.output, v.output) << set;
  }
  // A backend that is not installed still shows the config, with a warning.
  r = run_polyhal("config show " + file + " --backend nope");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("backend 'nope' is not available"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("device.cards:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("device.generation:"), std::string::npos) << r.output;
}

TEST(LauncherConfig, TheReferenceInDocsIsTheOneTheReaderUses) {
  const auto r = run_polyhal("config reference");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(std::string(POLYHAL_SOURCE_DIR) + "/docs/config-reference.md");
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), r.output)
      << "docs/config-reference.md is out of date: polyhal config reference > "
         "docs/config-reference.md";
  // Every key the reader accepts has a line that says what it does.
  for (const auto* key : config_keys(task_schemas())) EXPECT_GT(key->help.size(), 10u) << key->path;
}

TEST(LauncherCli, TheConfigMayBeTheFirstArgument) {
  test::TempDir dir;
  const auto file = config_file(dir, "cpu");
  auto r = run_polyhal("run " + file);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_polyhal("validate " + file + " --set matmul_bench.iterations=3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(file + ": ok"), std::string::npos) << r.output;
  r = run_polyhal("run " + file + " " + file);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("'run' takes one config"), std::string::npos) << r.output;
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
  EXPECT_NE(r.output.find("missing.yaml: cannot read the config file: no such file in " +
                          dir.path().string()),
            std::string::npos)
      << r.output;
  r = run_polyhal("run " + dir.path().string() + "/nodir/missing.yaml");
  EXPECT_NE(
      r.output.find("no such file: the directory " + dir.path().string() + "/nodir does not exist"),
      std::string::npos)
      << r.output;
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

// validate runs the task's plan-time checks on the opened device: an op the
// device lacks is named with what it has, before anything is allocated, and
// a good config reports whether it fits.
TEST(Launcher, ValidatePlansTheTaskOnTheDevice) {
  const std::string config = std::string(POLYHAL_SOURCE_DIR) + "/configs/";
  auto r = run_polyhal("validate --config " + config +
                       "inference-bert-base-seq128-ipu.yaml --set model.precision=bf16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'model.precision': ipu0 does not compute in bf16; set "
                          "model.precision: mixed"),
            std::string::npos)
      << r.output;
  r = run_polyhal("validate --config " + config + "pretrain-bert-large-phase1-ipu.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("task pretrain; 868.5 MiB of 897.0 MiB on ipu0: fits"), std::string::npos)
      << r.output;
}

TEST(Launcher, MissingBackendExitsThree) {
  test::TempDir dir;
  auto r = run_polyhal("run --config " + config_file(dir, "myaccel"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("backend 'myaccel' is not available"), std::string::npos) << r.output;
  // No package provides it: say which backends polyhal's packages do.
  EXPECT_EQ(r.output.find("polyhal-plugin-myaccel"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("polyhal's packages provide the backends cpu, ipu and gaudi"),
            std::string::npos)
      << r.output;
  r = run_polyhal("run --config " + config_file(dir, "tpu"));
  EXPECT_NE(r.output.find("(did you mean 'cpu'?)"), std::string::npos) << r.output;
  // A backend that is installed, mistyped or in capitals: did you mean.
  r = run_polyhal("run --config " + config_file(dir, "cpu") + " --backend CPU");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("(did you mean 'cpu'? backend names are lower case)"), std::string::npos)
      << r.output;
  r = run_polyhal("run --config " + config_file(dir, "cpu") + " --backend gaudy");
  EXPECT_NE(r.output.find("(did you mean 'gaudi'?)"), std::string::npos) << r.output;
  // A shipped backend that is not installed names its package.
  // (Even beside a loaded cpu, one letter away: the package, not "did you mean 'cpu'".)
  PluginCandidate cpu;
  cpu.name = "cpu";
  cpu.status = PluginCandidate::Status::loaded;
  const std::string ipu = detail::backend_unavailable_message("ipu", {cpu});
  EXPECT_NE(ipu.find("(install package polyhal-plugin-ipu, or pass --plugin-path)"),
            std::string::npos)
      << ipu;
  EXPECT_EQ(ipu.find("did you mean"), std::string::npos) << ipu;
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
  EXPECT_NE(
      r.output.find("key 'matmul_bench.dtype': ipu0 does not compute in bf16; it has f16, f32"),
      std::string::npos)
      << r.output;
}

TEST(Launcher, RunWritesMetricsEndingInSummary) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  for (const std::string backend : {"cpu", "gaudi"}) {
    // f32 on the CPU: every x86-64 CPU computes it (bf16 needs AVX-512).
    const char* dtype = backend == "cpu" ? "  dtype: f32\n" : "  dtype: bf16\n";
    auto r = run_polyhal("run --config " + config_file(dir, backend, dtype) + " --metrics-out " +
                         metrics.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto summary = test::last_json_line(metrics);
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
  EXPECT_NE(r.output.find("split the model over more IPUs (model.pipeline: more stages)"),
            std::string::npos)
      << r.output;
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
  for (const char* reason : {"reason: plugin ABI 9.0, host accepts 8.0-8.0",
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
      {"wrongabi", "plugin ABI 9.0, host accepts 8.0-8.0"},
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

/// A plugin directory whose plugins' own code crashes or throws while
/// loading, and a truncated copy of a real plugin.
struct HostilePluginDir {
  test::TempDir dir;
  HostilePluginDir() {
    namespace fs = std::filesystem;
    for (const char* name : {"crash", "throw"}) {
      const std::string file = std::string("libpolyhal_plugin_") + name + ".so";
      fs::copy_file(fs::path(POLYHAL_FIXTURE_DIR) / file, dir.path() / file);
    }
    // The ELF headers intact, the segments cut: the dynamic loader maps
    // past the end of the file and gets SIGBUS, as a half-copied .so does.
    const auto cut = dir.path() / "libpolyhal_plugin_truncated.so";
    fs::copy_file(test::built_plugin("gaudi"), cut);
    fs::resize_file(cut, 20000);
  }
  std::string flag() const { return "--plugin-path " + dir.path().string(); }
};

TEST(LauncherPlugins, CrashingPluginsAreProbedInAChildAndEveryOtherBackendWorks) {
  HostilePluginDir hostile;
  auto r = run_polyhal("plugins " + hostile.flag());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("crashed   " + hostile.dir.path().string() +
                          "/libpolyhal_plugin_crash.so\n           reason: crashed while "
                          "loading: signal 11 (SIGSEGV)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("reason: creating the backend threw an exception of unknown type"),
            std::string::npos)
      << r.output;
  // However the dynamic loader takes the truncated file (SIGBUS here), it
  // is refused or reported as crashed in one line, and the launcher lives on.
  EXPECT_NE(r.output.find("libpolyhal_plugin_truncated.so\n           reason: "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("backends: cpu, gaudi, ipu\n"), std::string::npos) << r.output;

  r = run_polyhal("devices " + hostile.flag());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* device : {"[cpu]", "[ipu]", "[gaudi]"})
    EXPECT_NE(r.output.find(device), std::string::npos) << device << "\n" << r.output;
  EXPECT_NE(r.output.find("libpolyhal_plugin_crash.so crashed: crashed while loading: signal 11"),
            std::string::npos)
      << r.output;

  test::TempDir dir;
  r = run_polyhal("run " + hostile.flag() + " --config " + config_file(dir, "cpu"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("crash"), std::string::npos) << "an unselected plugin was touched:\n"
                                                       << r.output;
}

TEST(LauncherPlugins, SelectingACrashingPluginExitsThreeNamingTheSignal) {
  HostilePluginDir hostile;
  test::TempDir dir;
  for (const std::string command : {"run", "validate"}) {
    auto r = run_polyhal(command + " " + hostile.flag() + " --config " + config_file(dir, "crash"));
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_NE(r.output.find("backend 'crash' is not available: its plugin " +
                            hostile.dir.path().string() +
                            "/libpolyhal_plugin_crash.so: crashed while loading: signal 11"),
              std::string::npos)
        << r.output;
  }
  auto r = run_polyhal("devices --backend crash " + hostile.flag());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("crashed while loading: signal 11 (SIGSEGV)"), std::string::npos)
      << r.output;
  r = run_polyhal("run " + hostile.flag() + " --config " + config_file(dir, "throw"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("exception of unknown type"), std::string::npos) << r.output;
}

TEST(LauncherPlugins, AConfigCannotAllowWorldWritablePlugins) {
  test::TempDir dir;
  const auto file = config_file(dir, "cpu", "allow_world_writable_plugins: true\n");
  auto r = run_polyhal("validate --config " + file);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(file + ":6: key 'allow_world_writable_plugins': is accepted only on the "
                                 "command line"),
            std::string::npos)
      << r.output;
}

TEST(LauncherPlugins, ARelativeEnvironmentEntryIsShownAsRefused) {
  auto r =
      test::run_command("POLYHAL_PLUGIN_PATH=relative/plugins " POLYHAL_LAUNCHER " plugins 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("relative/plugins (POLYHAL_PLUGIN_PATH) [relative entry "
                          "'relative/plugins' refused: it would depend on the current directory"),
            std::string::npos)
      << r.output;
}

TEST(Launcher, RelativePathsAreRelativeToTheCurrentDirectoryNotTheConfig) {
  test::TempDir config_dir, work_dir;
  const auto config = config_dir.write(
      "c.yaml",
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny, seq_len: 16}\nbatch: {micro: 2}\n"
      "steps: 2\ncheckpoint: {dir: ckpt, every: 1}\n");
  const std::string cd = "cd '" + work_dir.path().string() + "' && " POLYHAL_LAUNCHER " ";
  auto r = test::run_command(cd + "run --config " + config.string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(work_dir.path() / "ckpt")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(config_dir.path() / "ckpt"));
  // Input paths follow the same rule, and messages name the absolute path.
  r = test::run_command(cd + "validate --config " + config.string() +
                        " --set data.source=mlperf_hdf5 --set data.files=missing.hdf5 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((work_dir.path() / "missing.hdf5").string()), std::string::npos)
      << r.output;
}

TEST(Launcher, BadLogLevelIsAUsageError) {
  auto r = run_polyhal("--log-level chatty plugins");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(
                "--log-level: unknown level 'chatty'; use trace, debug, info, warn, error or off"),
            std::string::npos)
      << r.output;
}

// Issue 35, item 1: the command line beats the config, quieter as well as
// louder (the config's log.level is info by default).
TEST(Launcher, LogLevelOnTheCommandLineBeatsTheConfig) {
  test::TempDir dir;
  const auto file = config_file(dir, "cpu");
  auto r = run_polyhal("run " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[info]"), std::string::npos) << r.output;
  r = run_polyhal("--log-level error run " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("[info]"), std::string::npos) << r.output;
  r = run_polyhal("run " + file + " --log-level warn --set log.level=debug");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("[info]"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[debug]"), std::string::npos) << r.output;
  r = run_polyhal("run " + file + " --set log.level=warn");  // the config alone still works
  EXPECT_EQ(r.output.find("[info]"), std::string::npos) << r.output;
}

TEST(Launcher, CpuIsaCapIsAppliedAndReported) {
  auto r = run_polyhal("devices --backend cpu --set device.isa=avx2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("onednn isa  avx2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("capped at avx2 by device.isa"), std::string::npos) << r.output;
  // Each precision, native or not and why, in one block (docs/bert.md, "CPU tiers").
  EXPECT_NE(r.output.find("  model.precision on this device:\n    f32   native    AVX2 FMA\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("    bf16  no        oneDNN 2.6 computes bf16 only with AVX-512"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("    int8  native    AVX2: vpmaddubsw with seven-bit weights"),
            std::string::npos)
      << r.output;
  r = run_polyhal("devices --backend cpu --set device.isa=amx");
  if (r.exit_code == 0) GTEST_SKIP() << "this CPU has AMX";
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("amx is not usable on this CPU"), std::string::npos) << r.output;
  r = run_polyhal("devices --set device.isa=avx2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

std::string bert_config(const test::TempDir& dir, const std::string& backend,
                        const std::string& extra = "") {
  return dir
      .write("bert.yaml",
             "backend: " + backend +
                 "\ntask: inference\nmodel:\n  preset: tiny\n  seq_len: 16\nbatch:\n  micro: 2\n"
                 "inference:\n  iterations: 3\n  warmup: 1\n" +
                 extra)
      .string();
}

TEST(LauncherInference, CpuRunReportsMeasuredThroughputAndLatency) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  auto r =
      run_polyhal("run --config " + bert_config(dir, "cpu") + " --metrics-out " + metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("measured: "), std::string::npos) << r.output;
  std::ifstream in(metrics);
  std::string line;
  std::getline(in, line);
  const auto summary = nlohmann::json::parse(line);
  EXPECT_EQ(summary["model"], "bert-tiny");
  EXPECT_EQ(summary["seq_len"], 16);
  EXPECT_EQ(summary["global_batch"], 2);
  EXPECT_GT(summary["sequences_per_second"].get<double>(), 0.0);
  EXPECT_LE(summary["latency_p50_ms"].get<double>(), summary["latency_p99_ms"].get<double>());
}

TEST(LauncherInference, RunsForADurationAndReportsTheLatencySpread) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  auto r = run_polyhal("run --config " + bert_config(dir, "cpu") + " --metrics-out " +
                       metrics.string() + " --set inference.duration_seconds=1.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("latency per batch (ms): min "), std::string::npos) << r.output;
  const auto summary = test::last_json_line(metrics);
  EXPECT_GE(summary["duration_seconds"].get<double>(), 1.5);
  EXPECT_LT(summary["duration_seconds"].get<double>(), 60.0);
  // The config says 3 iterations; the duration wins (a BERT-tiny batch of 2
  // takes about a millisecond, so even a loaded machine runs many more).
  EXPECT_GT(summary["batches"].get<int>(), 3) << r.output;
  const auto ms = [&](const char* name) {
    return summary[std::string("latency_") + name + "_ms"].get<double>();
  };
  EXPECT_LE(ms("min"), ms("median"));
  EXPECT_LE(ms("median"), ms("p90"));
  EXPECT_LE(ms("p90"), ms("p99"));
  EXPECT_LE(ms("p99"), ms("max"));
  EXPECT_GE(ms("avg"), ms("min"));
  EXPECT_LE(ms("avg"), ms("max"));
  r = run_polyhal("validate --config " + bert_config(dir, "cpu") +
                  " --set inference.duration_seconds=-1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("key 'inference.duration_seconds': expected a positive number"),
            std::string::npos)
      << r.output;
}

TEST(LauncherInference, DeviceModelsReportOnlyEstimates) {
  test::TempDir dir;
  const auto metrics = dir.path() / "m.jsonl";
  auto r = run_polyhal("run --config " + bert_config(dir, "ipu", "  \n") +
                       " --set model.precision=f16 --metrics-out " + metrics.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(metrics);
  std::string line;
  std::getline(in, line);
  const auto summary = nlohmann::json::parse(line);
  EXPECT_TRUE(summary["sequences_per_second"].is_null()) << "a model must not claim measured speed";
  EXPECT_GT(summary["estimated_sequences_per_second"].get<double>(), 0.0);
  EXPECT_NE(r.output.find("estimated (device model, not measured)"), std::string::npos);
}

TEST(LauncherInference, CompileOnlyOfBertLargeOnIpuDoesNotFitAndSaysWhy) {
  test::TempDir dir;
  auto r = run_polyhal("run --compile-only --config " + bert_config(dir, "ipu") +
                       " --set model.preset=large --set model.precision=f16 --set "
                       "model.seq_len=512 --set batch.micro=16");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("DOES NOT FIT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("split the model over more IPUs (model.pipeline: more stages)"),
            std::string::npos)
      << r.output;
}

TEST(LauncherInference, TextInputWritesPooledOutputsAndMaskPredictions) {
  test::TempDir dir;
  dir.write("vocab.txt",
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nis\nrunning\nhello\nhow\nare\nyou\n?\nun\n##"
            "want\n##ed\n");
  const auto out = dir.path() / "out.jsonl";
  auto r = run_polyhal(
      "run --config " +
      bert_config(dir, "cpu",
                  "model:\n  preset: tiny\n  seq_len: 16\n  heads: true\n  vocab_size: 16\n") +
      " --set data.source=text --set data.text_file=" + POLYHAL_SOURCE_DIR +
      "/tests/data/text_examples.txt --set data.vocab=vocab.txt --set inference.output=" +
      out.string());
  // The duplicate 'model' key above must be refused, not silently merged.
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'model': given twice (first at line 3)"), std::string::npos)
      << r.output;
  const auto file = dir.write(
      "text.yaml",
      "backend: cpu\ntask: inference\nmodel: {preset: tiny, seq_len: 16, heads: true, "
      "vocab_size: 16}\nbatch: {micro: 4}\ndata: {source: text, text_file: " +
          std::string(POLYHAL_SOURCE_DIR) +
          "/tests/data/text_examples.txt, vocab: vocab.txt}\ninference: {output: " + out.string() +
          "}\n");
  r = run_polyhal("run --config " + file.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["tokens"][0], "[CLS]");
  EXPECT_EQ(lines[0]["pooled"].size(), 128u);
  EXPECT_EQ(lines[1]["masked_predictions"].size(), 1u);
  EXPECT_EQ(lines[1]["masked_predictions"][0]["position"], 2);
  EXPECT_EQ(lines[1]["masked_predictions"][0]["top"].size(), 5u);
  EXPECT_EQ(lines[1]["nsp_logits"].size(), 2u);

  // Every line is an example, an empty one too: index i is line i + 1.
  dir.write("lines.txt", "hello\n\nhow are you\r\n");
  r = run_polyhal("run --config " + file.string() +
                  " --set data.text_file=" + (dir.path() / "lines.txt").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream again(out);
  lines.clear();
  for (std::string line; std::getline(again, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["index"], 1);
  EXPECT_EQ(lines[1]["line"], 2);
  EXPECT_EQ(lines[1]["tokens"][1], "[SEP]");
  EXPECT_EQ(lines[2]["tokens"][3], "you");
  EXPECT_EQ(lines[2]["tokens"][4], "[SEP]");  // no token from the carriage return
  // data.special_tokens: split reads "[MASK]" as the reference does.
  r = run_polyhal("run --config " + file.string() + " --set data.special_tokens=split");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream split(out);
  lines.clear();
  for (std::string line; std::getline(split, line);) lines.push_back(nlohmann::json::parse(line));
  EXPECT_EQ(lines.at(1)["masked_predictions"].size(), 0u);
  EXPECT_EQ(lines.at(1)["tokens"][2], "[UNK]");  // "[" is not in this vocabulary
}

// Numbers that would overflow, wrap or hang what is computed from them are
// refused up front, naming the key (issue: hardening).
TEST(LauncherInference, OutOfRangeNumbersAreRefusedNamingTheKey) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"model.hidden_size=2305843009213693952", "expected an integer <= 1099511627776"},
      {"model.hidden_size=131072", "key 'hidden_size': expected a positive integer up to 65536"},
      {"model.vocab_size=4611686018427387904", "expected an integer <= 1099511627776"},
      {"model.num_hidden_layers=1000000000",
       "key 'num_hidden_layers': expected a positive integer up to 1024"},
      {"inference.iterations=4294967296",
       "key 'inference.iterations': expected an integer <= "
       "1000000000"},
      {"device.threads=99999999999", "key 'device.threads': expected an integer from"},
      {"device.threads=5000", "key 'device.threads': expected 0 (every core) to 4096"},
      {"collective.timeout_seconds=1e10",
       "key 'collective.timeout_seconds': expected a positive "
       "number of seconds up to 1e+06"},
  };
  for (const auto& [set, message] : cases) {
    const auto r =
        run_polyhal("run --compile-only --config " + bert_config(dir, "cpu") + " --set " + set);
    EXPECT_EQ(r.exit_code, 2) << set << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << set << "\n" << r.output;
  }
  const auto r = run_polyhal("run --compile-only --config " + bert_config(dir, "ipu") +
                             " --set device.available_memory_proportion=nan");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("key 'device.available_memory_proportion': expected a finite number, "
                          "got \"nan\""),
            std::string::npos)
      << r.output;
}

// A full disk or a missing directory stops the run with the path and the
// reason, never a silently truncated file and exit 0.
TEST(LauncherInference, OutputThatCannotBeWrittenIsAnError) {
  test::TempDir dir;
  auto r = run_polyhal("run --config " + bert_config(dir, "cpu") + " --metrics-out /dev/full");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--metrics-out /dev/full: write failed: No space left on device"),
            std::string::npos)
      << r.output;
  dir.write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  dir.write("text.txt", "hello\n");
  const auto missing = dir.path() / "no/such/dir/out.jsonl";
  r = run_polyhal("run --config " + bert_config(dir, "cpu") +
                  " --set data.source=text --set data.text_file=text.txt --set data.vocab=vocab.txt"
                  " --set model.vocab_size=16 --set inference.output=" +
                  missing.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(missing.string() + ": cannot create a file beside it: No such file or "
                                             "directory"),
            std::string::npos)
      << r.output;
  // Written whole, with no temporary file left beside it.
  const auto out = dir.path() / "out.jsonl";
  r = run_polyhal("run --config " + bert_config(dir, "cpu") +
                  " --set data.source=text --set data.text_file=text.txt --set data.vocab=vocab.txt"
                  " --set model.vocab_size=16 --set inference.output=" +
                  out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(LauncherInference, BadModelSettingsAreConfigErrors) {
  test::TempDir dir;
  auto r = run_polyhal("run --config " + bert_config(dir, "cpu") + " --set model.preset=gigantic");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("key 'model.preset': unknown preset \"gigantic\""), std::string::npos)
      << r.output;
  r = run_polyhal("run --config " + bert_config(dir, "cpu") + " --set model.seq_len=1000");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--set model.seq_len=1000: key 'model.seq_len': 1000 tokens, but the "
                          "model has 512 position embeddings (max_position_embeddings of preset "
                          "tiny)"),
            std::string::npos)
      << r.output;
  r = run_polyhal("run --config " + bert_config(dir, "cpu") +
                  " --set model.weights=missing.safetensors");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("key 'model.weights': " + (dir.path() / "missing.safetensors").string() +
                          ": no such file or directory"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

TEST(LauncherInference, SavedModelDirectoryLoadsBack) {
  test::TempDir dir;
  const auto config = dir.write(
      "bert.yaml",
      "backend: cpu\ntask: inference\nmodel: {preset: tiny, seq_len: 8, heads: true, seed: 5}\n"
      "batch: {micro: 1}\ninference: {iterations: 1, warmup: 0}\n");
  const auto saved = dir.path() / "saved";
  auto r = run_polyhal("run --config " + config.string() + " --set model.save=" + saved.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(saved / "config.json"));
  ASSERT_TRUE(std::filesystem::exists(saved / "model.safetensors"));
  r = run_polyhal("run --config " + config.string() +
                  " --set model.hf_config=" + (saved / "config.json").string() +
                  " --set model.weights=" + (saved / "model.safetensors").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BERT custom (L2 H128 A2)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace polyhal

namespace polyhal {
namespace {

// A device model's system must hold the replicas, one device each, in
// validate as in run.
TEST(Launcher, ReplicasBeyondTheModelledSystemAreRefused) {
  const std::string config =
      std::string(POLYHAL_SOURCE_DIR) + "/configs/pretrain-bert-base-phase1-ipu.yaml";
  for (const std::string command : {"validate", "run --compile-only"}) {
    auto r = test::run_polyhal(command + " --config " + config +
                               " --set device.system=POD4 --set batch.replicas=256");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("key 'batch.replicas': 256 replicas x 4 pipeline stages need 1024 "
                            "devices, but the modelled ipu has 4"),
              std::string::npos)
        << r.output;
  }
  auto r = test::run_polyhal(
      "validate --config " + std::string(POLYHAL_SOURCE_DIR) +
      "/configs/pretrain-bert-base-phase1-gaudi.yaml --set device.cards=2 --set batch.replicas=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("3 replicas x 1 pipeline stage need 3 devices, but the modelled gaudi "
                          "has 2"),
            std::string::npos)
      << r.output;
  r = test::run_polyhal("validate --config " + config + " --set batch.replicas=4");
  EXPECT_EQ(r.exit_code, 0) << r.output;  // POD16 holds 4 x 4
  r = test::run_polyhal("validate --config " + config +
                        " --set batch.replicas=8 --set model.pipeline=4");
  EXPECT_EQ(r.exit_code, 2) << r.output;  // 8 x 4 stages on 16 IPUs
  EXPECT_NE(r.output.find("8 replicas x 4 pipeline stages need 32 devices"), std::string::npos)
      << r.output;
}

// Every shipped config passes validate: it parses, its device options are
// known and its program plans on the backend.
/// `validate` and `run` give the same exit code and message for `config`.
void expect_validate_as_run(const std::string& arguments, int code, const std::string& message) {
  for (const std::string command : {"validate", "run"}) {
    const auto r = test::run_polyhal(command + " " + arguments);
    EXPECT_EQ(r.exit_code, code) << command << " " << arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << command << "\n" << r.output;
  }
}

TEST(LauncherValidate, RunsEveryCheckRunDoesWithTheSameExitCodes) {
  test::TempDir dir;
  const std::string configs = std::string(POLYHAL_SOURCE_DIR) + "/configs/";
  // A device option only the plugin checks, named where it came from.
  expect_validate_as_run(
      "--config " + configs + "inference-bert-base-seq128-gaudi.yaml" + " --set device.cards=99", 2,
      "--set device.cards=99: key 'device.cards': a server has 1 to 8");
  const auto gaudi = dir.write("gaudi.yaml",
                               "backend: gaudi\ndevice:\n  cards: 0\ntask: matmul-bench\n"
                               "matmul_bench:\n  shapes: [[16, 8, 4]]\n");
  expect_validate_as_run("--config " + gaudi.string(), 2,
                         gaudi.string() + ":3: key 'device.cards': a server has 1 to 8");
  // What inference instances under mpirun cannot do: write one output.
  expect_validate_as_run("--config " + configs +
                             "inference-bert-base-seq128-cpu.yaml --set collective=mpi "
                             "--set model.save=/tmp/polyhal-never-written",
                         2, "key 'model.save': not with collective: mpi");
  // A precision the device does not compute in.
  expect_validate_as_run(
      "--config " + configs + "pretrain-demo-cpu.yaml --backend ipu --set model.precision=bf16", 2,
      "key 'model.precision': ");
  // An output file whose directory cannot exist.
  dir.write("plain-file", "x");
  expect_validate_as_run("--config " + configs + "bert-demo-cpu.yaml --set inference.output=" +
                             (dir.path() / "plain-file" / "out.jsonl").string(),
                         2, "key 'inference.output': ");
}

TEST(LauncherValidate, AKeyOnlyASetGaveIsBlamedOnThatSet) {
  const std::string config =
      std::string(POLYHAL_SOURCE_DIR) + "/configs/inference-bert-base-seq128-cpu.yaml";
  const auto r = test::run_polyhal("validate --config " + config + " --set checkpoint.dir=x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--set checkpoint.dir=x: key 'checkpoint': not used by task inference"),
            std::string::npos)
      << r.output;
}

TEST(LauncherValidate, APlanThatDoesNotFitIsExitOneAsCompileOnly) {
  const std::string config =
      std::string(POLYHAL_SOURCE_DIR) + "/configs/inference-bert-large-seq128-ipu.yaml";
  auto r = test::run_polyhal("validate --config " + config + " --set batch.micro=4096");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(": DOES NOT FIT (backend ipu"), std::string::npos) << r.output;
  r = test::run_polyhal("run --compile-only --config " + config + " --set batch.micro=4096");
  EXPECT_EQ(r.exit_code, 1) << r.output;
}

TEST(Launcher, EveryShippedConfigValidates) {
  const std::filesystem::path configs = std::filesystem::path(POLYHAL_SOURCE_DIR) / "configs";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs)) {
    if (entry.path().extension() != ".yaml") continue;
    // They name data and checkpoints of the machines they are for.
    const auto r = test::run_polyhal("validate --skip-inputs --config " + entry.path().string());
    ++checked;
    // The CPU configs of BERT-Large are sized for bf16 (as Intel's recipes
    // run): where the CPU has none, mixed is f32, twice the activations, and
    // this machine's memory may not hold them. That is the host, not the config.
    if (r.exit_code == 1 && r.output.find("DOES NOT FIT (backend cpu") != std::string::npos &&
        test::cpu_without_bf16()) {
      std::cout << entry.path().filename().string() << ": does not fit this host in f32\n";
      continue;
    }
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.output;
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace polyhal
