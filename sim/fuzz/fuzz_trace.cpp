// libFuzzer harness for the trace, length and timestamp file readers and the scenario "workload"
// object: any bytes must either parse or raise servesim::Error, never crash, hang or read out of
// bounds. Built by `cmake --preset fuzz` (sim/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "workloads/trace.hpp"
#include "workloads/workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the reader, so one corpus exercises all of them.
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 5) {
      case 0: servesim::workloads::parse_trace(text, "fuzz.jsonl"); break;
      case 1: servesim::workloads::parse_lengths(text, "fuzz.csv", ""); break;
      case 2: servesim::workloads::parse_lengths(text, "fuzz.csv", "output_length"); break;
      case 3: servesim::workloads::parse_timestamps(text, "fuzz.txt"); break;
      default: {
        const auto j = servesim::parse_json(text, "fuzz.json");
        if (!j.is_object()) break;
        const auto c = servesim::workloads::parse_workload(servesim::JsonReader(j, "fuzz.json"));
        auto w = servesim::workloads::make_workload(c);
        for (int i = 0; i < 200 && w->next(); ++i) {}
        break;
      }
    }
  } catch (const servesim::Error&) {
  }
  return 0;
}
