#include "data/tf_example.hpp"

#include <fmt/format.h>
#include <proto/example.pb.h>

#include <limits>

#include "polyhal/error.hpp"

namespace polyhal::detail {

TfExample::TfExample(std::string_view bytes, std::filesystem::path file, std::int64_t record)
    : file_(std::move(file)), record_(record) {
  tfproto::Example example;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !example.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw ConfigError(fmt::format("{}: record {}: not a tf.train.Example ({} bytes)",
                                  file_.string(), record_, bytes.size()));
  for (const auto& [name, value] : example.features().feature()) {
    Feature f;
    switch (value.kind_case()) {
      case tfproto::Feature::kInt64List:
        f.kind = 'i';
        f.ints.assign(value.int64_list().value().begin(), value.int64_list().value().end());
        break;
      case tfproto::Feature::kFloatList:
        f.kind = 'f';
        f.floats.assign(value.float_list().value().begin(), value.float_list().value().end());
        break;
      case tfproto::Feature::kBytesList:
        f.kind = 'b';
        f.bytes = static_cast<std::size_t>(value.bytes_list().value_size());
        break;
      default:
        f.kind = 'i';  // an empty Feature: TensorFlow reads it as a list of nothing
        break;
    }
    features_.emplace(name, std::move(f));
  }
}

std::string TfExample::names() const {
  std::string out;
  for (const auto& [name, f] : features_) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

std::size_t TfExample::count(const std::string& name) const {
  const auto it = features_.find(name);
  if (it == features_.end()) return 0;
  const Feature& f = it->second;
  return f.kind == 'i' ? f.ints.size() : f.kind == 'f' ? f.floats.size() : f.bytes;
}

const TfExample::Feature& TfExample::get(const std::string& name, char kind,
                                         std::size_t count) const {
  const auto it = features_.find(name);
  if (it == features_.end())
    throw ConfigError(fmt::format("{}: record {}: no feature '{}' (it has: {})", file_.string(),
                                  record_, name, names()));
  const Feature& f = it->second;
  const auto kind_name = [](char k) {
    return k == 'i' ? "int64_list" : k == 'f' ? "float_list" : "bytes_list";
  };
  if (f.kind != kind && !(kind == 'f' && f.kind == 'i' && f.ints.empty()))
    throw ConfigError(fmt::format("{}: record {}: feature '{}' is a {}, expected a {}",
                                  file_.string(), record_, name, kind_name(f.kind),
                                  kind_name(kind)));
  if (this->count(name) != count)
    throw ConfigError(fmt::format(
        "{}: record {}: feature '{}' has {} values, expected {} (as the file's first record)",
        file_.string(), record_, name, this->count(name), count));
  return f;
}

std::vector<std::int32_t> TfExample::ints(const std::string& name, std::size_t count) const {
  const Feature& f = get(name, 'i', count);
  std::vector<std::int32_t> out(f.ints.size());
  for (std::size_t k = 0; k < f.ints.size(); ++k) {
    const std::int64_t v = f.ints[k];
    if (v < std::numeric_limits<std::int32_t>::min() ||
        v > std::numeric_limits<std::int32_t>::max())
      throw ConfigError(fmt::format("{}: record {}: feature '{}'[{}] = {} does not fit int32",
                                    file_.string(), record_, name, k, v));
    out[k] = static_cast<std::int32_t>(v);
  }
  return out;
}

std::vector<float> TfExample::floats(const std::string& name, std::size_t count) const {
  const Feature& f = get(name, 'f', count);
  if (f.kind == 'i') return std::vector<float>(count, 0.0f);
  return f.floats;
}

}  // namespace polyhal::detail
