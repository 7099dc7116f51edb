// The build step's tables (hwmodels/precompute/): every entry equals what the run-time code computes
// afresh, bit for bit, and they cover every row of the embedded tables that needs one; and the rows
// of the reducer's layout, read in place, give what the same points as JSON objects give.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/embedded.hpp"
#include "hwmodels/calibration.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/work.hpp"

using namespace servesim::hw;

namespace {
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
}  // namespace

// Each power-law routing compiled in is the mean of AIC's 32 seeded draws for its key, drawn again
// here: the same bits (memcmp), so a fit that looks a row up fits what drawing it would.
TEST(PrecomputedRoutings, EveryEntryEqualsAFreshDraw) {
  const auto table = precomputed_power_law_routings();
  ASSERT_GT(table.size(), 100u);
  for (std::size_t i = 0; i < table.size(); ++i) {
    const PowerLawRouting& e = table[i];
    if (i) {  // sorted, one entry per key (the lookup is a binary search)
      const PowerLawRouting& p = table[i - 1];
      EXPECT_TRUE(std::tie(p.experts, p.tokens, p.topk, p.ep, p.skew, p.block_m) <
                  std::tie(e.experts, e.tokens, e.topk, e.ep, e.skew, e.block_m)) << i;
    }
    MoeShape s;
    s.experts = e.experts, s.tokens = e.tokens, s.topk = e.topk, s.ep = e.ep, s.skew = e.skew;
    const MoeRouting fresh = power_law_routing_drawn(s, e.block_m);
    EXPECT_TRUE(same_bits(fresh.slots, e.routing.slots)) << i << ": " << fresh.slots << " vs " << e.routing.slots;
    EXPECT_TRUE(same_bits(fresh.touched, e.routing.touched)) << i;
    EXPECT_TRUE(same_bits(fresh.padded, e.routing.padded)) << i;
    EXPECT_EQ(fresh.block_m, e.routing.block_m) << i;
    EXPECT_TRUE(same_bits(moe_routing_measured(s, e.block_m).slots, e.routing.slots)) << i;
  }
  // By hand, a routing a rank cannot exceed: at most tokens x topk slots, at most its local experts.
  for (const PowerLawRouting& e : table) {
    EXPECT_LE(e.routing.slots, e.tokens * e.topk + 1e-9);
    EXPECT_LE(e.routing.touched, double(e.experts) / e.ep + 1e-9);
  }
}

// Reading every fused-MoE family of every embedded table (every GPU, every release folder) finds
// each power-law row's routing in the table: nothing is drawn at run time.
TEST(PrecomputedRoutings, CoverEveryMeasuredFusedMoeRow) {
  const std::size_t misses = power_law_routing_table_misses();
  std::size_t families = 0;
  for (const GpuSpec& g : Catalog::global().gpus()) {
    std::vector<std::string> folders{""};
    for (auto& r : Calibration::embedded_releases(g)) folders.push_back(r);
    for (const std::string& folder : folders) {
      const Calibration c = Calibration::embedded(g, folder);
      for (const std::string& name : c.family_names("moe")) {
        ASSERT_NE(c.family(name), nullptr) << g.name << " " << folder << " " << name;
        ++families;
      }
    }
  }
  EXPECT_GT(families, 50u);
  EXPECT_EQ(power_law_routing_table_misses(), misses);
}

// The rows of the reducer's layout ("columns", one list of values per point) are read in place,
// without a JSON object per row; the same points written as objects go through JsonReader. Both
// give the same samples, bit for bit (every row kind the H200 tables hold: strings, integers,
// decimals, exponents, nulls).
TEST(CalibrationRows, ReadInPlaceGiveTheSameSamplesAsObjects) {
  namespace fs = std::filesystem;
  const GpuSpec& g = Catalog::global().gpu("H200");
  const fs::path dir = fs::temp_directory_path() / ("servesim_rows_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const char* files[] = {"gemm", "attention_prefill", "attention_decode", "moe", "custom_all_reduce", "conv1d"};
  for (const char* f : files) {
    const std::string path = std::string("hwmodels/calibration/h200/vllm-0.19.0/") + f + ".json";
    const std::string_view text = servesim::data::get(path);
    ASSERT_NE(text.find("\"columns\""), std::string_view::npos) << path;  // the reducer's layout
    nlohmann::json doc = nlohmann::json::parse(text);
    expand_point_rows(doc, path);
    doc.erase("columns");
    ASSERT_TRUE(doc["points"][0].is_object());
    std::ofstream(dir / (std::string(f) + ".json")) << doc.dump();
  }
  const Calibration objects = Calibration::from_dir(dir.string(), g);
  const Calibration rows = Calibration::embedded(g, "vllm-0.19.0");
  std::size_t compared = 0;
  for (const auto& [name, o] : objects.families()) {
    const FamilyCalibration* r = rows.family(name);
    ASSERT_NE(r, nullptr) << name;
    ASSERT_EQ(r->samples.size(), o.samples.size()) << name;
    for (std::size_t i = 0; i < o.samples.size(); ++i, ++compared) {
      const Sample &a = r->samples[i], &b = o.samples[i];
      EXPECT_TRUE(a.key == b.key && a.group == b.group && a.kernel == b.kernel) << name << " " << i;
      for (int k = 0; k < kMaxFeatures; ++k) EXPECT_TRUE(same_bits(a.x[k], b.x[k])) << name << " " << i << " x" << k;
      EXPECT_TRUE(same_bits(a.compute_s, b.compute_s) && same_bits(a.memory_s, b.memory_s) &&
                  same_bits(a.dispatch_s, b.dispatch_s) && same_bits(a.seconds, b.seconds) &&
                  same_bits(a.eager_seconds, b.eager_seconds))
          << name << " " << i;
    }
    EXPECT_EQ(r->rejected, o.rejected) << name;
  }
  EXPECT_GT(compared, 5000u);
  fs::remove_all(dir);
}
