// Build step: reads every embedded kernel table once (each row's values and family name, with the
// run-time reader) and writes them packed (pack_embedded_tables in hwmodels/calibration.cpp), with
// a C++ source that compiles the pack in as packed_tables() (hwmodels/CMakeLists.txt). A run then
// reads a table's rows from the pack instead of splitting and parsing its text;
// tests/hwmodels/test_precomputed.cpp checks every sample and fit against the text's.
//
//   servesim_pack_tables OUT.bin OUT.cpp incbin|array
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "hwmodels/calibration.hpp"

namespace {
// Writes `text` to `path` unless it holds it already (so an unchanged pack recompiles nothing).
bool write_if_changed(const char* path, const std::string& text) {
  std::ifstream old(path, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(old)), std::istreambuf_iterator<char>());
  if (before == text) return true;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return bool(f);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::string(argv[3]) != "incbin" && std::string(argv[3]) != "array")) {
    std::fprintf(stderr, "usage: %s OUT.bin OUT.cpp incbin|array\n", argv[0]);
    return 2;
  }
  try {
    const std::string pack = servesim::hw::pack_embedded_tables();
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a: the source changes with the pack
    for (unsigned char c : pack) hash = (hash ^ c) * 1099511628211ull;
    std::ostringstream out;
    out << "// Generated at build time by hwmodels/precompute/pack_tables.cpp: do not edit.\n"
           "// The embedded kernel tables' rows, packed: "
        << pack.size() << " bytes, FNV-1a " << std::hex << hash << std::dec << ".\n"
        << "#include \"hwmodels/calibration.hpp\"\n\n";
    const std::string bin = argv[1];
    if (std::string(argv[3]) == "incbin" && bin.find_first_of("\\\"\n") == std::string::npos) {
      out << "asm(\".section .rodata\\n.balign 16\\n.hidden servesim_packed_tables\\n.globl servesim_packed_tables\\n"
             "servesim_packed_tables:\\n.incbin \\\""
          << bin << "\\\"\\n.byte 0\\n.previous\");\n"
          << "extern \"C\" const unsigned char servesim_packed_tables[];\n";
    } else {
      out << "alignas(16) static const unsigned char servesim_packed_tables[] = {";
      for (unsigned char c : pack) out << int(c) << ',';
      out << "0};\n";
    }
    out << "\nnamespace servesim::hw {\nstd::string_view packed_tables() {\n"
           "  return {reinterpret_cast<const char*>(servesim_packed_tables), "
        << pack.size() << "};\n}\n}  // namespace servesim::hw\n";
    if (!write_if_changed(argv[1], pack) || !write_if_changed(argv[2], out.str())) {
      std::fprintf(stderr, "servesim_pack_tables: cannot write %s or %s\n", argv[1], argv[2]);
      return 1;
    }
    std::printf("%zu bytes of packed kernel tables -> %s\n", pack.size(), argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servesim_pack_tables: %s\n", e.what());
    return 1;
  }
  return 0;
}
