// libFuzzer harness for the --hw-file parser (hwmodels/catalog.cpp): any bytes must either load
// or raise servesim::Error; a GPU that loads must give finite kernel times (no NaN from a
// datasheet figure that passed validation). The kernel check fits the GPU's kernel model, which
// takes seconds per input; it runs only with SERVESIM_FUZZ_KERNELS=1 set (a slow, deep mode).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  servesim::hw::Catalog c;
  try {
    c.load_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const servesim::Error&) {
    return 0;
  }
  static const bool kernels = std::getenv("SERVESIM_FUZZ_KERNELS") != nullptr;
  if (!kernels) return 0;
  for (const auto& g : c.gpus()) {
    if (g.priors.gemm_bf16 <= 0) continue;   // priors are filled in from H200 by the global catalogue only
    try {
      const auto& km = servesim::hw::kernel_model(g);
      const double t = km.gemm(128, 4096, 4096, servesim::hw::Precision::bf16).seconds;
      if (!std::isfinite(t) || t < 0) std::abort();
    } catch (const servesim::Error&) {
    }
  }
  return 0;
}
