// The NVLink all-reduce serving engines run for tensor-parallel activations (one-shot/two-shot
// kernels over IPC buffers, not NCCL): published measurements in hwmodels/data/nvlink_allreduce.json,
// interpolated log-log in message size. Used for a step's TP all-reduce up to max_bytes().
#pragma once
#include <optional>

#include "hwmodels/catalog.hpp"

namespace servesim::hw {

struct NvlinkAllReduceTime {
  double seconds = 0;
  bool exact_table = false;  // a table of this very GPU and GPU count (else same architecture family)
};

// nullopt when the message exceeds the kernel's ceiling or no table covers the GPU's architecture.
std::optional<NvlinkAllReduceTime> nvlink_allreduce(const GpuSpec& gpu, int gpus, double bytes);
double nvlink_allreduce_max_bytes();

}  // namespace servesim::hw
