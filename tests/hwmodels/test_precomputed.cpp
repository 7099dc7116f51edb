// The build step's tables (hwmodels/precompute/): every entry equals what the run-time code computes
// afresh, bit for bit, and they cover every row of the embedded tables that needs one.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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
