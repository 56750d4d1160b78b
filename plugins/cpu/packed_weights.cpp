#include "packed_weights.hpp"

#include <algorithm>
#include <cstring>

namespace polyhal::cpu {

std::uint64_t hash_bytes(const void* data, std::uint64_t bytes) {
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::uint64_t lane[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL,
                           0xc2b2ae3d27d4eb4fULL};
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t at = 0;
  for (; at + 32 <= bytes; at += 32) {
    for (int l = 0; l < 4; ++l) {
      std::uint64_t word;
      std::memcpy(&word, p + at + 8 * l, 8);
      lane[l] = (lane[l] ^ word) * kPrime;
    }
  }
  std::uint64_t hash = bytes;
  for (; at < bytes; ++at) hash = (hash ^ p[at]) * kPrime;
  for (const std::uint64_t l : lane) hash = (hash ^ l) * kPrime;
  return hash;
}

std::shared_ptr<dnnl::memory> PackedWeightCache::get(const void* source, std::uint64_t bytes,
                                                     const dnnl::memory::desc& layout, int variant,
                                                     const std::function<dnnl::memory()>& pack) {
  return std::static_pointer_cast<dnnl::memory>(get_any(source, bytes, layout, variant, 0, [&] {
    return std::static_pointer_cast<void>(std::make_shared<dnnl::memory>(pack()));
  }));
}

std::shared_ptr<void> PackedWeightCache::get_any(
    const void* source, std::uint64_t bytes, const dnnl::memory::desc& layout, int variant,
    std::uint64_t salt, const std::function<std::shared_ptr<void>()>& pack) {
  const std::uint64_t hash = hash_bytes(source, bytes);
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [](const Entry& e) { return e.packed.expired(); });
  for (const Entry& e : entries_) {
    if (e.source == source && e.bytes == bytes && e.hash == hash && e.salt == salt &&
        e.variant == variant && e.layout == layout)
      if (auto packed = e.packed.lock()) return packed;
  }
  auto packed = pack();
  entries_.push_back({source, bytes, hash, salt, layout, variant, packed});
  return packed;
}

}  // namespace polyhal::cpu
