// The generators' own pack: empty, so every embedded table is read from its text (pack_tables.cpp).
#include "hwmodels/calibration.hpp"

namespace servesim::hw {
std::string_view packed_tables() { return {}; }
}  // namespace servesim::hw
