// The build step's tables (hwmodels/precompute/): every entry equals what the run-time code computes
// afresh, bit for bit, and they cover every row of the embedded tables that needs one; the packed
// rows give the samples and fits the tables' text gives; and the rows of the reducer's layout, read
// in place, give what the same points as JSON objects give.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
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

void expect_same_sample(const Sample& a, const Sample& b, const std::string& where) {
  EXPECT_TRUE(a.key == b.key && a.group == b.group && a.kernel == b.kernel) << where;
  for (int k = 0; k < kMaxFeatures; ++k) EXPECT_TRUE(same_bits(a.x[k], b.x[k])) << where << " x" << k;
  EXPECT_TRUE(same_bits(a.compute_s, b.compute_s) && same_bits(a.memory_s, b.memory_s) &&
              same_bits(a.dispatch_s, b.dispatch_s) && same_bits(a.seconds, b.seconds) &&
              same_bits(a.eager_seconds, b.eager_seconds))
      << where;
}

// The embedded tables of `g` read from their text (the pack switched off while they are listed).
Calibration from_text(const GpuSpec& g, const std::string& folder) {
  read_packed_tables(false);
  Calibration c = Calibration::embedded(g, folder);
  read_packed_tables(true);
  return c;
}
}  // namespace

// Every embedded kernel table is in the compiled pack, and every family of every GPU x release
// folder read from it has the header, samples and fit its text gives, bit for bit: the same
// names, files, origins, kernels and rejected reasons, every sample field memcmp-equal, the same
// reproduction bound, and the fitted surface's value off every measured shape equal.
TEST(PackedTables, GiveTheSamplesAndFitsOfTheText) {
  std::vector<std::string> embedded;
  for (const auto& [path, text] : servesim::data::all_files())
    if (path.starts_with("hwmodels/calibration/") && path.ends_with(".json")) embedded.emplace_back(path);
  std::sort(embedded.begin(), embedded.end());
  EXPECT_GT(embedded.size(), 200u);
  EXPECT_EQ(packed_table_files(), embedded);  // nothing left to its text
  std::size_t families = 0, samples = 0;
  for (const GpuSpec& g : Catalog::global().gpus()) {
    std::vector<std::string> folders{""};
    for (auto& r : Calibration::embedded_releases(g)) folders.push_back(r);
    for (const std::string& folder : folders) {
      const Calibration text = from_text(g, folder), packed = Calibration::embedded(g, folder);
      const auto& th = text.headers();
      const auto& ph = packed.headers();
      ASSERT_EQ(th.size(), ph.size()) << g.name << " " << folder;
      for (auto t = th.begin(), p = ph.begin(); t != th.end(); ++t, ++p) {
        const std::string where = g.name + " " + folder + " " + t->first;
        ASSERT_EQ(t->first, p->first) << where;
        EXPECT_EQ(t->second.file, p->second.file) << where;
        EXPECT_EQ(t->second.origin, p->second.origin) << where;
        EXPECT_EQ(t->second.runtime, p->second.runtime) << where;
        EXPECT_EQ(t->second.kernels, p->second.kernels) << where;
        EXPECT_EQ(t->second.rejected, p->second.rejected) << where;
        EXPECT_EQ(t->second.declared, p->second.declared) << where;
        EXPECT_EQ(t->second.fit_method, p->second.fit_method) << where;
      }
      if (&g != &Catalog::global().gpu("H200") && &g != &Catalog::global().gpu("B200") && !folder.empty()) continue;
      for (const auto& [name, h] : th) {  // fitted: H200 and B200 every folder, the other GPUs their base tables
        const FamilyCalibration *t = text.family(name), *p = packed.family(name);
        ASSERT_TRUE(t && p) << name;
        ASSERT_EQ(t->samples.size(), p->samples.size()) << name;
        EXPECT_TRUE(same_bits(t->fit_max_error, p->fit_max_error)) << name;
        for (std::size_t i = 0; i < t->samples.size(); ++i, ++samples) {
          const std::string where = g.name + " " + folder + " " + name + " " + std::to_string(i);
          expect_same_sample(t->samples[i], p->samples[i], where);
          Sample q = t->samples[i];
          q.x[0] += 0.37;  // off the measured shape: the fitted surface, not the stored row
          EXPECT_TRUE(same_bits(t->fit.predict(q), p->fit.predict(q))) << where;
        }
        ++families;
      }
    }
  }
  EXPECT_GT(families, 250u);
  EXPECT_GT(samples, 100000u);
}

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
  const Calibration rows = from_text(g, "vllm-0.19.0");
  std::size_t compared = 0;
  for (const auto& [name, o] : objects.families()) {
    const FamilyCalibration* r = rows.family(name);
    ASSERT_NE(r, nullptr) << name;
    ASSERT_EQ(r->samples.size(), o.samples.size()) << name;
    for (std::size_t i = 0; i < o.samples.size(); ++i, ++compared)
      expect_same_sample(r->samples[i], o.samples[i], name + " " + std::to_string(i));
    EXPECT_EQ(r->rejected, o.rejected) << name;
  }
  EXPECT_GT(compared, 5000u);
  fs::remove_all(dir);
}
