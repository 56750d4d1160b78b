#include "test_support.hpp"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <fstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/app/serve_api.hpp"
#include "polyhal/error.hpp"
#include "polyhal/int8.hpp"

namespace polyhal::test {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "polyhal-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path TempDir::write(const std::string& name, const std::string& text) const {
  const auto file = path_ / name;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

CommandResult run_command(const std::string& command_line) {
  // Relative paths are relative to the current directory: a command naming
  // a config runs where the config is, as a user working in the directory
  // that holds config and data would (unless it says where itself).
  std::string cd;
  const std::string flag = "--config ";
  if (const auto at = command_line.find(flag);
      at != std::string::npos && !command_line.starts_with("cd ")) {
    const auto start = at + flag.size();
    const std::filesystem::path config =
        command_line.substr(start, command_line.find_first_of(" '\"", start) - start);
    if (config.is_absolute()) cd = "cd '" + config.parent_path().string() + "' && ";
  }
  CommandResult result;
  FILE* pipe = ::popen((cd + command_line + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  std::array<char, 4096> chunk{};
  while (std::size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe))
    result.output.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string api_refusal(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.what();
  }
  return "";
}

CommandResult run_polyhal(const std::string& arguments) {
  return run_command(std::string(POLYHAL_LAUNCHER) + " " + arguments);
}

BertConfig small_bert(std::int64_t layers) {
  BertConfig config = bert_preset("tiny");
  config.vocab_size = 64;
  config.num_hidden_layers = layers;
  return config;
}

DataSection pattern_data() {
  DataSection data;
  data.source = "pattern";
  data.max_predictions = 3;
  return data;
}

nlohmann::json last_json_line(const std::filesystem::path& metrics) {
  std::ifstream in(metrics);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

std::vector<nlohmann::json> metric_records(const std::filesystem::path& metrics,
                                           const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record.value("event", "") == event) out.push_back(std::move(record));
  }
  return out;
}

std::vector<nlohmann::json> step_records(const std::filesystem::path& metrics) {
  return metric_records(metrics, "step");
}

std::vector<double> step_losses(const std::filesystem::path& metrics) {
  std::vector<double> out;
  for (const auto& record : step_records(metrics)) out.push_back(record["loss"].get<double>());
  return out;
}

void expect_config_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "accepted; expected an error containing: " << fragment;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

std::string mpirun(int ranks, const std::string& program) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false "
         "mpirun --oversubscribe --bind-to none -np " +
         std::to_string(ranks) + " " + (program.empty() ? std::string(POLYHAL_LAUNCHER) : program);
}

std::filesystem::path built_plugin(const std::string& name) {
  return std::filesystem::path(POLYHAL_BUILD_PLUGIN_DIR) / ("libpolyhal_plugin_" + name + ".so");
}

std::shared_ptr<Backend> load_backend(const std::string& name) {
  return PluginLoader::load_file(built_plugin(name), false, nullptr);
}

std::shared_ptr<Device> first_device(const std::string& name,
                                     const std::map<std::string, std::string>& given) {
  auto backend = load_backend(name);
  return backend->open_devices(resolve_device_options(backend->device_options(), given)).front();
}

std::optional<std::string> cpu_without_bf16() {
  const auto cpu = first_device("cpu");
  if (cpu->supports(DType::bf16)) return std::nullopt;
  return cpu->name() + " (" + cpu->properties().product +
         ") has no AVX-512, and oneDNN no bf16 below it";
}

std::optional<std::string> cpu_without_int8() {
  const auto cpu = first_device("cpu");
  for (const auto& mode : cpu->properties().precisions)
    if (mode.precision == "int8" && mode.support == PrecisionSupport::none)
      return cpu->name() + " refuses int8: " + mode.why;
  return std::nullopt;
}

float cpu_int8_weight_max() {
  const auto cpu = first_device("cpu");
  for (const auto& mode : cpu->properties().precisions)
    if (mode.precision == "int8" && mode.why.find("seven-bit") != std::string::npos)
      return kInt7Max;
  return kInt8Max;
}

std::filesystem::path golden_dir() {
  return std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/golden/bert_tiny";
}

std::vector<std::int32_t> as_ints(const HostTensor& tensor) {
  std::vector<std::int32_t> out;
  for (float v : tensor.values) out.push_back(static_cast<std::int32_t>(v));
  return out;
}

}  // namespace polyhal::test
