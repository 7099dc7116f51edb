// Build step: draws the power-law routing of every measured fused-MoE row of the embedded kernel
// tables (every GPU, every release folder) and writes them as a C++ table, compiled into the
// binary as precomputed_power_law_routings() (hwmodels/CMakeLists.txt). The draws are the same
// code the run-time fit would call (moe_routing_measured), so a row looked up gets the same bits;
// tests/hwmodels/test_precomputed.cpp draws every entry again and compares.
//
//   servesim_precompute_routings OUT.cpp
#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hwmodels/calibration.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/work.hpp"

using namespace servesim::hw;

namespace {
// Reads every fused-MoE family of every embedded table of `gpu`: each row's routing is drawn.
void draw_all(const GpuSpec& gpu) {
  std::vector<std::string> folders{""};
  for (auto& r : Calibration::embedded_releases(gpu)) folders.push_back(r);
  for (const std::string& folder : folders) {
    const Calibration c = Calibration::embedded(gpu, folder);
    if (c.empty()) continue;
    for (const std::string& name : c.family_names("moe")) c.family(name);
  }
}

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.cpp\n", argv[0]);
    return 2;
  }
  try {
    const auto& gpus = Catalog::global().gpus();
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(gpus.size());
    const std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
    for (std::size_t w = 0; w < workers; ++w)
      threads.emplace_back([&, w] {
        for (std::size_t i = w; i < gpus.size(); i += workers) try {
            draw_all(gpus[i]);
          } catch (...) {
            errors[i] = std::current_exception();
          }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);

    std::ostringstream out;
    out << "// Generated at build time by hwmodels/precompute/precompute_routings.cpp: do not edit.\n"
           "// The power-law routing of every measured fused-MoE row of the embedded kernel tables.\n"
           "#include \"hwmodels/work.hpp\"\n\nnamespace servesim::hw {\nnamespace {\n"
           "const PowerLawRouting kRoutings[] = {\n";
    const auto drawn = power_law_routings_drawn();
    for (const PowerLawRouting& r : drawn)
      out << "    {" << r.experts << ", " << hex(r.tokens) << ", " << r.topk << ", " << r.ep << ", " << hex(r.skew) << ", "
          << r.block_m << ", {" << hex(r.routing.slots) << ", " << hex(r.routing.touched) << ", " << hex(r.routing.padded)
          << ", " << r.routing.block_m << "}},\n";
    out << "    {}};\n}  // namespace\n\nstd::span<const PowerLawRouting> precomputed_power_law_routings() {\n"
           "  return {kRoutings, std::size(kRoutings) - 1};\n}\n\n}  // namespace servesim::hw\n";
    // Rewritten only when it changes, so an unchanged table recompiles nothing.
    const std::string text = out.str();
    std::ifstream old(argv[1], std::ios::binary);
    const std::string before((std::istreambuf_iterator<char>(old)), std::istreambuf_iterator<char>());
    if (before != text) {
      std::ofstream f(argv[1], std::ios::binary | std::ios::trunc);
      f << text;
      if (!f) {
        std::fprintf(stderr, "%s: cannot write\n", argv[1]);
        return 1;
      }
    }
    std::printf("%zu power-law routings of measured fused-MoE rows -> %s\n", drawn.size(), argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servesim_precompute_routings: %s\n", e.what());
    return 1;
  }
  return 0;
}
