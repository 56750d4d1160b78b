#pragma once
// Weights packed once per device, not once per kernel. A server prepares
// its model in many shapes on one copy of the weights
// (BertInference::share_weights); each shape's linear kernels would pack
// their own copy of them into oneDNN's layout, 30 copies of bert-base's
// 340 MB. Kernels given the same weights (same bytes, found by a hash of
// them, at the same address) in the same layout share one packed copy,
// which lives while a kernel holds it.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace polyhal::cpu {

class PackedWeightCache {
 public:
  /// The packed weights of `bytes` bytes at `source` in `layout` (`variant`
  /// tells packings of one layout apart, e.g. f16-rounded), made by `pack`
  /// when no kernel holds them already.
  std::shared_ptr<dnnl::memory> get(const void* source, std::uint64_t bytes,
                                    const dnnl::memory::desc& layout, int variant,
                                    const std::function<dnnl::memory()>& pack);

  /// As above for any packing `Packed` (an int8 kernel's weights with their
  /// steps), whose inputs beyond the weights are hashed into `salt`.
  template <class Packed>
  std::shared_ptr<const Packed> get(const void* source, std::uint64_t bytes,
                                    const dnnl::memory::desc& layout, int variant,
                                    std::uint64_t salt, const std::function<Packed()>& pack) {
    return std::static_pointer_cast<const Packed>(
        get_any(source, bytes, layout, variant, salt,
                [&] { return std::static_pointer_cast<void>(std::make_shared<Packed>(pack())); }));
  }

 private:
  std::shared_ptr<void> get_any(const void* source, std::uint64_t bytes,
                                const dnnl::memory::desc& layout, int variant, std::uint64_t salt,
                                const std::function<std::shared_ptr<void>()>& pack);

  struct Entry {
    const void* source;
    std::uint64_t bytes, hash, salt;
    dnnl::memory::desc layout;
    int variant;
    std::weak_ptr<void> packed;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

/// A 64-bit hash of `bytes` bytes (four interleaved multiply-xor lanes).
std::uint64_t hash_bytes(const void* data, std::uint64_t bytes);

}  // namespace polyhal::cpu
