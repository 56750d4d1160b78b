#pragma once
/// @file config.hpp
/// Run configuration: a YAML file plus `--set key.path=value` overrides.
///
/// Schema (see docs/config.md):
///   backend: cpu | ipu | gaudi | <any installed plugin>     (required)
///   plugin_paths: [dir, ...]        relative to the config file
///   allow_world_writable_plugins: false
///   device: {<backend option>: value, ...}   checked against the backend's options
///   task: matmul-bench               (required)
///   matmul_bench: {shapes: [[M, N, K], ...], dtype: f32, out_dtype: <dtype>,
///                  iterations: 20, warmup: 2}
///   log: {level: info, file: <path>}
///   model: {preset: base, hf_config: <config.json>, weights: <.safetensors>,
///           save: <dir>, seed: 0, heads: false, seq_len: 128,
///           precision: f32 | bf16 | f16,
///           <any BertConfig dimension to override the preset>}
///   batch: {micro: 8}
///   data: {source: generated | text, text_file: <path>, vocab: <vocab.txt>,
///          lower_case: true, seed: 0}
///   inference: {iterations: 20, warmup: 3, output: <path>}
/// Unknown keys and bad values are ConfigErrors naming file, line and key.
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "polyhal/backend.hpp"
#include "polyhal/dtype.hpp"

namespace polyhal {

struct MatmulBenchConfig {
  std::vector<std::array<std::int64_t, 3>> shapes;  ///< {M, N, K}
  DType dtype = DType::f32;
  std::optional<DType> out_dtype;  ///< default: dtype
  int iterations = 20;
  int warmup = 2;
};

struct ModelSection {
  std::string preset = "base";
  std::filesystem::path hf_config;           ///< overrides the preset when set
  std::map<std::string, std::int64_t> dims;  ///< explicit BertConfig dimensions
  std::filesystem::path weights;             ///< empty: seeded random init
  std::filesystem::path save;                ///< write config.json + model.safetensors here
  std::uint64_t seed = 0;
  bool heads = false;  ///< MLM + NSP heads
  std::int64_t seq_len = 128;
  DType precision = DType::f32;
};

struct BatchSection {
  std::int64_t micro = 1;
};

struct DataSection {
  std::string source = "generated";
  std::filesystem::path text_file;
  std::filesystem::path vocab;
  bool lower_case = true;
  std::uint64_t seed = 0;
};

struct InferenceSection {
  int iterations = 20;
  int warmup = 3;
  std::filesystem::path output;
};

struct RunConfig {
  std::filesystem::path file;
  std::string backend;
  std::vector<std::filesystem::path> plugin_paths;
  bool allow_world_writable_plugins = false;
  std::map<std::string, std::string> device;  ///< raw; see resolve_device
  std::string task;
  MatmulBenchConfig matmul_bench;
  ModelSection model;
  BatchSection batch;
  DataSection data;
  InferenceSection inference;
  std::string log_level = "info";
  std::filesystem::path log_file;

  /// "configs/x.yaml:14" or "--set a.b=v" for a key path; file name alone if unknown.
  std::string locate(const std::string& key_path) const;
  /// Validates `device` against a backend's options, with file/line in errors.
  DeviceOptions resolve_device(const std::vector<OptionSpec>& specs) const;

  std::map<std::string, int> lines;              ///< key path -> 1-based line
  std::map<std::string, std::string> overrides;  ///< key path -> "--set ..." text
};

/// The tasks this version runs.
inline const std::set<std::string>& known_tasks() {
  static const std::set<std::string> tasks{"matmul-bench", "inference"};
  return tasks;
}

/// Loads and validates `file`, then applies `overrides` ("a.b=value", value in
/// YAML syntax). Throws ConfigError.
RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides = {});

/// Checks one option value; returns the problem ("expected an integer, got
/// \"x\"") or an empty string.
std::string check_option_value(const OptionSpec& spec, const std::string& value);

}  // namespace polyhal
