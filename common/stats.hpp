// Order statistics shared by the simulator's metrics, validation and the kernel fits.
#pragma once
#include <vector>

namespace servesim {

// numpy.percentile(sorted, q, method="linear") for an ascending, non-empty vector (q in 0..100).
double percentile_sorted(const std::vector<double>& sorted, double q);

// Sorts ascending: the vector std::sort gives. Values all non-negative and not NaN (latencies,
// rates, times) are sorted by their IEEE bits, which order them as their values do (a radix sort,
// linear in their count); any other vector goes to std::sort.
void sort_values(std::vector<double>& v);

}  // namespace servesim
