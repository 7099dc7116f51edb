// SplitMix64: a well-mixed 64-bit hash of x (Steele, Lea & Flood 2014), used to derive
// independent, order-free random streams from a seed.
#pragma once
#include <cstdint>

namespace servesim {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A double in [0, 1) from the top 53 bits of a hash.
inline double unit_interval(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace servesim
