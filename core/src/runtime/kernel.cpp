#include "polyhal/kernel.hpp"

#include <fmt/format.h>

#include <set>

namespace polyhal {

Kernel::~Kernel() = default;

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
