// vLLM's fused-MoE kernel per GPU architecture, checkpoint weight format and expert-parallel
// layout (the embedded table hwmodels/data/moe_kernels.json, with its sources), and the
// calibration families that time each kernel.
#pragma once
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"

namespace servesim::hw {

struct MoeKernelRule {
  std::vector<std::string> arch;      // GpuSpec::arch values it applies to
  Precision weights = Precision::bf16;
  enum class Ep { any, one, many } ep = Ep::any;  // EP 1, EP > 1, or either
  std::vector<std::string> families;  // calibration families timing it, preferred first
  std::string kernel;                 // the kernel vLLM runs, as `step` shows it
  std::string source;                 // where the choice comes from
};

// Every rule, in file order.
const std::vector<MoeKernelRule>& moe_kernel_rules();
// The first rule for this GPU's architecture, weight format and expert-parallel size; throws
// Error naming the combination when the table has none.
const MoeKernelRule& moe_kernel_rule(const GpuSpec& gpu, Precision weights, int ep);

}  // namespace servesim::hw
