// Order statistics shared by the simulator's metrics, validation and the kernel fits.
#pragma once
#include <vector>

namespace servesim {

// numpy.percentile(sorted, q, method="linear") for an ascending, non-empty vector (q in 0..100).
double percentile_sorted(const std::vector<double>& sorted, double q);

}  // namespace servesim
