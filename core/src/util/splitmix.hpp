#pragma once
// splitmix64's finaliser: a bijection on 64 bits that mixes every input bit
// into every output bit, for keys of deterministic shuffles.
#include <cstdint>

namespace polyhal::detail {

inline std::uint64_t splitmix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace polyhal::detail
