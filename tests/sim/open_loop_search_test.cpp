// The open-loop search (recommend / search --target-rps R --arrival poisson): each candidate gets
// the fewest copies that meet both SLOs with R requests/s split evenly over them.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"
#include "sim/api/api.hpp"

namespace servesim::api {
namespace {

SearchArgs open_recommend() {
  SearchArgs a;
  a.model = "llama-3.1-8b";
  a.gpus = "h200";
  a.precisions = "bf16";
  a.topology = "agg";
  a.tp = "1,2";
  a.dp = "1";
  a.isl = 2000;
  a.osl = 200;
  a.ttft_ms = 300;
  a.itl_ms = 15;
  a.target_rps = 60;
  a.arrival = "poisson";
  a.threads = 2;
  return a;
}

TEST(OpenLoopSearch, FewestCopiesMeetTheSloAndOneFewerDoesNot) {
  const nlohmann::json rep = recommend(open_recommend());
  ASSERT_EQ(rep["arrival"], "poisson");
  ASSERT_FALSE(rep["recommendations"].empty());
  const auto& r = rep["recommendations"][0];
  const std::int64_t copies = r["copies"].get<std::int64_t>();
  ASSERT_GE(copies, 2);
  EXPECT_NEAR(r["rate_per_copy"].get<double>(), 60.0 / double(copies), 1e-9);
  EXPECT_LE(r["ttft_ms"].get<double>(), 300);
  EXPECT_LE(r["itl_ms"].get<double>(), 15);
  EXPECT_NE(r["limited_by"], "none");   // one copy fewer broke an SLO
  // The evaluated copy counts of the winner: k passes, k - 1 fails (the points, from the sweep).
  const auto& c = rep["sweep"]["columns"];
  bool at_k = false, at_fewer = false;
  for (std::size_t i = 0; i < c["index"].size(); ++i) {
    if (c["index"][i] != r["index"]) continue;
    const std::int64_t k = c["concurrency"][i].get<std::int64_t>();
    const bool meets = c["meets_slo"][i].get<bool>();
    if (k == copies) at_k = meets;
    if (k == copies - 1) at_fewer = !meets;
    // Flow conservation: a copy that keeps up serves what it is offered, 60/k requests/s x 200
    // tokens (Poisson noise of >= 1000 requests: within 8 %).
    if (meets) {
      EXPECT_NEAR(c["output_tps"][i].get<double>(), 60.0 / double(k) * 200, 0.08 * 60.0 / double(k) * 200);
    }
  }
  EXPECT_TRUE(at_k);
  EXPECT_TRUE(at_fewer);
  // $/hour from the nodes: copies x GPUs per copy on 8-GPU p5en nodes.
  EXPECT_EQ(r["nodes"].get<std::int64_t>(), (r["gpus"].get<std::int64_t>() + 7) / 8);
}

TEST(OpenLoopSearch, PruningChoosesWhatNoPruningChooses) {
  SearchArgs a = open_recommend();
  const nlohmann::json pruned = recommend(a);
  a.prune = false;
  const nlohmann::json all = recommend(a);
  EXPECT_EQ(pruned["recommendations"][0]["label"], all["recommendations"][0]["label"]);
  EXPECT_EQ(pruned["recommendations"][0]["copies"], all["recommendations"][0]["copies"]);
  // Every simulated candidate's copies respect its bound: copies >= target / (bound tok/s per copy).
  for (const auto& c : all["configurations"]) {
    if (c["score"].is_null() || !c["score"]["feasible"].get<bool>()) continue;
    EXPECT_GE(double(c["score"]["copies"].get<std::int64_t>()), 60.0 * 200 / c["bound"]["tps_ub_slo"].get<double>() - 1e-9)
        << c["label"];
  }
}

TEST(OpenLoopSearch, ArrivalNeedsARate) {
  SearchArgs a = open_recommend();
  a.target_rps = std::numeric_limits<double>::quiet_NaN();
  a.target_tps = 12000;
  try {
    recommend(a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "--arrival");
  }
  a = open_recommend();
  a.burstiness = 0.25;   // Poisson arrivals have no shape
  EXPECT_THROW(recommend(a), Error);
}

}  // namespace
}  // namespace servesim::api
