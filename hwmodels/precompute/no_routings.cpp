// The generator's own table: empty, so every routing it needs is drawn (precompute_routings.cpp).
#include "hwmodels/work.hpp"

namespace servesim::hw {
std::span<const PowerLawRouting> precomputed_power_law_routings() { return {}; }
}  // namespace servesim::hw
