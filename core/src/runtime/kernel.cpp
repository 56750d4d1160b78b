#include "polyhal/kernel.hpp"

#include <fmt/format.h>

#include <set>

#include "polyhal/error.hpp"

namespace polyhal {

Kernel::~Kernel() = default;

void Kernel::set_constants(std::span<const Tensor> constants) {
  if (!constants.empty()) throw RuntimeFailure(implementation() + " takes no constants");
}

DType KernelDesc::out_dtype() const {
  if (const auto* m = std::get_if<MatmulAttrs>(&attrs); m != nullptr && m->out_dtype) {
    return *m->out_dtype;
  }
  return dtype;
}

void KernelDesc::throw_attrs_mismatch(std::size_t wanted) const {
  throw RuntimeFailure(fmt::format("{}: the kernel reads {}, the op was given {}", to_string(),
                                   op_attrs_name(wanted), op_attrs_name(attrs.index())));
}

void KernelDesc::check_attrs() const {
  const std::size_t wanted = op_attrs_index(op);
  if (wanted == std::variant_npos) {
    throw RuntimeFailure(fmt::format("op number {} is not in op schema {}",
                                     static_cast<unsigned>(op), kOpSchemaVersion));
  }
  if (attrs.index() != wanted) {
    throw RuntimeFailure(fmt::format("{}: op '{}' takes {}, was given {}", to_string(), op_name(op),
                                     op_attrs_name(wanted), op_attrs_name(attrs.index())));
  }
}

std::string KernelDesc::to_string() const {
  std::string text = fmt::format("{} {}", op_name(op), dtype_name(dtype));
  if (const auto* linear = std::get_if<LinearAttrs>(&attrs);
      linear != nullptr && linear->math != LinearMath::native)
    text += fmt::format(" ({} products)", linear_math_name(linear->math));
  if (products != DType::f32) text += fmt::format(" ({} products)", dtype_name(products));
  for (std::size_t i = 0; i < input_shapes.size(); ++i) {
    text += (i == 0 ? " " : " x ") + shape_string(input_shapes[i]);
  }
  return text;
}

void KernelRegistry::add(OpKind op, DType dtype, KernelFactory factory) {
  factories_[{op, dtype}] = std::move(factory);
}

const KernelFactory* KernelRegistry::find(OpKind op, DType dtype) const {
  auto it = factories_.find({op, dtype});
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<DType> KernelRegistry::dtypes_for(OpKind op) const {
  std::vector<DType> result;
  for (const auto& [key, factory] : factories_) {
    if (key.first == op) result.push_back(key.second);
  }
  return result;
}

std::vector<OpKind> KernelRegistry::ops() const {
  std::set<OpKind> kinds;
  for (const auto& [key, factory] : factories_) kinds.insert(key.first);
  return {kinds.begin(), kinds.end()};
}

}  // namespace polyhal
