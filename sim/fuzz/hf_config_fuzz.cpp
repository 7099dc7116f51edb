// libFuzzer harness for the Hugging Face config importer (models/model_spec.cpp): any bytes must
// either import or raise servesim::Error; an imported model must get a memory plan or an Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto m = servesim::models::import_hf_config(std::string_view(reinterpret_cast<const char*>(data), size),
                                                      "fuzz.json", "fuzz");
    const auto& gpu = servesim::hw::Catalog::global().gpu("h200");
    (void)servesim::models::plan_memory(m, gpu, servesim::hw::Precision::bf16, {1, 1, 1}, {});
  } catch (const servesim::Error&) {
  }
  return 0;
}
