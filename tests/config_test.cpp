// Config errors name file, line and key; overrides say where they came from.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "polyhal/app/config.hpp"
#include "polyhal/app/matmul_bench.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

const char* kGood = R"(backend: cpu
task: matmul-bench
matmul_bench:
  shapes: [[8, 4, 2]]
  dtype: bf16
  iterations: 3
)";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  test::TempDir dir;
  const auto file = dir.write("c.yaml", yaml);
  try {
    load_task_config(file, overrides);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.exit_code(), ExitCode::bad_input);
    // Strip the temporary directory so assertions read plainly.
    std::string text = e.what();
    const std::string prefix = dir.path().string() + "/";
    if (text.starts_with(prefix)) text = text.substr(prefix.size());
    return text;
  }
  return "no error";
}

// A task brings its schema: the reader accepts any task it is given, reads
// the sections that task declares and refuses the others and missing
// required ones, naming file, line and key.
TEST(Config, TasksComeWithTheirSchema) {
  test::TempDir dir;
  // The built-in tasks too: `steps` is a section of theirs (pretrain's).
  const TaskSchema echo{"echo", {"model", "data"}, {"model"}};
  std::vector<TaskSchema> tasks = task_schemas();
  tasks.push_back(echo);
  const auto config = load_run_config(
      dir.write("c.yaml", "backend: cpu\ntask: echo\nmodel: {preset: tiny}\n"), {}, tasks);
  EXPECT_EQ(config.task, "echo");
  EXPECT_EQ(config.model.preset, "tiny");
  try {
    load_run_config(dir.write("d.yaml", "backend: cpu\ntask: echo\nmodel: {}\nsteps: 3\n"), {},
                    tasks);
    FAIL() << "a section the task does not read was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("d.yaml:4: key 'steps': not used by task echo"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_run_config(dir.write("e.yaml", "backend: cpu\ntask: echo\n"), {}, tasks),
               ConfigError);
  EXPECT_THROW(load_run_config(dir.write("f.yaml", kGood), {}, {echo}), ConfigError);
}

// A key declared for a trait is refused, naming the tasks that have it, by
// another task; a new task that declares the trait takes the keys.
TEST(Config, KeysOfOtherTasksAreNamedAndCanBeShared) {
  test::TempDir dir;
  std::vector<TaskSchema> tasks = task_schemas();
  tasks.push_back({"echo", {"model", "optimizer"}, {}});
  TaskSchema trainer{"my-trainer", {"model", "optimizer"}, {}};
  trainer.traits = {TaskTrait::trains};
  tasks.push_back(trainer);
  const std::string body = "backend: cpu\nmodel: {recompute: all}\noptimizer: {name: sgd}\n";
  try {
    load_run_config(dir.write("a.yaml", "task: echo\n" + body), {}, tasks);
    FAIL() << "a key of the training tasks was accepted by echo";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "a.yaml:3: key 'model.recompute': used by tasks pretrain, squad, glue, "
                  "my-trainer only, not echo"),
              std::string::npos)
        << e.what();
  }
  const auto config = load_run_config(dir.write("b.yaml", "task: my-trainer\n" + body), {}, tasks);
  EXPECT_EQ(config.model.recompute, "all");
  EXPECT_EQ(config.optimizer.name, "sgd");
}

// A second YAML document ("---") was silently ignored: now refused at its line.
TEST(Config, ASecondYamlDocumentIsRefused) {
  test::TempDir dir;
  try {
    load_task_config(dir.write("two.yaml", std::string(kGood) + "---\nbackend: ipu\n"));
    FAIL() << "a second document was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("two.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(": a second YAML document: a config is one document"),
              std::string::npos)
        << e.what();
  }
}

TEST(Config, ReadsAValidFile) {
  test::TempDir dir;
  const auto config = load_task_config(dir.write("c.yaml", kGood));
  EXPECT_EQ(config.backend, "cpu");
  ASSERT_EQ(config.section<MatmulBenchConfig>().shapes.size(), 1u);
  EXPECT_EQ(config.section<MatmulBenchConfig>().shapes[0][0], 8);
  EXPECT_EQ(config.section<MatmulBenchConfig>().dtype, DType::bf16);
  EXPECT_EQ(config.section<MatmulBenchConfig>().iterations, 3);
}

TEST(Config, UnknownKeyNamesLineAndSuggests) {
  EXPECT_EQ(error_of(std::string(kGood) + "  iteratons: 4\n"),
            "c.yaml:7: key 'matmul_bench.iteratons': unknown key (did you mean "
            "'matmul_bench.iterations'?)");
  EXPECT_EQ(error_of(std::string(kGood) + "colour: blue\n"), "c.yaml:7: key 'colour': unknown key");
}

TEST(Config, BadValueNamesLineAndKey) {
  std::string yaml = kGood;
  yaml.replace(yaml.find("iterations: 3"), 13, "iterations: eight");
  EXPECT_EQ(error_of(yaml),
            "c.yaml:6: key 'matmul_bench.iterations': expected a positive integer, got \"eight\"");
  yaml = kGood;
  yaml.replace(yaml.find("dtype: bf16"), 11, "dtype: fp8");
  EXPECT_EQ(error_of(yaml),
            "c.yaml:5: key 'matmul_bench.dtype': expected one of f32, f16, bf16, got \"fp8\"");
}

TEST(Config, FirstMomentIsF32OrF16) {
  const std::string pretrain =
      "backend: cpu\ntask: pretrain\nmodel: {preset: tiny}\noptimizer:\n  first_moment: ";
  EXPECT_EQ(error_of(pretrain + "bf16\n"),
            "c.yaml:5: key 'optimizer.first_moment': expected f32 or f16 (the second moment is "
            "always f32), got \"bf16\"");
  test::TempDir dir;
  EXPECT_EQ(load_task_config(dir.write("f16.yaml", pretrain + "f16\n"), {}).optimizer.first_moment,
            DType::f16);
}

TEST(Config, SpecialTokensAreSplitOrKept) {
  const std::string inference =
      "backend: cpu\ntask: inference\nmodel: {preset: tiny}\ndata:\n  special_tokens: ";
  EXPECT_EQ(error_of(inference + "whole\n"),
            "c.yaml:5: key 'data.special_tokens': expected split (BERT's reference) or keep "
            "(Hugging Face), got \"whole\"");
  test::TempDir dir;
  EXPECT_EQ(load_task_config(dir.write("keep.yaml", inference + "keep\n"), {}).data.special_tokens,
            SpecialTokensInText::keep);
  EXPECT_FALSE(load_task_config(dir.write("unset.yaml", kGood), {}).data.special_tokens);
}

// A 1 KB file of nested aliases would expand to billions of keys: refused
// quickly, as are deep nesting and oversized files.
TEST(Config, AliasBombsDeepNestingAndHugeFilesAreRefused) {
  std::string bomb = "backend: cpu\ntask: inference\na0: &a0 {k: 1, l: 1}\n";
  for (int i = 1; i < 40; ++i)
    bomb += fmt::format("a{}: &a{} {{k: *a{}, l: *a{}}}\n", i, i, i - 1, i - 1);
  EXPECT_NE(error_of(bomb).find("more than 10000 keys (aliases expanding?)"), std::string::npos)
      << error_of(bomb);
  std::string deep = "backend: cpu\ntask: inference\nd: ";
  for (int i = 0; i < 20; ++i) deep += "{d: ";
  deep += "1" + std::string(20, '}') + "\n";
  EXPECT_NE(error_of(deep).find("nested deeper than 16 levels"), std::string::npos)
      << error_of(deep);
  std::string wide = "backend: cpu\ntask: inference\nw0: &w0 {";
  for (int k = 0; k < 30; ++k) wide += fmt::format("{}k{}: {}", k ? ", " : "", k, k);
  wide += "}\n";
  for (int i = 1; i < 6; ++i) {
    wide += fmt::format("w{}: &w{} {{", i, i);
    for (int k = 0; k < 30; ++k) wide += fmt::format("{}k{}: *w{}", k ? ", " : "", k, i - 1);
    wide += "}\n";
  }
  EXPECT_NE(error_of(wide).find("more than 10000 keys (aliases expanding?)"), std::string::npos)
      << error_of(wide);
  EXPECT_NE(error_of(std::string(2 << 20, '#')).find("bytes: a config is a few KiB"),
            std::string::npos);
}

TEST(Config, MissingRequiredKeyAndUnknownTask) {
  EXPECT_EQ(error_of("task: matmul-bench\n"),
            "c.yaml: key 'backend': required: the backend to run on (cpu, ipu, gaudi)");
  EXPECT_EQ(error_of("backend: cpu\ntask: dance\n"),
            "c.yaml:2: key 'task': unknown task \"dance\"; this version runs: glue, inference, "
            "matmul-bench, pretrain, squad");
}

TEST(Config, YamlSyntaxErrorHasLineAndColumn) {
  const auto text = error_of("backend: cpu\ntask: [unclosed\n");
  EXPECT_TRUE(text.starts_with("c.yaml:3:")) << text;
  EXPECT_NE(text.find("YAML syntax error"), std::string::npos) << text;
}

TEST(Config, OverridesWinAndAreBlamedInErrors) {
  test::TempDir dir;
  const auto file = dir.write("c.yaml", kGood);
  const auto config = load_task_config(file, {"matmul_bench.iterations=9", "device.isa=avx2"});
  EXPECT_EQ(config.section<MatmulBenchConfig>().iterations, 9);
  EXPECT_EQ(config.device.at("isa"), "avx2");
  EXPECT_EQ(error_of(kGood, {"matmul_bench.iterations=zero"}),
            "--set matmul_bench.iterations=zero: key 'matmul_bench.iterations': expected a "
            "positive integer, got \"zero\"");
  EXPECT_EQ(error_of(kGood, {"novalue"}), "--set novalue: expected key.path=value");
  EXPECT_EQ(error_of(kGood, {"matmul_bench.dtype="}),
            "--set matmul_bench.dtype=: key 'matmul_bench.dtype': expected a value, got nothing");
}

TEST(Config, DeviceOptionsCheckedAgainstBackendSpecs) {
  test::TempDir dir;
  const auto file =
      dir.write("c.yaml", std::string(kGood) + "device:\n  isa: fast\n  color: red\n");
  const auto config = load_task_config(file);
  const std::vector<OptionSpec> specs{
      {"isa", OptionSpec::Type::choice, {"auto", "avx2"}, "auto", ""}};
  try {
    config.resolve_device(specs);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    // std::map orders keys: 'color' is checked first.
    EXPECT_NE(
        text.find(":9: key 'device.color': backend 'cpu' has no such device option; it has: isa"),
        std::string::npos)
        << text;
  }
}

}  // namespace
}  // namespace polyhal
