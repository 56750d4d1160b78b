#include "polyhal/kernel.hpp"

#include <fmt/format.h>

#include <set>

#include "polyhal/error.hpp"

namespace polyhal {

Kernel::~Kernel() = default;

void Kernel::set_constants(std::span<const Tensor> constants) {
  if (!constants.empty()) throw RuntimeFailure(implementation() + " takes no constants");
}

std::int64_t KernelDesc::int_attr(const std::string& key) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    throw RuntimeFailure(fmt::format("{}: attribute '{}' is required", to_string(), key));
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw RuntimeFailure(
        fmt::format("{}: attribute '{}' is not an integer: {}", to_string(), key, it->second));
  }
}

DType KernelDesc::out_dtype() const {
  auto it = attrs.find("out_dtype");
  if (it == attrs.end()) return dtype;
  auto parsed = parse_dtype(it->second);
  if (!parsed)
    throw RuntimeFailure(fmt::format("{}: unknown out_dtype {}", to_string(), it->second));
  return *parsed;
}

std::string KernelDesc::attr(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second;
}

std::string KernelDesc::to_string() const {
  std::string text = fmt::format("{} {}", op, dtype_name(dtype));
  for (std::size_t i = 0; i < input_shapes.size(); ++i) {
    text += (i == 0 ? " " : " x ") + shape_string(input_shapes[i]);
  }
  return text;
}

void KernelRegistry::add(const std::string& op, DType dtype, KernelFactory factory) {
  factories_[{op, dtype}] = std::move(factory);
}

const KernelFactory* KernelRegistry::find(const std::string& op, DType dtype) const {
  auto it = factories_.find({op, dtype});
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<DType> KernelRegistry::dtypes_for(const std::string& op) const {
  std::vector<DType> result;
  for (const auto& [key, factory] : factories_) {
    if (key.first == op) result.push_back(key.second);
  }
  return result;
}

std::vector<std::string> KernelRegistry::ops() const {
  std::set<std::string> names;
  for (const auto& [key, factory] : factories_) names.insert(key.first);
  return {names.begin(), names.end()};
}

}  // namespace polyhal
