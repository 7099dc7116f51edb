// libFuzzer harness for the scenario parser: any input must either parse or raise
// servesim::Error; anything else (crash, other exception, sanitizer report) is a bug. Built by
// `cmake --preset fuzz` (sim/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.hpp"
#include "sim/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    servesim::sim::parse_scenario(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const servesim::Error&) {
  }
  return 0;
}
