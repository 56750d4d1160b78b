#pragma once
/// @file data_settings.hpp
/// What the data readers are told: the `data` keys (or `eval`'s, for a
/// pre-training run's held-out data) and where each was set, for errors.
/// The config layer fills them (config.hpp: data_source); the readers never
/// see the config itself.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/tokenizer.hpp"
#include "polyhal/app/tri_state.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

struct DataSection {
  std::string source = "generated";
  std::filesystem::path text_file;
  std::filesystem::path vocab;
  bool lower_case = true;
  /// A literal [MASK], [CLS], ... in text: split as BERT's reference
  /// tokenizer does, or kept as one token as Hugging Face's (tokenizer.hpp).
  /// Unset: kept in text inference (filling a [MASK] is what it is for),
  /// split where data is prepared or fine-tuned as the reference does.
  std::optional<SpecialTokensInText> special_tokens;
  std::uint64_t seed = 0;
  double mask_probability = 0.15;     ///< pretrain: share of tokens masked
  std::int64_t max_predictions = 20;  ///< pretrain: at most this many per sequence
  std::filesystem::path files;        ///< mlperf_hdf5: a file or a directory of part files
  bool shuffle = true;                ///< mlperf_hdf5, tfrecord: another sample order each epoch
  /// tfrecord with GZIP files (read in order only): samples shuffled
  /// together, TensorFlow's shuffle buffer (TfRecordSet::shuffle_in_blocks).
  std::int64_t shuffle_buffer = 10000;
  /// mlperf_hdf5: packed rows (`polyhal pack`): auto detects them from the
  /// files; yes requires packed files, no unpacked ones.
  TriState packed = TriState::automatic;
  /// The config section these keys were read from ("data", or "eval" for a
  /// pre-training run's held-out data): errors name its keys.
  std::string section = "data";
  /// "<section>.<key>", for errors about this data.
  std::string key(const char* name) const { return section + "." + name; }
};

/// A data section and where its keys were set.
struct DataSource {
  DataSection data;
  /// "configs/x.yaml:14" for a key path (RunConfig::locate); empty: the key alone.
  std::function<std::string(const std::string& key_path)> locator;
  std::string locate(const std::string& key_path) const {
    return locator ? locator(key_path) : key_path;
  }
  /// The error "<locate(key)>: key '<key>': <problem>" (RunConfig::error).
  ConfigError error(const std::string& key_path, const std::string& problem) const {
    return ConfigError(locate(key_path) + ": key '" + key_path + "': " + problem);
  }
};

}  // namespace polyhal
