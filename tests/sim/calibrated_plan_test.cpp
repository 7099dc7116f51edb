// --calibration on plan, search and recommend: a profile fitted on H200 changes the H200
// candidates (its kernel factors, its bands) and leaves every other GPU's byte-identical.
// The profile is a hand-written fixture: dense and attention kernels 1.3x the tables on H200
// under vLLM 0.19, +2 ms per request before the engine, bands +-5 %.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/api/api.hpp"
#include "sim/scenario.hpp"
#include "sim/simulate.hpp"
#include "sim/validate/run_bands.hpp"

namespace servesim::api {
namespace {

std::string fixture() { return std::string(SERVESIM_SOURCE_DIR) + "/tests/sim/data/h200-slow-kernels.calibration.json"; }

SearchArgs small_recommend() {
  SearchArgs a;
  a.model = "llama-3.1-8b";
  a.gpus = "h200,b200";
  a.precisions = "bf16";
  a.topology = "agg";
  a.tp = "1,2";
  a.dp = "1";
  a.isl = 1000;
  a.osl = 200;
  a.ttft_ms = 500;
  a.itl_ms = 30;
  a.target_tps = 20000;
  a.concurrency = "1,16";
  a.requests = 200;
  a.threads = 2;
  return a;
}

const nlohmann::json& config_of(const nlohmann::json& rep, const std::string& label) {
  for (const auto& c : rep["configurations"])
    if (c["label"] == label) return c;
  throw std::runtime_error("no configuration " + label);
}

// The simulated sweep rows of one configuration, from the report's sweep columns.
nlohmann::json rows_of(const nlohmann::json& rep, int index) {
  const auto& c = rep["sweep"]["columns"];
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < c["index"].size(); ++i)
    if (c["index"][i] == index) {
      nlohmann::json r;
      for (const auto& [k, v] : c.items()) r[k] = v[i];
      out.push_back(r);
    }
  return out;
}

TEST(CalibratedRecommend, ChangesH200CandidatesAndLeavesB200ByteIdentical) {
  SearchArgs a = small_recommend();
  const nlohmann::json base = recommend(a);
  a.calibration = fixture();
  const nlohmann::json cal = recommend(a);

  ASSERT_TRUE(cal.contains("calibration"));
  EXPECT_EQ(cal["calibration"]["applies_to_gpus"], nlohmann::json::array({"H200"}));
  EXPECT_EQ(cal["calibration"]["uncalibrated_gpus"], nlohmann::json::array({"B200"}));
  EXPECT_EQ(cal["calibration"]["calibrated_configurations"].get<int>(), 2);   // H200 TP1 and TP2

  int h200 = 0, b200 = 0;
  for (const auto& c : base["configurations"]) {
    const auto& k = config_of(cal, c["label"]);
    const int i = c["index"].get<int>();
    if (c["gpu"] == "B200") {
      ++b200;
      EXPECT_FALSE(k["calibrated"].get<bool>());
      EXPECT_EQ(c["score"].dump(), k["score"].dump()) << c["label"];
      EXPECT_EQ(rows_of(base, i).dump(), rows_of(cal, i).dump()) << c["label"];
    } else {
      ++h200;
      EXPECT_TRUE(k["calibrated"].get<bool>());
      // Every forward pass's GEMMs and attention take 1.3x: a decode step of one sequence (the
      // ITL at one client) grows by more than 10 % and by no more than 1.3x (host time per step
      // and the unscaled kernels, e.g. norms and the sampler, are not scaled).
      const auto b = rows_of(base, i), k_rows = rows_of(cal, i);
      ASSERT_EQ(b.size(), k_rows.size());
      const double ratio = k_rows[0]["itl_p50_ms"].get<double>() / b[0]["itl_p50_ms"].get<double>();
      EXPECT_GT(ratio, 1.10) << c["label"];
      EXPECT_LE(ratio, 1.30 + 1e-9) << c["label"];
      // The prefill of a 1000-token prompt at one client, plus 2 ms before the engine: slower too.
      EXPECT_GT(k_rows[0]["ttft_p50_ms"].get<double>(), b[0]["ttft_p50_ms"].get<double>() + 2.0) << c["label"];
    }
  }
  EXPECT_EQ(h200, 2);
  EXPECT_EQ(b200, 2);

  // Recommendations: the B200 row is the same but for the line saying nothing applied to it; the
  // H200 row takes the profile's bands (prediction x [0.95, 1.05]).
  auto row_of = [](const nlohmann::json& rep, const std::string& gpu) {
    for (const auto& r : rep["recommendations"])
      if (r["gpu"] == gpu) return r;
    throw std::runtime_error("no recommendation for " + gpu);
  };
  nlohmann::json rb = row_of(base, "B200"), kb = row_of(cal, "B200");
  EXPECT_NE(kb["calibration"].get<std::string>().find("nothing applies"), std::string::npos);
  // Its deployment names the profile (the emitted scenario re-runs the prediction with it).
  EXPECT_TRUE(kb["deployment"].contains("calibration"));
  EXPECT_FALSE(rb["deployment"].contains("calibration"));
  for (auto* r : {&rb, &kb}) r->erase("calibration"), r->erase("calibrated"), r->erase("what_ran"), (*r)["deployment"].erase("calibration");
  EXPECT_EQ(rb.dump(), kb.dump());
  const nlohmann::json kh = row_of(cal, "H200");
  EXPECT_TRUE(kh["calibrated"].get<bool>());
  EXPECT_NEAR(kh["band"]["itl_ms"]["lo"].get<double>(), 0.95 * kh["itl_ms"].get<double>(), 1e-9);
  EXPECT_NEAR(kh["band"]["itl_ms"]["hi"].get<double>(), 1.05 * kh["itl_ms"].get<double>(), 1e-9);
  EXPECT_NEAR(kh["band"]["ttft_ms"]["hi"].get<double>(), 1.05 * kh["ttft_ms"].get<double>(), 1e-9);
  EXPECT_NE(kh["band_note"].get<std::string>().find("cross-validated residuals of the calibration"), std::string::npos);
  EXPECT_NE(kh["what_ran"]["calibration"].get<std::string>().find("applies gemm_scale x1.3, attention_scale x1.3, request_overhead_ms 2 ms"),
            std::string::npos);
}

TEST(CalibratedPlan, AppliesOnItsGpuWithItsBands) {
  PlanArgs a;
  a.model = "llama-3.1-8b";
  a.instance = "p5en.48xlarge";
  a.nodes = 1;
  a.tp = 1;
  a.isl = 1000;
  a.osl = 200;
  a.ttft_ms = 500;
  a.itl_ms = 30;
  a.target_tps = 5000;
  a.topology = "agg";
  a.concurrency = "1,16";
  a.requests = 200;
  a.threads = 2;
  const nlohmann::json base = plan(a);
  a.calibration = fixture();
  const nlohmann::json cal = plan(a);
  const auto& b = base["sweep"]["columns"];
  const auto& c = cal["sweep"]["columns"];
  const double ratio = c["itl_p50_ms"][0].get<double>() / b["itl_p50_ms"][0].get<double>();
  EXPECT_GT(ratio, 1.10);
  EXPECT_LE(ratio, 1.30 + 1e-9);
  EXPECT_NEAR(c["output_tps_band_lo"][1].get<double>(), 0.95 * c["output_tps"][1].get<double>(), 1e-6);
  EXPECT_NE(cal["prediction_band"]["source"].get<std::string>().find("calibration"), std::string::npos);
  EXPECT_NE(cal["calibration"]["summary"].get<std::string>().find("applies gemm_scale"), std::string::npos);
  EXPECT_NE(cal["topologies"][0]["what_ran"]["calibration"].get<std::string>().find("h200-slow-kernels"), std::string::npos);

  // On B200 nothing applies: the plan is the uncalibrated one, and says so.
  a.instance = "p6-b200.48xlarge";
  const nlohmann::json on_b200 = plan(a);
  a.calibration.clear();
  const nlohmann::json b200 = plan(a);
  EXPECT_EQ(on_b200["sweep"]["columns"].dump(), b200["sweep"]["columns"].dump());
  EXPECT_NE(on_b200["calibration"]["summary"].get<std::string>().find("nothing applies"), std::string::npos);
}

TEST(CalibratedPlan, BadProfileIsOneLineNamingTheFile) {
  PlanArgs a;
  a.model = "llama-3.1-8b";
  a.instance = "p5en.48xlarge";
  a.nodes = 1;
  a.isl = 100;
  a.osl = 10;
  a.ttft_ms = 500;
  a.itl_ms = 30;
  a.target_tps = 100;
  a.calibration = std::string(SERVESIM_SOURCE_DIR) + "/tests/sim/data/llama-3.1-8b.json";   // a model file, not a profile
  try {
    plan(a);
    FAIL() << "a model file was taken for a calibration profile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llama-3.1-8b.json"), std::string::npos) << e.what();
  }
}

// A calibrated sweep's band columns are the profile's (+-5 % around each prediction), as simulate's
// prediction_band; on B200, where the profile does not apply, the shipped ones.
TEST(CalibratedSweep, BandColumnsAreTheProfilesWhereItApplies) {
  auto columns = [](const std::string& gpu) {
    sim::Scenario s = sim::parse_scenario(nlohmann::json({{"model", "llama-3.1-8b"}, {"gpu", gpu}, {"gpus", 1}, {"tp", 1},
                                                          {"precision", "bf16"}, {"engine_profile", "vllm-0.19"}, {"seed", 1},
                                                          {"calibration", fixture()},
                                                          {"workload", {{"concurrency", 2}, {"isl", 1000}, {"osl", 100}, {"requests", 64}}}})
                                              .dump(),
                                          "t.json");
    const sim::SweepSpec spec{sim::SweepSpec::Axis::concurrency, {2, 16}};
    return sim::sweep_columns(spec, sim::sweep(s, spec, 2), 1, &s);
  };
  const sim::Columns h = columns("h200");
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(h["inter_token_latency_ms_p50_band_lo"][i], 0.95 * h["inter_token_latency_ms_p50"][i], 1e-9);
    EXPECT_NEAR(h["time_to_first_token_ms_avg_band_hi"][i], 1.05 * h["time_to_first_token_ms_avg"][i], 1e-9);
  }
  const sim::Columns b = columns("b200");
  EXPECT_GT(b["inter_token_latency_ms_p50_band_hi"][0] / b["inter_token_latency_ms_p50"][0], 1.06);   // the shipped band, wider
  // The legend the tables print under them says whose bands they are.
  for (const std::string gpu : {"h200", "b200"}) {
    const sim::Scenario s = sim::parse_scenario(nlohmann::json({{"model", "llama-3.1-8b"}, {"gpu", gpu}, {"gpus", 1}, {"tp", 1},
                                                                {"precision", "bf16"}, {"engine_profile", "vllm-0.19"}, {"seed", 1},
                                                                {"calibration", fixture()},
                                                                {"workload", {{"concurrency", 2}, {"isl", 1000}, {"osl", 100}, {"requests", 16}}}})
                                                    .dump(),
                                                "t.json");
    const std::string legend = sim::validate::run_band_legend(s, sim::simulate(s));
    EXPECT_EQ(legend.find("the calibration profile") != std::string::npos, gpu == "h200") << legend;
  }
}

}  // namespace
}  // namespace servesim::api
