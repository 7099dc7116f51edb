// Latency curves that NVIDIA published for kernels and GPU counts servesim has not measured itself
// (hwmodels/data/published_*.json, each with its source), interpolated log-log in message size:
// - the NVLink one-shot/two-shot all-reduce engines run for tensor-parallel activations (not
//   NCCL), used for a step's TP all-reduce up to its size ceiling;
// - NCCL all-reduce on 2 to 8 GPUs, whose n-GPU / 2-GPU ratio carries servesim's own 2-GPU
//   measurements to larger groups.
#pragma once
#include <optional>
#include <string_view>

#include "hwmodels/catalog.hpp"

namespace servesim::hw {

struct PublishedTime {
  double seconds = 0;
  bool exact_table = false;  // a table of this very GPU and GPU count (else same architecture family)
  int table_gpus = 0;        // the GPU count of the table used
};

// The engines' NVLink all-reduce kernel; nullopt above its ceiling or for an uncovered architecture.
std::optional<PublishedTime> nvlink_allreduce(const GpuSpec& gpu, int gpus, double bytes);
double nvlink_allreduce_max_bytes();

// Published NCCL all-reduce time on `gpus` GPUs over its time on 2 GPUs, same message and
// architecture; nullopt when the architecture has no 2-GPU and n-GPU tables.
std::optional<double> nccl_allreduce_scaling(const GpuSpec& gpu, int gpus, double bytes);

}  // namespace servesim::hw
