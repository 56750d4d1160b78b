#pragma once
// tf.train.Example, the record of BERT's TFRecord files: named features, each
// a list of int64, float or bytes values.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace polyhal::detail {

class TfExample {
 public:
  /// Parses one record; `file` and `record` are for messages. Throws
  /// ConfigError naming both when the bytes are not an Example.
  TfExample(std::string_view bytes, std::filesystem::path file, std::int64_t record);

  bool has(const std::string& name) const { return features_.contains(name); }
  /// The feature's names, sorted (for messages).
  std::string names() const;
  /// An int64 feature of exactly `count` values (as tf.io.FixedLenFeature
  /// asks), each checked to fit int32. ConfigError naming file, record and
  /// feature otherwise, or when it is missing or of another kind.
  std::vector<std::int32_t> ints(const std::string& name, std::size_t count) const;
  /// A float feature of exactly `count` values.
  std::vector<float> floats(const std::string& name, std::size_t count) const;
  /// The number of values of a feature (0 when it is missing).
  std::size_t count(const std::string& name) const;

 private:
  struct Feature {
    char kind = 0;  // 'i' int64, 'f' float, 'b' bytes
    std::vector<std::int64_t> ints;
    std::vector<float> floats;
    std::size_t bytes = 0;
  };
  const Feature& get(const std::string& name, char kind, std::size_t count) const;
  std::filesystem::path file_;
  std::int64_t record_;
  std::map<std::string, Feature> features_;
};

}  // namespace polyhal::detail
