#pragma once
/// @file dropout_mask.hpp
/// The dropout masks of training, shared by every backend so that a CPU run
/// and a device-model run (and a resumed run) drop the same elements.
/// Element i of stream `stream` is kept with probability 1-p, decided by a
/// counter-based hash of (seed, counter, stream, i): no generator state, so
/// any thread split, any replica and any resume give the same mask, and a
/// backward pass can regenerate a mask instead of storing it.
#include <cstdint>

namespace polyhal {

class DropoutMask {
 public:
  /// `rng` is the step's i32 pair (seed, counter); `p` in [0, 1).
  DropoutMask(const std::int32_t* rng, std::uint64_t stream, double p) noexcept
      : key_((static_cast<std::uint64_t>(static_cast<std::uint32_t>(rng[0])) << 32 |
              static_cast<std::uint32_t>(rng[1])) ^
             (stream * 0xd1b54a32d192ed03ull)),
        threshold_(static_cast<std::uint64_t>(p * 18446744073709551616.0)),
        keep_(static_cast<float>(1.0 / (1.0 - p))) {}

  /// The multiplier of element i: 0 when dropped, 1/(1-p) when kept
  /// (inverted dropout: the expectation is unchanged).
  float operator()(std::uint64_t i) const noexcept {
    return bits(key_, i) < threshold_ ? 0.0f : keep_;
  }

  /// The parts, for vectorised loops that keep them in registers: element i
  /// is dropped when bits(key(), i) < threshold(), else multiplied by keep().
  static constexpr std::uint64_t bits(std::uint64_t key, std::uint64_t i) noexcept {
    std::uint64_t z = key + 0x9e3779b97f4a7c15ull * (i + 1);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t key() const noexcept { return key_; }
  std::uint64_t threshold() const noexcept { return threshold_; }
  float keep() const noexcept { return keep_; }

 private:
  std::uint64_t key_;
  std::uint64_t threshold_;
  float keep_;
};

}  // namespace polyhal
