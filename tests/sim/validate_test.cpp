// servesim validate: the silicon-sample CSV reader (concurrency parse, merging of repeats), the
// reasons a point cannot be modelled, the error arithmetic, thread-count independence, and the
// aiperf-folder round trip (a simulated run exported and validated against itself).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/simulate.hpp"
#include "sim/validate/run_bands.hpp"
#include "sim/validate/transfer.hpp"
#include "sim/validate/validate.hpp"

namespace v = servesim::sim::validate;
using servesim::sim::Scenario;

namespace {

std::string data(const std::string& f) { return std::string(SERVESIM_SOURCE_DIR) + "/tests/sim/data/" + f; }

// The fixture's model_path resolves to this file's model (named llama-3.1-8b by its file).
// The Llama-3.1-8B config as the run's --model-file (scoped to the run, never in the catalogue).
void add_llama(v::Options& o) { o.model_files = {data("llama-3.1-8b.json")}; }

const v::MeasuredPoint& by_id(const std::vector<v::MeasuredPoint>& ps, const std::string& id) {
  for (const auto& p : ps)
    if (p.id == id) return p;
  throw std::runtime_error("no point " + id);
}

// The points of a silicon-sample CSV written from `text` into a scratch file named `name`.
std::vector<v::MeasuredPoint> read_csv_text(const std::string& name, const std::string& text, v::CsvReadStats* st) {
  const auto dir = std::filesystem::temp_directory_path() / ("servesim_validate_" + name);
  std::filesystem::create_directories(dir);
  const auto f = (dir / "points.csv").string();
  std::ofstream(f) << text;
  return v::read_silicon_csv(f, st);
}

// The sample CSV's aggregated H200 points, run on two threads.
v::Options h200_agg() {
  v::Options o;
  add_llama(o);
  o.threads = 2;
  o.gpus = {"h200"};
  o.modes = {"agg"};
  return o;
}
std::vector<v::PointResult> run_sample(const v::Options& o) { return v::run(v::read_silicon_csv(data("validate_sample.csv")), o).points; }

const v::PointResult& result(const v::Report& r, const std::string& id) {
  for (const auto& p : r.points)
    if (p.measured.id == id) return p;
  throw std::runtime_error("no point " + id);
}

// The fixture's Llama-3.1-8B H200 rows, on one thread (the model file added).
v::Options llama_h200() {
  v::Options o;
  add_llama(o);
  o.models = {"llama"};
  o.gpus = {"h200"};
  o.threads = 1;
  return o;
}

}  // namespace

TEST(Validate, ConcurrencyFromDataSourceThenId) {
  EXPECT_EQ(v::parse_concurrency("db-dump/2026-04-27; config_id=733; silicon_concurrency=128; measured=2026-04-17", "x_c64_y"), 128);
  EXPECT_EQ(v::parse_concurrency("source_file=a.csv", "m_agg_1024x1024_c64_tp1_1"), 64);
  EXPECT_EQ(v::parse_concurrency("source_file=a.csv; silicon_concurrency=", "m_agg_4000x1000_c_tp8_0_1"), 0);
  EXPECT_EQ(v::parse_concurrency("silicon_concurrency=12x", "m_c7_"), 7);   // not a number: the id's
  EXPECT_EQ(v::parse_concurrency("", "m_cfg733"), 0);
}

TEST(Validate, CsvMergesRepeatsIntoMedians) {
  v::CsvReadStats st;
  const auto ps = v::read_silicon_csv(data("validate_sample.csv"), &st);
  EXPECT_EQ(st.rows, 16);
  EXPECT_EQ(st.points, 14);          // the three c64 rows differ only in id, source and metrics
  EXPECT_EQ(st.merged_points, 1);
  EXPECT_EQ(st.merged_rows, 2);
  ASSERT_EQ(ps.size(), 14u);
  const auto& m = by_id(ps, "llama8b_h200_vllm_agg_2000x100_c64_tp1_a");
  EXPECT_EQ(m.merged, 3);
  EXPECT_EQ(m.concurrency, 64);
  EXPECT_DOUBLE_EQ(m.ttft_ms, 121.73);   // median of 121.73, 130.00, 100.00
  EXPECT_DOUBLE_EQ(m.tpot_ms, 9.74);     // median of 9.74, 10.00, 9.00
  // Three different runs: between them TTFT spans (130 - 100) / 121.73, TPOT (10 - 9) / 9.74.
  EXPECT_EQ(m.runs, 3);
  EXPECT_DOUBLE_EQ(m.ttft_rerun_spread, 30.0 / 121.73);
  EXPECT_DOUBLE_EQ(m.tpot_rerun_spread, 1.0 / 9.74);
  // Little's law: 64 clients x 100 tokens every 121.73 + 99 x 9.74 = 1085.99 ms.
  EXPECT_NEAR(m.output_tps, 6400 / 1.08599, 1e-9);
  EXPECT_TRUE(m.output_tps_derived);
  EXPECT_EQ(by_id(ps, "llama8b_h200_vllm_agg_2000x100_c128_tp4_a").concurrency, 128);   // from the id only
  EXPECT_EQ(by_id(ps, "llama8b_h200_vllm_agg_2000x100_c_tp4_x").concurrency, 0);
  EXPECT_EQ(by_id(ps, "llama8b_h200_vllm_agg_8000x100_c16_tp1_a").merged, 1);
  EXPECT_EQ(by_id(ps, "llama8b_h200_vllm_agg_8000x100_c16_tp1_a").runs, 1);
  EXPECT_TRUE(std::isnan(by_id(ps, "llama8b_h200_vllm_agg_8000x100_c16_tp1_a").ttft_rerun_spread));
}

TEST(Validate, IdLayoutParse) {
  int tp = 0, ep = 0;
  EXPECT_TRUE(v::parse_id_layout("2026_04_06_minimax_m2_5_h100_sxm_vllm_fp8_agg_1024x1024_c4_tp4_ep4_1357", &tp, &ep));
  EXPECT_EQ(tp, 4);
  EXPECT_EQ(ep, 4);
  EXPECT_TRUE(v::parse_id_layout("2026_03_25_minimax_m2_5_h100_sxm_vllm_fp8_agg_1024x1024_c4_tp4_0_ep4_0_234", &tp, &ep));
  EXPECT_EQ(tp, 4);
  EXPECT_EQ(ep, 4);
  EXPECT_TRUE(v::parse_id_layout("m_c8_tp2_ep2", &tp, &ep));
  EXPECT_EQ(tp, 2);
  EXPECT_FALSE(v::parse_id_layout("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c16_cfg690", &tp, &ep));
  EXPECT_FALSE(v::parse_id_layout("m_agg_1024x1024_c64_tp1_1", &tp, &ep));      // TP only
  EXPECT_FALSE(v::parse_id_layout("m_tp4_epx_1", &tp, &ep));
}

// A row whose columns name attention DP (TP4 DP4 EP16) while its id names TP4 EP4 runs the id's
// layout, says so, and is counted; a DP row whose id names no layout keeps its columns.
TEST(Validate, CsvIdLayoutOverridesAttentionDpColumns) {
  const auto dir = std::filesystem::temp_directory_path() / "servesim_validate_layout";
  std::filesystem::create_directories(dir);
  const auto f = (dir / "layout.csv").string();
  std::ofstream(f) << "id,silicon_data_source,backend,model_path,system,mode,isl,osl,tp_size,attention_dp_size,moe_ep_size,"
                      "silicon_ttft_ms,silicon_tpot_ms\n"
                      "x_agg_1024x1024_c4_tp4_ep4_1357,silicon_concurrency=4,vllm,m,h100_sxm,agg,1024,1024,4,4,16,85.7,10.09\n"
                      "x_agg_8192x1024_c4_cfg691,silicon_concurrency=4,vllm,m,h100_sxm,agg,8192,1024,4,4,16,90,9\n"
                      "x_agg_1024x1024_c8_tp4_ep4_1344,silicon_concurrency=8,vllm,m,h100_sxm,agg,1024,1024,4,1,4,94.2,12.5\n";
  v::CsvReadStats st;
  const auto ps = v::read_silicon_csv(f, &st);
  EXPECT_EQ(st.layout_from_id, 1);
  EXPECT_EQ(st.layout_from_pattern, 1);
  const auto& a = by_id(ps, "x_agg_1024x1024_c4_tp4_ep4_1357");
  EXPECT_EQ(a.tp, 4);
  EXPECT_EQ(a.attention_dp, 1);
  EXPECT_EQ(a.moe_ep, 4);
  EXPECT_NE(a.layout_note.find("id names TP4 EP4; columns TP4 DP4 EP16"), std::string::npos) << a.layout_note;
  // No layout in the id, the columns' pattern (TP t, DP t, EP t x t): run as TP t EP t too.
  const auto& b = by_id(ps, "x_agg_8192x1024_c4_cfg691");
  EXPECT_EQ(b.attention_dp, 1);
  EXPECT_EQ(b.moe_ep, 4);
  EXPECT_NE(b.layout_note.find("columns TP4 DP4 EP16, the pattern of the rows whose id names TP4 EP4"), std::string::npos)
      << b.layout_note;
  EXPECT_TRUE(by_id(ps, "x_agg_1024x1024_c8_tp4_ep4_1344").layout_note.empty());  // columns agree
  // Attention DP of another shape (DP 8 over TP 1, EP 8: DeepSeek-style) is run as the columns say.
  const auto g = (dir / "dep.csv").string();
  std::ofstream(g) << "id,silicon_data_source,backend,model_path,system,mode,isl,osl,tp_size,attention_dp_size,moe_ep_size,"
                      "silicon_ttft_ms,silicon_tpot_ms\n"
                      "x_agg_1024x1024_c64_cfg9,silicon_concurrency=64,vllm,m,h100_sxm,agg,1024,1024,1,8,8,120,20\n"
                      "x_agg_1024x1024_c64_cfg10,silicon_concurrency=64,vllm,m,h100_sxm,agg,1024,1024,2,2,8,120,20\n";
  v::CsvReadStats st2;
  for (const auto& p : v::read_silicon_csv(g, &st2)) {
    EXPECT_GT(p.attention_dp, 1) << p.id;
    EXPECT_TRUE(p.layout_note.empty()) << p.id;
  }
  EXPECT_EQ(st2.layout_from_pattern, 0);
}

// Rows whose columns give TP e x e with MoE TP e x EP e (no attention DP) run TP e EP e: in the
// calibration CSV every such row with a twin (the same TTFT and TPOT to the last digit) shares them
// with a TP e EP e row of another dump. A twin pair merges into one TP4 EP4 point (merged 2, one
// run); a lone TP64 MoE TP8 x EP8 row runs TP8 EP8; MoE TP 2 x EP 4 under TP 8 is no such grid.
TEST(Validate, CsvMoeGridColumnsRunTpEp) {
  v::CsvReadStats st;
  const auto ps = read_csv_text("moe_grid",
                                "id,silicon_data_source,backend,model_path,system,mode,isl,osl,tp_size,attention_dp_size,moe_tp_size,"
                                "moe_ep_size,silicon_ttft_ms,silicon_tpot_ms\n"
                                "a_c64_tp4_ep4_1011,silicon_concurrency=64,sglang,m,b200_sxm,agg,8192,1024,16,1,4,4,1584.01,31.042\n"
                                "b_c64_tp4_0_ep4_0_267,silicon_concurrency=64,sglang,m,b200_sxm,agg,8192,1024,4,1,1,4,1584.01,31.042\n"
                                "c_c8_cfg201,silicon_concurrency=8,sglang,m,b200_sxm,agg,1024,1024,64,1,8,8,203.7,9.2\n"
                                "d_c8_cfg7,silicon_concurrency=8,trtllm,m,b200_sxm,agg,1024,1024,8,1,2,4,210,9.5\n", &st);
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(st.layout_from_moe_grid, 2);
  const auto& a = by_id(ps, "a_c64_tp4_ep4_1011");
  EXPECT_EQ(a.merged, 2);
  EXPECT_EQ(a.runs, 1);
  EXPECT_EQ(a.tp, 4);
  EXPECT_EQ(a.moe_tp, 1);
  EXPECT_EQ(a.moe_ep, 4);
  EXPECT_NE(a.layout_note.find("TP4 EP4 is run"), std::string::npos) << a.layout_note;
  const auto& c = by_id(ps, "c_c8_cfg201");
  EXPECT_EQ(c.tp, 8);
  EXPECT_EQ(c.moe_ep, 8);
  const auto& d = by_id(ps, "d_c8_cfg7");
  EXPECT_EQ(d.tp, 8);
  EXPECT_EQ(d.moe_tp, 2);
  EXPECT_TRUE(d.layout_note.empty());
}

// The same grid under attention DP (TensorRT-LLM): TP 1, DP e x e, MoE TP e x EP e is DP e EP e,
// its batch_size a rank's share of e x e ranks. A twin pair (DP64 grid at batch 1, DP8 EP8 at batch
// 8, 64 clients, the same figures) merges into one DP8 EP8 point; a lone DP16 MoE TP4 x EP4 row at
// batch = clients runs DP4 EP4 and keeps its batch; DP4 with MoE TP2 x EP4 is no grid (TP x EP).
TEST(Validate, CsvMoeGridUnderAttentionDpRunsDpEp) {
  v::CsvReadStats st;
  const auto ps = read_csv_text("dp_grid",
                                "id,silicon_data_source,backend,model_path,system,mode,isl,osl,batch_size,tp_size,attention_dp_size,"
                                "moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms\n"
                                "a_c64_tp8_ep8_937,silicon_concurrency=64,trtllm,m,b200_sxm,agg,1024,1024,1,1,64,8,8,1085.456,12.2894\n"
                                "b_c64_tp1_8_ep8_1619,silicon_concurrency=64,trtllm,m,b200_sxm,agg,1024,1024,8,1,8,1,8,1085.456,12.2894\n"
                                "c_c32_cfg5,silicon_concurrency=32,trtllm,m,b200_sxm,agg,1024,1024,32,1,16,4,4,300,9\n"
                                "d_c32_cfg6,silicon_concurrency=32,trtllm,m,b200_sxm,agg,1024,1024,8,1,4,2,4,300,9\n", &st);
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(st.layout_from_moe_grid, 2);
  const auto& a = by_id(ps, "a_c64_tp8_ep8_937");
  EXPECT_EQ(a.merged, 2);
  EXPECT_EQ(a.runs, 1);
  EXPECT_EQ(a.attention_dp, 8);
  EXPECT_EQ(a.batch_size, 8);
  EXPECT_EQ(a.moe_tp, 1);
  EXPECT_EQ(a.moe_ep, 8);
  const auto& c = by_id(ps, "c_c32_cfg5");
  EXPECT_EQ(c.attention_dp, 4);
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_NE(c.layout_note.find("DP4 EP4 is run"), std::string::npos) << c.layout_note;
  const auto& d = by_id(ps, "d_c32_cfg6");
  EXPECT_EQ(d.attention_dp, 4);
  EXPECT_EQ(d.moe_tp, 2);
  EXPECT_TRUE(d.layout_note.empty());
}

TEST(Validate, CsvErrorsNameTheLine) {
  const auto dir = std::filesystem::temp_directory_path() / "servesim_validate_bad";
  std::filesystem::create_directories(dir);
  const auto f = (dir / "bad.csv").string();
  std::ofstream(f) << "id,silicon_data_source,backend,model_path,system,mode,isl,osl,silicon_ttft_ms,silicon_tpot_ms\n"
                      "a,silicon_concurrency=4,vllm,m,h200_sxm,agg,1024,1024,-3,5\n";
  try {
    v::read_silicon_csv(f);
    FAIL() << "accepted a negative TTFT";
  } catch (const servesim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2: silicon_ttft_ms"), std::string::npos) << e.what();
  }
  std::ofstream(f) << "id,backend\na,vllm\n";
  EXPECT_THROW(v::read_silicon_csv(f), servesim::Error);
}

TEST(Validate, ErrorArithmetic) {
  EXPECT_DOUBLE_EQ(v::signed_error(120, 100), 0.2);
  EXPECT_DOUBLE_EQ(v::signed_error(80, 100), -0.2);
  EXPECT_TRUE(std::isnan(v::signed_error(80, 0)));
  const auto s = v::error_stats({0.1, -0.3, 0.2, NAN});
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.median_signed, 0.1);
  EXPECT_DOUBLE_EQ(s.median_abs, 0.2);
  EXPECT_NEAR(s.p90_abs, 0.28, 1e-12);   // |e| sorted 0.1, 0.2, 0.3: rank 0.9 x 2 = 1.8
}

TEST(Validate, LoadRegimes) {
  EXPECT_EQ(v::load_regime(16, 256), "light");
  EXPECT_EQ(v::load_regime(17, 256), "medium");
  EXPECT_EQ(v::load_regime(128, 256), "medium");
  EXPECT_EQ(v::load_regime(200, 256), "heavy");
  EXPECT_EQ(v::load_regime(300, 256), "saturated");
}

TEST(Validate, EveryUnmodellablePointSaysWhy) {
  v::Options o;
  add_llama(o);
  o.threads = 2;
  const v::Report r = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  ASSERT_EQ(r.points.size(), 14u);
  const std::map<std::string, std::string> why{
      {"llama8b_h200_vllm_agg_2000x100_c_tp4_x", "no concurrency recorded"},
      {"unknown_h200_vllm_agg_1024x1024_c8_tp1_a", "model acme/NotInCatalogue-1B not in the catalogue"},
      {"llama8b_h200_vllm_disagg_1024x1024_c8_noworkers", "without prefill/decode worker counts"},
      {"llama8b_a100_vllm_agg_1024x1024_c8_tp1", "GPU 'a100_sxm' not in the catalogue"},
      {"llama8b_h200_vllm_agg_1024x1024_c8_tp3", "does not divide the 32 attention heads"},
      {"llama8b_h200_vllm_agg_1024x1024_c8_mixed", "mixed quantization"},
      {"llama8b_h200_vllm_agg_1024x1024_c8_ep3tp4", "MoE expert parallel size 3 with TP 4 not modelled (it does not divide"},
      {"llama8b_h200_vllm_mixed_1024x1024_c8", "mode 'epd' unknown"}};
  int ran = 0;
  for (const auto& p : r.points) {
    auto it = why.find(p.measured.id);
    if (it == why.end()) {
      EXPECT_EQ(p.unmodellable, "") << p.measured.id;
      ++ran;
    } else {
      EXPECT_NE(p.unmodellable.find(it->second), std::string::npos) << p.measured.id << ": " << p.unmodellable;
    }
  }
  EXPECT_EQ(ran, 6);  // the int4_wo row runs W4A16 (INT4 group-32 weights, Marlin); dense DP2 runs as 2 replicas;
                      // the trtllm row runs on the trtllm profile
  // The trtllm point runs on its own engine by default, and with --engine-any on the vLLM engine.
  o.backends = {"trtllm"};
  const v::Report own = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  ASSERT_EQ(own.points.size(), 1u);
  EXPECT_EQ(own.points[0].unmodellable, "");
  EXPECT_EQ(own.points[0].scenario["engine_profile"], "trtllm-1.0");   // its 1.0.0rc3 release
  o.engine_any = true;
  const v::Report t = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  ASSERT_EQ(t.points.size(), 1u);
  EXPECT_EQ(t.filtered_out, 13);
  EXPECT_EQ(t.points[0].unmodellable, "");
  EXPECT_FALSE(t.points[0].scenario.contains("engine_profile"));   // the newest vLLM
  EXPECT_EQ(t.points[0].scenario["precision"], "bf16");   // blank precision, BF16 checkpoint
}

TEST(Validate, ErrorsAreSignedRelativeToTheMeasurement) {
  v::Options o = llama_h200();
  const v::Report r = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  const auto& p = result(r, "llama8b_h200_vllm_agg_2000x100_c64_tp1_a");
  ASSERT_EQ(p.unmodellable, "");
  EXPECT_EQ(p.model, "llama-3.1-8b");
  EXPECT_EQ(p.gpu, "h200");
  EXPECT_EQ(p.scenario["workload"]["requests"], 640);        // 64 clients x 10
  EXPECT_EQ(p.scenario["workload"]["warmup_requests"], 128); // 64 clients x 2
  EXPECT_EQ(p.regime, "medium");
  EXPECT_DOUBLE_EQ(p.ttft_err, (p.ttft_ms - 121.73) / 121.73);
  EXPECT_DOUBLE_EQ(p.itl_err, (p.itl_ms - 9.74) / 9.74);
  // Throughput on both sides by Little's law: C x OSL / (TTFT + (OSL - 1) x ITL).
  EXPECT_NEAR(p.output_tps, 6400 / ((p.ttft_ms + 99 * p.itl_ms) / 1e3), 1e-9);
  EXPECT_DOUBLE_EQ(p.tps_err, (p.output_tps - p.measured.output_tps) / p.measured.output_tps);
  // Decode of 64 sequences of an 8B model on one H200 takes milliseconds per token, not seconds.
  EXPECT_GT(p.itl_ms, 2);
  EXPECT_LT(p.itl_ms, 60);
  // The one rerun point: its spread between runs beside servesim's error on it.
  const nlohmann::json j = v::to_json(r, o);
  ASSERT_TRUE(j.contains("reruns"));
  EXPECT_EQ(j["reruns"]["points"], 1);
  EXPECT_NEAR(j["reruns"]["ttft_spread"]["median_pct"].get<double>(), 100 * 30.0 / 121.73, 1e-9);
  EXPECT_NEAR(j["reruns"]["ttft_error"]["median_abs_pct"].get<double>(), 100 * std::abs(p.ttft_err), 1e-9);
  EXPECT_NE(v::to_text(r, o).find("Reruns: 1 simulated point was measured in 2+ runs"), std::string::npos);

  // Identical at any thread count.
  o.threads = 3;
  const v::Report r3 = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  ASSERT_EQ(r.points.size(), r3.points.size());
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    EXPECT_EQ(r.points[i].unmodellable, r3.points[i].unmodellable);
    if (r.points[i].unmodellable.empty()) {
      EXPECT_EQ(r.points[i].ttft_ms, r3.points[i].ttft_ms);
      EXPECT_EQ(r.points[i].itl_ms, r3.points[i].itl_ms);
    }
  }
}

TEST(Validate, AiperfFolderRoundTripIsExact) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "servesim_validate_roundtrip";
  fs::remove_all(dir);
  const std::string scenario = R"({"model": "nemotron-3-nano", "gpu": "h100", "gpus": 1, "tp": 1, "precision": "fp8",
    "workload": {"concurrency": 4, "requests": 24, "warmup_requests": 4, "isl": 1000, "osl": 60}, "seed": 3})";
  const Scenario s = servesim::sim::parse_scenario(scenario, "roundtrip");
  const auto run = servesim::sim::simulate(s, true);
  run.metrics.export_dir((dir / "a").string());
  // The same run with a sidecar instead of input_config (the aiperf JSON of a real run has none).
  run.metrics.export_dir((dir / "b").string());
  std::ofstream((dir / "b" / "servesim_run.json").string())
      << R"({"model": "nemotron-3-nano", "gpu": "h100", "tp": 1, "gpus": 1, "precision": "fp8", "seed": 3,
            "isl": 1000, "osl": 60, "concurrency": 4})";
  for (const char* sub : {"a", "b"}) {
    v::MeasuredPoint m = v::read_aiperf_dir((dir / sub).string());
    EXPECT_EQ(m.concurrency, 4);
    EXPECT_EQ(m.scenario["workload"]["requests"], 24);        // from profile_export.jsonl
    EXPECT_EQ(m.scenario["workload"]["warmup_requests"], 4);
    EXPECT_DOUBLE_EQ(m.ttft_ms, run.summary.ttft_ms.avg);
    EXPECT_DOUBLE_EQ(m.output_tps, run.summary.output_token_throughput_per_s);
    const v::Report r = v::run({m}, v::Options{});
    ASSERT_EQ(r.points.size(), 1u);
    ASSERT_EQ(r.points[0].unmodellable, "") << sub;
    EXPECT_NEAR(r.points[0].ttft_err, 0, 1e-9) << sub;
    EXPECT_NEAR(r.points[0].itl_err, 0, 1e-9) << sub;
    EXPECT_NEAR(r.points[0].tps_err, 0, 1e-9) << sub;
  }
  // A folder without the run's setup says what is missing.
  fs::create_directories(dir / "c");
  std::ofstream((dir / "c" / "profile_export_aiperf.json").string())
      << R"({"time_to_first_token": {"unit": "ms", "avg": 50}, "input_config": {"loadgen": {"concurrency": 2}}})";
  try {
    v::read_aiperf_dir((dir / "c").string());
    FAIL();
  } catch (const servesim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("servesim_run.json"), std::string::npos) << e.what();
  }
}

// An aiperf run whose requests drew their lengths (--synthetic-input-tokens-stddev, a dataset) is
// validated with the lengths its measured requests had, not their means.
TEST(Validate, AiperfFolderOfVaryingLengthsRunsThem) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "servesim_validate_lengths";
  fs::remove_all(dir);
  const Scenario s = servesim::sim::parse_scenario(R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 1, "tp": 1, "seed": 4,
    "workload": {"concurrency": 4, "requests": 200, "warmup_requests": 8, "isl": {"kind": "uniform", "min": 500, "max": 3500},
                 "osl": {"kind": "uniform", "min": 20, "max": 180}}})", "lengths");
  const auto run = servesim::sim::simulate(s, true);
  run.metrics.export_dir(dir.string());
  std::ofstream((dir / "servesim_run.json").string()) << R"({"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "seed": 4, "concurrency": 4})";
  const v::MeasuredPoint m = v::read_aiperf_dir(dir.string());
  const auto& isl = m.scenario["workload"]["isl"];
  ASSERT_EQ(isl["kind"], "empirical") << isl.dump();
  ASSERT_EQ(isl["values"].size(), 200u);   // every measured request's, sorted
  double sum = 0;
  for (const auto& x : isl["values"]) sum += x.get<double>();
  EXPECT_DOUBLE_EQ(sum / 200, run.summary.input_sequence_length.avg);
  EXPECT_EQ(m.isl, std::llround(run.summary.input_sequence_length.avg));
  EXPECT_GE(isl["values"].front().get<int>(), 500);
  EXPECT_LE(isl["values"].back().get<int>(), 3500);
  EXPECT_EQ(m.scenario["workload"]["osl"]["kind"], "empirical");
  // Re-drawn from the measured lengths, the run comes back within a few % (a new draw of 200).
  const v::Report r = v::run({m}, v::Options{});
  ASSERT_EQ(r.points[0].unmodellable, "");
  EXPECT_LT(std::abs(r.points[0].ttft_err), 0.08) << r.points[0].ttft_ms << " vs " << m.ttft_ms;
  EXPECT_LT(std::abs(r.points[0].itl_err), 0.05) << r.points[0].itl_ms << " vs " << m.tpot_ms;
  // The sidecar's lengths win (a run whose records do not say them).
  std::ofstream((dir / "servesim_run.json").string()) << R"({"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "concurrency": 4, "isl": 2000, "osl": 100})";
  EXPECT_EQ(v::read_aiperf_dir(dir.string()).scenario["workload"]["isl"], 2000);
}

// A run's lengths as a workload names them: one number when all are one, else at most 1,024 quantiles.
TEST(Validate, MeasuredLengthsKeepTheirQuantiles) {
  EXPECT_EQ(v::measured_lengths({7, 7, 7}), 7);
  EXPECT_TRUE(v::measured_lengths({}).is_null());
  EXPECT_EQ(v::measured_lengths({30, 10, 20})["values"], nlohmann::json({10, 20, 30}));
  std::vector<std::int64_t> many(4096);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = std::int64_t(i) + 1;   // 1..4096
  const auto q = v::measured_lengths(many)["values"];
  ASSERT_EQ(q.size(), 1024u);
  EXPECT_EQ(q[0], 3);   // rank (0 + 1/2) x 4096 / 1024 = 2: the third value
  EXPECT_EQ(q[1023], 4095);
}

TEST(ValidateBands, BandIsThePredictionTimesTheRatioPercentiles) {
  // Residuals measured / predicted on one GPU: 10 medium-load aggregated ITL points with ratios
  // 0.5..1.4, and 8 disaggregated ones measured at 3x the prediction.
  std::vector<v::Residual> res;
  for (int i = 0; i < 10; ++i) res.push_back({"H200", "vllm", "agg", "itl", "medium", 50.0 + 10.0 * i, 100.0});
  res.push_back({"h200", "vllm", "agg", "itl", "light", 90.0, 100.0});   // one light point: too thin alone
  for (int i = 0; i < 8; ++i) res.push_back({"h200", "vllm", "disagg", "itl", "medium", 300.0, 100.0});
  const v::BandTable t = v::make_bands(res, 8, {{"summary", "test"}});
  ASSERT_EQ(t.cells.size(), 5u);   // h200 agg itl: all (11), light (1), medium (10); disagg: all, medium (8)
  // Ratios 0.5, 0.6, ..., 1.4: numpy percentile 10 = 0.5 + 0.9 x 0.1 = 0.59, 90 = 1.31.
  const v::Band m = v::band_for(t, "h200", "agg", "itl", "medium", 20.0);
  ASSERT_TRUE(m.present);
  EXPECT_EQ(m.regime, "medium");
  EXPECT_EQ(m.n, 10);
  EXPECT_NEAR(m.lo, 20.0 * 0.59, 1e-9);
  EXPECT_NEAR(m.hi, 20.0 * 1.31, 1e-9);
  EXPECT_EQ(v::band_text(m, 1), "(band 11.8-26.2)");
  const v::Band l = v::band_for(t, "h200", "agg", "itl", "light", 20.0);   // thin: the GPU's band over all loads
  ASSERT_TRUE(l.present);
  EXPECT_EQ(l.regime, "all");
  EXPECT_EQ(l.n, 11);
  // A GPU or engine no run validated takes the widest validated band of its mode and says so: here
  // the only one, H200's over all loads (ratios 0.5..1.4 and 0.9: p10 0.6, p90 1.3).
  for (const auto& [gpu, engine] : {std::pair<const char*, const char*>{"b300", "vllm"}, {"h200", "sglang"}}) {
    const v::Band w = v::band_for(t, gpu, engine, "agg", "itl", "medium", 20.0);
    ASSERT_TRUE(w.present);
    EXPECT_TRUE(w.widened);
    EXPECT_EQ(w.n, 11);
    EXPECT_NEAR(w.lo, 20.0 * l.ratio_lo, 1e-9);
    EXPECT_NEAR(w.hi, 20.0 * l.ratio_hi, 1e-9);
    EXPECT_NE(w.note.find("widened"), std::string::npos) << w.note;
    EXPECT_NE(v::band_text(w, 1).find("not validated"), std::string::npos);
  }
  EXPECT_FALSE(v::band_for(t, "h200", "agg", "ttft", "medium", 20.0).present);   // no TTFT measured anywhere
  // A disaggregated point takes the disaggregated runs' band, 3x its prediction, never the
  // aggregated one; where none were measured it has none.
  const v::Band d = v::band_for(t, "h200", "disagg", "itl", "medium", 20.0);
  ASSERT_TRUE(d.present);
  EXPECT_EQ(d.n, 8);
  EXPECT_NEAR(d.lo, 60.0, 1e-9);
  EXPECT_NEAR(d.hi, 60.0, 1e-9);
  const v::Band dl = v::band_for(t, "h200", "disagg", "itl", "light", 20.0);   // the disaggregated runs of all loads
  ASSERT_TRUE(dl.present);
  EXPECT_EQ(dl.regime, "all");
  EXPECT_NEAR(dl.hi, 60.0, 1e-9);
  const v::Band dn = v::band_for(t, "b300", "disagg", "itl", "medium", 20.0);   // widened from the disaggregated runs only
  ASSERT_TRUE(dn.present);
  EXPECT_TRUE(dn.widened);
  EXPECT_NEAR(dn.hi, 60.0, 1e-9);
  std::vector<v::Residual> agg_only(res.begin(), res.begin() + 11);
  const v::Band dnone = v::band_for(v::make_bands(agg_only, 8, {}), "h200", "disagg", "itl", "medium", 20.0);
  EXPECT_FALSE(dnone.present);
  EXPECT_EQ(dnone.note, "no band: no measured disaggregated runs of this kind");
  // Wider percentiles: 5 and 95 of 0.5..1.4 are 0.545 and 1.355; the table keeps them.
  const v::BandTable wide = v::make_bands(res, 8, {}, 5, 95);
  EXPECT_NEAR(v::band_for(wide, "h200", "agg", "itl", "medium", 20.0).lo, 20.0 * 0.545, 1e-9);
  const v::BandTable wide_back = v::parse_bands(v::to_json(wide), "wide.json");
  EXPECT_EQ(wide_back.lo_pct, 5);
  EXPECT_EQ(wide_back.hi_pct, 95);
  EXPECT_NEAR(v::band_for(wide_back, "h200", "agg", "itl", "medium", 20.0).hi, 20.0 * 1.355, 1e-9);
  // The table survives its JSON layout; a table without modes (written before them) is aggregated.
  const v::BandTable back = v::parse_bands(v::to_json(t), "bands.json");
  EXPECT_EQ(back.cells.size(), 5u);
  EXPECT_NEAR(v::band_for(back, "h200", "agg", "itl", "medium", 20.0).hi, 20.0 * 1.31, 1e-9);
  EXPECT_NEAR(v::band_for(back, "h200", "disagg", "itl", "medium", 20.0).hi, 60.0, 1e-9);
  nlohmann::json old = v::to_json(t);
  nlohmann::json agg_cells = nlohmann::json::array();
  for (auto c : old["cells"])
    if (c["mode"] == "agg") c.erase("mode"), agg_cells.push_back(c);
  old["cells"] = agg_cells;
  const v::BandTable legacy = v::parse_bands(old, "old.json");
  EXPECT_NEAR(v::band_for(legacy, "h200", "agg", "itl", "medium", 20.0).hi, 20.0 * 1.31, 1e-9);
  EXPECT_FALSE(v::band_for(legacy, "h200", "disagg", "itl", "medium", 20.0).present);
  old["cells"][0]["mode"] = "both";
  EXPECT_THROW(v::parse_bands(old, "bad.json"), servesim::Error);
}

// A run's kind of point: a deployment on a named instance is that instance's GPU (the scenario's
// default "gpu" notwithstanding), disaggregated, with its clients per decode worker: 16 over 4 is light.
TEST(ValidateBands, RunKindOfADisaggregatedDeploymentOnAnInstance) {
  const servesim::sim::Scenario s = servesim::sim::parse_scenario(
      R"({"model": "kimi-k2.5", "topology": {"kind": "disagg", "instance": "p6e-gb200.36xlarge", "prefill_workers": 1,
          "decode_workers": 4}, "workload": {"concurrency": 16, "isl": 1024, "osl": 1024}})",
      "kind.json");
  servesim::sim::SimResult r;
  r.disaggregated = true;
  const v::RunKind k = v::run_kind(s, r);
  EXPECT_EQ(k.gpu, "gb200");
  EXPECT_EQ(k.mode, "disagg");
  EXPECT_DOUBLE_EQ(k.clients_per_replica, 4.0);
  EXPECT_EQ(k.regime, "light");
}

// A run's engine is the one it ran: a scenario naming SGLang's or TensorRT-LLM's profile reads that
// engine's bands (it read vLLM's, the scenario's engine config holding no profile name of its own).
TEST(ValidateBands, RunKindIsTheEngineTheRunRan) {
  for (const auto& [profile, engine] : {std::pair<std::string, std::string>{"sglang-0.5.6", "sglang"}, {"trtllm-1.3", "trtllm"},
                                        {"vllm-0.14", "vllm"}}) {
    const servesim::sim::Scenario s = servesim::sim::parse_scenario(
        R"({"model": "llama-3.1-8b", "gpu": "h200", "engine_profile": ")" + profile +
            R"(", "workload": {"concurrency": 16, "isl": 1024, "osl": 128}})",
        "kind.json");
    servesim::sim::SimResult r;
    EXPECT_EQ(v::run_kind(s, r).engine, engine) << profile;
    r.engine.engine_profile = profile;   // as a run records it
    EXPECT_EQ(v::run_kind(s, r).engine, engine) << profile;
  }
}

// A closed loop of C clients must prefill C x ISL prompt tokens in every cycle of
// TTFT + (OSL-1) x TPOT. The 2000/100 point at 64 clients on one H200 measured a 1.086 s cycle;
// prefilling 128,000 tokens of Llama-3.1-8B needs at least 2 x 6.98e9 matmul FLOP per token, i.e.
// 128,000 x 13.96e9 / 1979e12 FP8 FLOP/s = 0.90 s at the datasheet peak and 1.46 s at the 1.22
// PFLOP/s the H200's FP8 GEMMs reach at 16,384 tokens (hwmodels/measure/results/
// h200_prefill_forward.json): the point is flagged, kept in the tables, left out of the bands.
TEST(Validate, PointsFasterThanTheirPrefillFloorAreFlagged) {
  v::Options o = llama_h200();
  const v::Report r = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  const auto& p = result(r, "llama8b_h200_vllm_agg_2000x100_c64_tp1_a");
  ASSERT_EQ(p.unmodellable, "");
  EXPECT_NEAR(p.measured_cycle_s, (121.73 + 99 * 9.74) / 1e3, 1e-12);
  const double per_token = p.prefill_floor_s / (64.0 * 2000.0);
  const double matmul_flop = 2 * (32.0 * (4096.0 * 6144 + 4096.0 * 4096 + 3 * 4096.0 * 14336));
  EXPECT_GT(per_token, matmul_flop / 1979e12);        // never faster than the datasheet peak
  EXPECT_LT(per_token, 2.0 * matmul_flop / 1.2e15);   // and within 2x of the measured GEMM rate
  EXPECT_TRUE(p.below_floor());
  EXPECT_FALSE(p.ttft_err != p.ttft_err);             // still compared (not dropped)
  int kept = 0;
  for (const auto& pt : r.points) kept += pt.unmodellable.empty() && !pt.inconsistent();
  const v::BandTable b = v::bands_of(r, 1, nlohmann::json::object());
  for (const auto& c : b.cells)
    if (c.regime == "all" && c.metric == "itl") {
      EXPECT_EQ(c.n, kept);   // one H200 cell: flagged points left out
    }
}

// Decode has a floor too: Little's law puts C x (OSL-1) x TPOT / cycle of the clients in decode,
// and a step of that many sequences streams at least the weights once. A made-up Llama-3.1-8B FP8
// point on one H200 at 64 clients, 1024 + 1024 tokens, TTFT 50 ms and TPOT 1 ms: 64 x 1.023 /
// 1.073 = 61.0 -> 61 sequences decode a step, which streams at least the FP8 weights and the KV
// once (2.31 ms at 4.8 TB/s, below): the 1 ms TPOT is flagged, kept in the tables, left out of the
// bands. The real 2000/100 point above decodes at a TPOT over its floor.
TEST(Validate, PointsFasterThanTheirDecodeFloorAreFlagged) {
  const std::string csv = ::testing::TempDir() + "decode_floor.csv";
  {
    std::ifstream in(data("validate_sample.csv"));
    std::string header;
    std::getline(in, header);
    std::ofstream out(csv);
    out << header << "\n"
        << "llama8b_h200_fast,source_file=made-up.csv; silicon_concurrency=64,vllm,0.19.0,nvidia/Llama-3.1-8B-Instruct-FP8,"
           "h200_sxm,fp8,agg,1024,1024,fp8,fp8,64,1,1,,1,1,,,,,,,,,,,,,,,50,1\n";
  }
  v::Options o;
  add_llama(o);
  o.threads = 1;
  const v::Report r = v::run(v::read_silicon_csv(csv), o);
  const auto& p = result(r, "llama8b_h200_fast");
  ASSERT_EQ(p.unmodellable, "");
  EXPECT_EQ(p.decoding, 61);
  // At least the 6.98e9 matmul weights (FP8, 1 byte) and the FP8 KV of 61 x 1,024 tokens (32 layers x
  // 8 KV heads x 128 x K and V = 64 KiB a token) at the datasheet 4.8 TB/s: 2.31 ms; the LM head in
  // BF16, norms and activations add the rest.
  const double by_hand = (6.98e9 + 61.0 * 1024 * 65536) / 4.8e12;
  EXPECT_GT(p.decode_floor_s, by_hand);
  EXPECT_LT(p.decode_floor_s, 1.2 * by_hand);
  EXPECT_TRUE(p.below_decode_floor());
  EXPECT_TRUE(p.inconsistent());
  EXPECT_FALSE(p.below_floor());
  EXPECT_TRUE(v::bands_of(r, 1, nlohmann::json::object()).cells.empty());   // its only point left out
  // The fixture's real 2000/100 point at 64 clients measured 9.74 ms, well over its floor.
  o.models = {"llama"};
  o.gpus = {"h200"};
  const v::Report real = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  const auto& q = result(real, "llama8b_h200_vllm_agg_2000x100_c64_tp1_a");
  EXPECT_LT(q.decode_floor_s, 9.74e-3);
  EXPECT_FALSE(q.below_decode_floor());
}

// A point whose engine never ran its clients: by Little's law a closed loop of 512 clients with a
// 22.3 s TTFT and a 5.33 ms TPOT over 1,024 output tokens has 512 x 1,023 x 5.33 ms / (22.3 s +
// 1,023 x 5.33 ms) = 512 x 5.4526 / 27.7526 = 100.6 sequences in decode, while gpt-oss-120b on
// eight H100s runs all 512 at once (max_num_seqs 1,024; 2,048-token requests in a KV pool of
// thousands): 100.6 < 0.5 x 512, flagged, kept in the tables, left out of the bands. The same
// point with a 131 ms TTFT has 512 x 5.4526 / 5.5836 = 500.0 in decode: not flagged.
TEST(Validate, PointsWithFewerThanHalfTheirClientsInFlightAreFlagged) {
  // One file per point (rows equal but for their figures would merge into one point).
  auto point = [](const std::string& id, const std::string& ttft_ms) {
    const std::string csv = ::testing::TempDir() + "few_in_flight_" + id + ".csv";
    std::ifstream in(data("validate_sample.csv"));
    std::string header;
    std::getline(in, header);
    std::ofstream(csv) << header << "\n" << id
                       << ",source_file=made-up.csv; silicon_concurrency=512,vllm,0.11.2,openai/gpt-oss-120b,h100_sxm,fp4,"
                          "agg,1024,1024,nvfp4,nvfp4,512,8,1,1,8,1,,,,,,,,,,,,,,,"
                       << ttft_ms << ",5.33\n";
    return v::read_silicon_csv(csv).front();
  };
  v::Options o;
  o.threads = 1;
  o.requests_per_client = 1;
  o.warmup_per_client = 0;
  const v::Report r = v::run({point("gptoss_h100_held", "22300"), point("gptoss_h100_full", "131")}, o);
  const auto& held = result(r, "gptoss_h100_held");
  const auto& full = result(r, "gptoss_h100_full");
  ASSERT_EQ(held.unmodellable, "");
  ASSERT_EQ(full.unmodellable, "");
  const double decode_s = 1023 * 5.33e-3;
  EXPECT_NEAR(held.in_flight, 512 * decode_s / (22.3 + decode_s), 1e-9);
  EXPECT_NEAR(held.in_flight, 100.6, 0.05);
  EXPECT_NEAR(full.in_flight, 500.0, 0.05);
  EXPECT_EQ(held.runs_at_once, 512);
  EXPECT_EQ(full.runs_at_once, 512);
  EXPECT_TRUE(held.few_in_flight());
  EXPECT_TRUE(held.excluded());
  EXPECT_FALSE(full.few_in_flight());
  EXPECT_FALSE(full.excluded());
  EXPECT_TRUE(std::isfinite(held.ttft_err));   // still compared
  const v::BandTable b = v::bands_of(r, 1, nlohmann::json::object());
  int cells = 0;
  for (const auto& c : b.cells)
    if (c.regime == "all" && c.metric == "itl") {
      EXPECT_EQ(c.n, 1);   // only the full point
      ++cells;
    }
  EXPECT_EQ(cells, 1);
  const std::string text = v::to_text(r, o);
  EXPECT_NE(text.find("<half: 1 measured points"), std::string::npos);
  EXPECT_NE(text.find("Without them (0 <floor, 1 <half, 0 both)"), std::string::npos);
}

// Errors per engine release: the fixture's Llama-3.1-8B H200 rows name vLLM 0.12.0 and 0.16.0, and each
// release's group holds its own points, with the median |TTFT error| of those points (by hand: the
// middle of the sorted list, or the mean of the middle two); a row without a version is "unlabelled".
TEST(Validate, GroupsPerEngineRelease) {
  v::Options o = llama_h200();
  v::Report r = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  std::map<std::string, std::vector<double>> by_hand;   // release -> |TTFT error| of its ran points
  for (const auto& p : r.points)
    if (p.unmodellable.empty()) by_hand[p.measured.backend_version].push_back(std::abs(p.ttft_err));
  ASSERT_EQ(by_hand.size(), 2u);
  const nlohmann::json j = v::to_json(r, o);
  ASSERT_EQ(j["by_release"].size(), 2u);
  for (const auto& g : j["by_release"]) {
    EXPECT_EQ(g["engine"], "vllm");
    EXPECT_EQ(g["model"], "llama-3.1-8b");
    std::vector<double> e = by_hand.at(g["release"].get<std::string>());
    std::sort(e.begin(), e.end());
    const std::size_t n = e.size();
    EXPECT_EQ(g["points"].get<std::size_t>(), n);
    EXPECT_NEAR(g["ttft"]["median_abs_pct"].get<double>(), 100 * (n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2), 1e-9);
  }
  EXPECT_NE(v::to_text(r, o).find("Per engine release x model x GPU x mode"), std::string::npos);
  for (auto& p : r.points)
    if (p.unmodellable.empty() && p.measured.backend_version == "0.16.0") p.measured.backend_version.clear();
  const nlohmann::json relabelled = v::to_json(r, o);
  bool unlabelled = false;
  for (const auto& g : relabelled["by_release"]) unlabelled = unlabelled || g["release"] == "unlabelled";
  EXPECT_TRUE(unlabelled);
}

// --lock-fraction runs each closed-loop point twice more: with fixed answer lengths (the train) and
// with a 200-token spread (spread out), and places the measured and predicted TTFT between the two.
// The fixture's Llama-3.1-8B rows on vLLM 0.12 run a profile that keeps fixed lengths: their
// prediction is the train itself (f = 1) wherever the orbits differ; its 0.16 row spreads them.
TEST(Validate, LockFractionPlacesTheRunBetweenTheOrbits) {
  v::Options o = llama_h200();
  o.lock_fraction = true;
  const v::Report r = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  int placed = 0;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty()) continue;
    ASSERT_TRUE(std::isfinite(p.ttft_train_ms)) << p.measured.id;
    const bool fixed_lengths = p.measured.backend_version == "0.12.0";
    if (fixed_lengths) {
      EXPECT_DOUBLE_EQ(p.ttft_ms, p.ttft_train_ms) << p.measured.id;
    }
    if (!std::isfinite(p.lock_measured)) {
      EXPECT_LE(p.ttft_train_ms - p.ttft_spread_out_ms, v::kLockMinGap * p.ttft_spread_out_ms);
      continue;
    }
    ++placed;
    const double gap = p.ttft_train_ms - p.ttft_spread_out_ms;
    EXPECT_NEAR(p.lock_measured, (p.measured.ttft_ms - p.ttft_spread_out_ms) / gap, 1e-12);
    EXPECT_NEAR(p.lock_predicted, (p.ttft_ms - p.ttft_spread_out_ms) / gap, 1e-12);
    if (fixed_lengths) {
      EXPECT_DOUBLE_EQ(p.lock_predicted, 1.0);
    }
  }
  EXPECT_GT(placed, 0);
  // The medians per GPU x model x release, in the text beside the per-clients table.
  EXPECT_NE(v::to_text(r, o).find("Per GPU x model x engine release"), std::string::npos);
  // Without the option nothing more runs.
  o.lock_fraction = false;
  for (const auto& p : v::run(v::read_silicon_csv(data("validate_sample.csv")), o).points)
    EXPECT_FALSE(std::isfinite(p.ttft_train_ms));
}

// CSV points run with the engine flags of the harness that generated them (--harness aic):
// max_num_batched_tokens = per-rank batch + ISL + 1500, max_model_len = ISL + OSL + 1500, and an FP8
// KV cache for FP8 deployments on Blackwell; --harness serve leaves vllm serve's defaults (KV "auto"); a
// --scenario knob wins over the harness.
TEST(Validate, HarnessEngineFlags) {
  v::Options o = h200_agg();
  o.infer_resent_prompts = false;   // the generated flags on every point (re-sent prompts: the next test)
  o.gpus.push_back("b200");
  int checked = 0, blackwell = 0;
  for (const auto& p : run_sample(o)) {
    if (!p.unmodellable.empty()) continue;
    const auto& e = p.scenario.at("engine");
    const std::int64_t c = p.measured.concurrency, isl = p.measured.isl, osl = p.measured.osl;
    EXPECT_EQ(e.at("max_num_batched_tokens").get<std::int64_t>(), c + isl + 1500) << p.measured.id;
    EXPECT_EQ(e.at("max_model_len").get<std::int64_t>(), isl + osl + 1500) << p.measured.id;
    // vLLM points keep the profile's prefix caching (on for a decoder: a preempted request's
    // recompute re-uses its cached blocks, as the measured runs that preempt show); other engines off.
    if (p.measured.backend == "vllm") EXPECT_FALSE(e.contains("enable_prefix_caching")) << p.measured.id;
    else EXPECT_EQ(e.at("enable_prefix_caching").get<bool>(), false) << p.measured.id;
    // CUDA graphs at every batch size 1...per-rank batch, as an explicit list.
    const auto sizes = e.at("cudagraph_capture_sizes").get<std::vector<std::int64_t>>();
    ASSERT_EQ(std::int64_t(sizes.size()), c) << p.measured.id;
    for (std::size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], std::int64_t(i) + 1);
    EXPECT_FALSE(e.contains("max_cudagraph_capture_size"));
    if (p.scenario.at("precision") == "fp8" && p.scenario.at("gpu") == "b200")
      EXPECT_EQ(p.scenario.at("kv_cache_dtype"), "fp8") << p.measured.id;
    else  // H200 (Hopper: vLLM's "auto") and the INT4 weight-only point keep the checkpoint's
      EXPECT_FALSE(p.scenario.contains("kv_cache_dtype")) << p.measured.id;
    blackwell += p.scenario.at("gpu") == "b200";
    ++checked;
  }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(blackwell, 1);  // the B200 row (its columns' TP2 DP2 EP4 pattern runs TP2 EP2)
  {
    // A TRT-LLM point: graphs up to the batch by that engine's own size rule, not every size.
    v::Options t = h200_agg();
    t.gpus = {"h100"};
    t.backends = {"trtllm"};
    int trt = 0;
    for (const auto& p : run_sample(t)) {
      if (!p.unmodellable.empty()) continue;
      EXPECT_EQ(p.scenario.at("engine").at("max_cudagraph_capture_size"), p.measured.concurrency);
      EXPECT_FALSE(p.scenario.at("engine").contains("cudagraph_capture_sizes"));
      ++trt;
    }
    EXPECT_EQ(trt, 1);
  }
  o.harness = "serve";
  for (const auto& p : run_sample(o)) {
    if (p.unmodellable.empty()) {
      EXPECT_FALSE(p.scenario.contains("engine") && p.scenario["engine"].contains("max_num_batched_tokens"));
      EXPECT_FALSE(p.scenario.contains("kv_cache_dtype"));
    }
  }
  o.harness = "aic";
  // A harness with prefix caching and aiperf's 100-prompt dataset: both reach every point.
  o.base = {{"engine", {{"max_num_batched_tokens", 4096}, {"enable_prefix_caching", true}, {"max_cudagraph_capture_size", 8}}},
            {"kv_cache_dtype", "bf16"},
            {"workload", {{"dataset", {{"entries", 100}}}}}};
  for (const auto& p : run_sample(o)) {
    if (p.unmodellable.empty()) {
      EXPECT_EQ(p.scenario.at("engine").at("max_num_batched_tokens"), 4096);
      EXPECT_EQ(p.scenario.at("engine").at("enable_prefix_caching"), true);
      EXPECT_FALSE(p.scenario.at("engine").contains("cudagraph_capture_sizes"));   // the scenario's graph knob wins
      EXPECT_EQ(p.scenario.at("workload").at("dataset").at("entries"), 100);
      EXPECT_EQ(p.scenario.at("kv_cache_dtype"), "bf16") << p.measured.id;
    }
  }
}

// A run set (one dump's rows of one release, model and GPU) with a point whose measured cycle is
// shorter than prefilling its prompts can take, and whose TPOT is over its decode floor, served
// prompts from a prefix cache, which the generated flags switch off: every point of that set runs
// vllm serve's defaults with aiperf's 100 re-sent prompts. In the fixture, llama8b.csv's 2000/100
// point at 128 clients on TP4 measured a 1.022 s cycle (88.25 + 99 x 9.43 ms) against a 1.61 s
// floor, so the same set's 8000/100 point at 16 clients (1.985 s cycle, over its 1.49 s floor)
// re-sends its prompts too; dump-a.csv's 2000/100 point at 64 clients (1.086 s against 1.49 s) is a
// set of its own. The other dumps' points keep the generated flags.
TEST(Validate, RunSetWithCyclesBelowThePrefillFloorReSendsPrompts) {
  v::Options o = h200_agg();
  o.gpus.push_back("h100");
  const v::Report r = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  const auto& c128 = result(r, "llama8b_h200_vllm_agg_2000x100_c128_tp4_a");
  const auto& c16 = result(r, "llama8b_h200_vllm_agg_8000x100_c16_tp1_a");
  const auto& c64 = result(r, "llama8b_h200_vllm_agg_2000x100_c64_tp1_a");
  ASSERT_EQ(c128.unmodellable, "");
  ASSERT_EQ(c16.unmodellable, "");
  EXPECT_NEAR(c128.measured_cycle_s, (88.25 + 99 * 9.43) / 1e3, 1e-12);
  EXPECT_TRUE(v::resends_prompts(c128));
  EXPECT_FALSE(c16.below_floor());
  EXPECT_EQ(v::run_set_of(c16.measured), v::run_set_of(c128.measured));
  EXPECT_EQ(v::run_set_of(c64.measured), "dump-a.csv | vllm 0.12.0 | nvidia/Llama-3.1-8B-Instruct-FP8 | h200_sxm");
  for (const auto* p : {&c128, &c16, &c64}) {
    EXPECT_NE(p->harness_note, "") << p->measured.id;
    const nlohmann::json e = p->scenario.value("engine", nlohmann::json::object());
    EXPECT_FALSE(e.contains("max_num_batched_tokens")) << p->measured.id;   // serve's 8192
    EXPECT_FALSE(e.contains("enable_prefix_caching")) << p->measured.id;    // the profile's: on for a decoder
    EXPECT_EQ(p->scenario.at("workload").at("dataset").at("entries"), v::kAiperfDatasetEntries);
  }
  // Only a prefix cache finishes a cycle under the floor: the predictions do, as the runs did.
  for (const auto* p : {&c128, &c64}) EXPECT_LT((p->ttft_ms + 99 * p->itl_ms) / 1e3, p->prefill_floor_s) << p->measured.id;
  int kept = 0;
  for (const auto& p : r.points)
    if (p.unmodellable.empty() && p.harness_note.empty()) {
      EXPECT_EQ(p.scenario.at("engine").at("max_num_batched_tokens").get<std::int64_t>(),
                p.measured.concurrency + p.measured.isl + 1500) << p.measured.id;
      ++kept;
    }
  EXPECT_EQ(kept, 2);   // the TRT-LLM H100 point and the INT4 H200 point (dump x.csv)
  // Prefilling every prompt, no cycle is shorter than the floor; --no-resent-prompts runs that.
  o.infer_resent_prompts = false;
  const v::Report all = v::run(v::read_silicon_csv(data("validate_sample.csv")), o);
  const auto& f128 = result(all, "llama8b_h200_vllm_agg_2000x100_c128_tp4_a");
  EXPECT_EQ(f128.harness_note, "");
  EXPECT_GT((f128.ttft_ms + 99 * f128.itl_ms) / 1e3, f128.prefill_floor_s);
  // A scenario naming prefix caching or a dataset keeps it for every point.
  o.infer_resent_prompts = true;
  o.base = {{"workload", {{"dataset", {{"entries", 0}}}}}};
  for (const auto& p : v::run(v::read_silicon_csv(data("validate_sample.csv")), o).points) EXPECT_EQ(p.harness_note, "");
}

TEST(Validate, OslSpreadGivesCsvPointsANormalOutputLength) {
  v::Options o = h200_agg();
  int fixed = 0, spread = 0;
  for (const auto& p : run_sample(o))
    if (p.unmodellable.empty()) {
      EXPECT_EQ(p.scenario.at("workload").at("osl"), p.measured.osl);   // the harness's fixed length
      EXPECT_GE(p.behind_prefill, 0.0);   // a closed loop: its prompts' queueing is reported
      EXPECT_LE(p.behind_prefill, 1.0);
      ++fixed;
    }
  o.osl_spread_pct = 0.5;
  for (const auto& p : run_sample(o))
    if (p.unmodellable.empty()) {
      const auto& osl = p.scenario.at("workload").at("osl");
      EXPECT_EQ(osl.at("kind"), "normal");
      EXPECT_EQ(osl.at("mean"), p.measured.osl);
      EXPECT_DOUBLE_EQ(osl.at("stddev").get<double>(), 0.005 * double(p.measured.osl)) << p.measured.id;
      ++spread;
    }
  EXPECT_GT(fixed, 0);
  EXPECT_EQ(spread, fixed);
}

// Leave one model out on a synthetic cluster whose engine core spends exactly twice the profile's
// host time per scheduled request: measured = servesim's prediction at that factor. vLLM 0.12 runs
// synchronously, so that time adds to every step (10 us x 16 requests = 0.16 ms more TPOT at 16
// clients), and keeps fixed answer lengths (its spread is 0: every spread factor ties). Fitted on
// the other model alone, the fold recovers the factor 2 and predicts the left-out model with zero
// error; every grid combination was simulated once (3 x 3).
TEST(ValidateTransfer, LeaveOneModelOutRecoversTheClusterFactor) {
  const std::string csv = ::testing::TempDir() + "transfer.csv";
  const char* header =
      "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
      "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,prefill_num_workers,prefill_tp_size,"
      "prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,"
      "decode_tp_size,decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms\n";
  auto rows = [&](const std::vector<std::pair<double, double>>& figs) {
    std::ofstream f(csv);
    f << std::setprecision(17) << header;
    int k = 0;
    for (const auto& [model, tp] : {std::pair<const char*, int>{"meta-llama/Llama-3.1-8B-Instruct", 1}, {"Qwen/Qwen3-32B", 2}})
      for (int c : {4, 8, 16}) {
        const auto [ttft, tpot] = k < int(figs.size()) ? figs[k] : std::pair{100.0, 10.0};
        f << "m" << k++ << "_c" << c << "_,silicon_concurrency=" << c << ",vllm,0.12.0," << model << ",h200_sxm,bf16,agg,1024,128,,,"
          << c << "," << tp << ",1,,1,1,,,,,,,,,,,,,,," << ttft << "," << tpot << "\n";
      }
  };
  rows({});
  v::Options o;
  o.threads = 2;
  o.engine_scale = {{"step_overhead_us_per_seq", 2}, {"closed_loop_osl_spread_tokens", 1}};
  const v::Report truth = v::run(v::read_silicon_csv(csv), o);
  ASSERT_EQ(truth.points.size(), 6u);
  std::vector<std::pair<double, double>> figs;
  for (const auto& p : truth.points) {
    ASSERT_TRUE(p.unmodellable.empty()) << p.unmodellable;
    figs.push_back({p.ttft_ms, p.itl_ms});
  }
  rows(figs);   // the cluster measured exactly what factor 2 predicts
  o.engine_scale.clear();
  const v::TransferReport t = v::leave_one_out(v::read_silicon_csv(csv), o, v::GroupBy::model);
  EXPECT_EQ(t.candidates.size(), 9u);
  ASSERT_EQ(t.groups.size(), 2u);
  for (const auto& g : t.groups) {
    EXPECT_EQ(g.points, 3);
    ASSERT_EQ(g.out_values.size(), 2u);
    EXPECT_EQ(g.out_values[0], 2) << g.group;
    EXPECT_NEAR(g.out_of_fit.ttft.median_abs, 0, 1e-6) << g.group;
    EXPECT_NEAR(g.out_of_fit.tpot.median_abs, 0, 1e-6) << g.group;
  }
  // The out-of-fit report holds every point predicted with its fold's factor.
  ASSERT_EQ(t.out_of_fit.points.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(t.out_of_fit.points[i].ttft_ms, truth.points[i].ttft_ms);
  // The profile's own factor (1) predicts a TPOT shorter by about 16 x 10 us at 16 clients.
  const v::Report shipped = v::run(v::read_silicon_csv(csv), o);
  const auto& p16 = shipped.points[5];
  EXPECT_NEAR(p16.measured.tpot_ms - p16.itl_ms, 16 * 10e-3, 0.05) << p16.measured.tpot_ms << " " << p16.itl_ms;
}

// The silicon-sample CSV's columns, as the calibration file writes them.
const std::string kSiliconHeader =
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
    "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,prefill_num_workers,"
    "prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,"
    "decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,"
    "silicon_ttft_ms,silicon_tpot_ms\n";

// The engine parameters are refitted on the aggregated points of the other groups, as the profiles
// fitted them: disaggregated points, whose TTFT turns on handoffs and prefill queues these parameters
// do not hold, do not move the refit. The two models' aggregated runs measure what a host time per
// request 2x the profile's predicts; Llama-3.1-8B's disaggregated runs (1P1D, TP1 each, 64-256
// clients) what 0.5x predicts. Each model left out is predicted with 2x, and so exactly.
TEST(ValidateTransfer, RefitsOnTheAggregatedPointsAlone) {
  const std::string csv = ::testing::TempDir() + "transfer_modes.csv";
  auto rows = [&](const std::vector<std::pair<double, double>>& figs) {
    std::ofstream f(csv);
    f << std::setprecision(17) << kSiliconHeader;
    int k = 0;
    auto fig = [&] { return k < int(figs.size()) ? figs[std::size_t(k)] : std::pair{100.0, 10.0}; };
    for (const auto& [model, tp] : {std::pair<const char*, int>{"meta-llama/Llama-3.1-8B-Instruct", 1}, {"Qwen/Qwen3-32B", 2}})
      for (int c : {4, 8, 16}) {
        const auto [ttft, tpot] = fig();
        f << "m" << k++ << "_c" << c << "_,silicon_concurrency=" << c << ",vllm,0.19.0," << model << ",h200_sxm,bf16,agg,1024,128,,,"
          << c << "," << tp << ",1,,1,1,,,,,,,,,,,,,,," << ttft << "," << tpot << "\n";
      }
    for (int c : {64, 128, 256}) {
      const auto [ttft, tpot] = fig();
      f << "d" << k++ << "_c" << c << "_,silicon_concurrency=" << c
        << ",vllm,0.19.0,meta-llama/Llama-3.1-8B-Instruct,h200_sxm,bf16,disagg,1024,128,,,,,,,,,,1,1,1,1,1,1,,1,1,1,1,1,1," << ttft
        << "," << tpot << "\n";
    }
  };
  rows({});
  v::Options o;
  o.threads = 2;
  std::vector<std::pair<double, double>> figs;
  for (const double f : {2.0, 0.5}) {
    o.engine_scale = {{"step_overhead_us_per_seq", f}, {"closed_loop_osl_spread_tokens", 1}};
    const v::Report r = v::run(v::read_silicon_csv(csv), o);
    ASSERT_EQ(r.points.size(), 9u);
    for (std::size_t i = f == 2.0 ? 0 : 6; i < (f == 2.0 ? 6u : 9u); ++i) {
      ASSERT_TRUE(r.points[i].unmodellable.empty()) << r.points[i].unmodellable;
      figs.push_back({r.points[i].ttft_ms, r.points[i].itl_ms});
    }
  }
  rows(figs);
  o.engine_scale.clear();
  const v::TransferReport t = v::leave_one_out(v::read_silicon_csv(csv), o, v::GroupBy::model);
  ASSERT_EQ(t.groups.size(), 2u);
  for (const auto& g : t.groups) {
    ASSERT_EQ(g.out_values.size(), 2u);
    EXPECT_EQ(g.out_values[0], 2) << g.group;
    EXPECT_EQ(g.in_values[0], 2) << g.group;
  }
  for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(t.out_of_fit.points[i].ttft_err, 0, 1e-9) << i;
}

// A disaggregated row's roles run their own layout: TP x attention-DP GPUs a worker, its MoE
// layers by expert (EP = TP x DP) or by TP (EP 1), as the AIC columns give them per role.
TEST(Validate, DisaggregatedRolesRunTheirOwnAttentionDpAndExperts) {
  // prefill: workers, TP, PP, DP, MoE TP, MoE EP; decode: the same
  auto row = [](const std::string& id, const std::string& prefill, const std::string& decode) {
    return id + ",x; silicon_concurrency=64,sglang,0.5.8.post1,deepseek-ai/DeepSeek-V3,b200_sxm,fp4,disagg,1024,1024,,,,,,,,,," +
           prefill + ",," + decode + ",300,20\n";
  };
  const auto path = std::filesystem::temp_directory_path() / "servesim_disagg_dp_rows.csv";
  {
    std::ofstream f(path);
    f << kSiliconHeader << row("dp_c64_", "1,1,1,4,1,4", "1,1,1,8,1,8") << row("ep1_c64_", "2,4,1,1,4,1", "1,1,1,8,1,8")
      << row("bad_c64_", "1,1,1,4,1,4", "1,1,1,8,1,3");
  }
  const auto points = v::read_silicon_csv(path.string());
  std::filesystem::remove(path);
  v::Options o;
  const auto t = v::point_scenario(by_id(points, "dp_c64_"), o, nullptr).at("topology");
  EXPECT_EQ(t.at("prefill_tp"), 1);
  EXPECT_EQ(t.at("prefill_dp"), 4);
  EXPECT_EQ(t.at("prefill_ep"), 4);
  EXPECT_EQ(t.at("decode_dp"), 8);
  EXPECT_EQ(t.at("decode_ep"), 8);
  const auto u = v::point_scenario(by_id(points, "ep1_c64_"), o, nullptr).at("topology");   // EP in the decode role only
  EXPECT_EQ(u.at("prefill_workers"), 2);
  EXPECT_EQ(u.at("prefill_tp"), 4);
  EXPECT_EQ(u.at("prefill_ep"), 1);
  EXPECT_EQ(u.at("decode_ep"), 8);
  try {
    v::point_scenario(by_id(points, "bad_c64_"), o, nullptr);
    FAIL() << "expected: not modellable";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("decode MoE expert parallel size 3 with TP 1 x DP 8 not modelled (it does not divide"),
              std::string::npos) << e.what();
  }
}

// A row's FP8 label runs the checkpoint's FP8 scaling: AIC's fp8_block quantisation modes, or a
// model_path naming a "-FP8" checkpoint whose only published FP8 format is 128x128 blocks
// (Qwen3-235B-A22B-FP8), run fp8_block (vLLM's "auto" KV cache stays BF16 on Hopper); the BF16
// checkpoint quantised on load (Qwen3-32B with fp8 modes) stays per-tensor fp8.
TEST(Validate, Fp8LabelRunsTheCheckpointsBlockFormat) {
  const std::string head = kSiliconHeader;
  auto row = [](const std::string& id, const std::string& model, const std::string& gemm, const std::string& moe) {
    return id + ",x; silicon_concurrency=8,vllm,0.12.0," + model + ",h200_sxm,fp8,agg,1024,512," + gemm + "," + moe +
           ",8,2,1,1,2,1,,,,,,,,,,,,,,,100,50\n";
  };
  const auto path = std::filesystem::temp_directory_path() / "servesim_fp8_block_rows.csv";
  {
    std::ofstream f(path);
    f << head << row("a_c8_", "Qwen/Qwen3-235B-A22B-FP8", "fp8_block", "fp8_block")
      << row("b_c8_", "Qwen/Qwen3-235B-A22B-FP8", "", "") << row("c_c8_", "Qwen/Qwen3-32B", "fp8", "fp8");
  }
  const auto points = v::read_silicon_csv(path.string());
  std::filesystem::remove(path);
  v::Options o;
  auto precision = [&](const std::string& id) { return v::point_scenario(by_id(points, id), o, nullptr).at("precision"); };
  EXPECT_EQ(precision("a_c8_"), "fp8_block");
  EXPECT_EQ(precision("b_c8_"), "fp8_block");
  EXPECT_EQ(precision("c_c8_"), "fp8");
  EXPECT_FALSE(v::point_scenario(by_id(points, "a_c8_"), o, nullptr).contains("kv_cache_dtype"));
}

// Qwen3.5-397B-A17B's FP8 checkpoint is taken as 128x128 block FP8, as Qwen's Qwen3 FP8 releases
// are (the catalogue entry's note: its own config is not at hand). A row naming it with a plain FP8
// label runs fp8_block, and on TensorRT-LLM 1.3 (whose profile times block-FP8 GEMMs on its own
// fp8_block rows) the o_proj of a full-attention layer at TP8 (m = 16 tokens, n = hidden 4,096,
// k = 32 heads x 256 / 8 = 1,024) is the H200 row of TensorRT-LLM 1.3.0rc20's gemm.json:
// fp8_block 16 x 4096 x 1024 = 0.005648 ms (the per-tensor fp8 row of that shape: 0.01325 ms).
TEST(Validate, Qwen35Fp8CheckpointRunsBlockFp8) {
  const auto path = std::filesystem::temp_directory_path() / "servesim_qwen35_fp8_rows.csv";
  {
    std::ofstream f(path);
    f << kSiliconHeader
      << "q_c16_,x; silicon_concurrency=16,trtllm,1.3.0rc20,Qwen/Qwen3.5-397B-A17B-FP8,h200_sxm,fp8,agg,1024,512,,,16,8,1,1,8,1,,,,,,,,,,,,,,,100,50\n";
  }
  const auto points = v::read_silicon_csv(path.string());
  std::filesystem::remove(path);
  v::Options o;
  const auto s = v::point_scenario(by_id(points, "q_c16_"), o, nullptr);
  EXPECT_EQ(s.at("model"), "qwen3.5-397b-a17b");
  EXPECT_EQ(s.at("precision"), "fp8_block");
  EXPECT_EQ(s.at("engine_profile"), "trtllm-1.3");

  const auto& m = servesim::models::model("qwen3.5-397b-a17b");
  EXPECT_EQ(servesim::models::checkpoint_format_label(m, servesim::hw::Precision::fp8_block),
            "the published FP8 128x128 block one");
  const int tp = 8;
  const std::int64_t n = m.hidden, k = std::int64_t(m.heads) * m.head_dim / tp;
  ASSERT_EQ(n, 4096);
  ASSERT_EQ(k, 1024);
  const auto& tables = servesim::sim::engine_profile(s.at("engine_profile").get<std::string>()).kernel_tables;
  const auto& h200 = servesim::hw::Catalog::global().gpu("H200");
  const auto t = servesim::hw::kernel_model(h200, tables).gemm(16, n, k, servesim::hw::Precision::fp8_block);
  EXPECT_DOUBLE_EQ(t.seconds - t.cold_weights_s, 0.005648e-3);
  EXPECT_EQ(t.kernel, "block-FP8 GEMM (the release's fp8_block rows)");
  EXPECT_EQ(t.table, "TensorRT-LLM 1.3.0rc20 table");
}

// The harness's batch_size is a row's clients, or each attention-DP rank's share of them: 8 clients
// with batch 8 on TP2, or batch 4 on TP1 x DP2 (4 x 2 = 8), run; batch 4 for 8 clients on TP2 without
// DP (the 1.3.0rc1 TRT-LLM sweeps write C / 2, C / 4, C / 8) says nothing servesim can place and is
// not modelled, with the reason; a blank batch_size (0) is not checked.
TEST(Validate, BatchThatSplitsTheClientsOtherwiseIsNotModelled) {
  const std::string head = kSiliconHeader;
  auto row = [](const std::string& id, const std::string& batch, const std::string& tp, const std::string& dp) {
    return id + ",x; silicon_concurrency=8,trtllm,1.3.0rc1,openai/gpt-oss-120b,h100_sxm,,agg,1024,512,,," + batch + "," + tp +
           ",1," + dp + ",,,,,,,,,,,,,,,,,100,50\n";
  };
  const auto path = std::filesystem::temp_directory_path() / "servesim_batch_split_rows.csv";
  {
    std::ofstream f(path);
    f << head << row("all_c8_", "8", "2", "") << row("dp_c8_", "4", "1", "2") << row("half_c8_", "4", "2", "")
      << row("blank_c8_", "", "2", "");
  }
  const auto points = v::read_silicon_csv(path.string());
  std::filesystem::remove(path);
  v::Options o;
  EXPECT_NO_THROW(v::point_scenario(by_id(points, "all_c8_"), o, nullptr));
  EXPECT_NO_THROW(v::point_scenario(by_id(points, "dp_c8_"), o, nullptr));
  EXPECT_NO_THROW(v::point_scenario(by_id(points, "blank_c8_"), o, nullptr));
  try {
    v::point_scenario(by_id(points, "half_c8_"), o, nullptr);
    ADD_FAILURE() << "batch 4 for 8 clients on TP2 ran";
  } catch (const servesim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size 4 for 8 clients on TP 2"), std::string::npos) << e.what();
  }
}

// gpt-oss-120b has 64 attention heads and 8 KV heads: TP 12, 20 and 24 cannot split them, TP 16 can.
// A run set whose rows give 12, 20, 24 and 16 records something other than a TP in that column (as a
// dump's GB200 DeepSeek-R1 rows give 12-72), so its TP 16 row is not modelled either, with the reason;
// a run set of TP 2 and 4 with one stray 6 runs its TP 2 and 4 rows.
TEST(Validate, RunSetWhoseTpColumnMostlyCannotSplitTheModelIsNotATp) {
  auto row = [](const std::string& set, const std::string& tp) {
    return set + "_tp" + tp + "_c8_," + set + "; silicon_concurrency=8,trtllm,1.3.0rc1,openai/gpt-oss-120b,h100_sxm,fp4,agg,1024,128,,,8," +
           tp + ",1,1,,,,,,,,,,,,,,,,,100,10\n";
  };
  const auto path = std::filesystem::temp_directory_path() / "servesim_tp_not_tp.csv";
  {
    std::ofstream f(path);
    f << kSiliconHeader << row("gb", "12") << row("gb", "20") << row("gb", "24") << row("gb", "16") << row("h", "2")
      << row("h", "4") << row("h", "6");
  }
  const auto points = v::read_silicon_csv(path.string());
  std::filesystem::remove(path);
  v::Options o;
  o.threads = 1;
  const v::Report r = v::run(points, o);
  const std::string tp16 = result(r, "gb_tp16_c8_").unmodellable;
  EXPECT_NE(tp16.find("tp_size 16 is not this run's TP: 3 of its run set's 4 points"), std::string::npos) << tp16;
  EXPECT_NE(tp16.find("(12, 20, 24; 12 does not divide the 64 attention heads of gpt-oss-120b)"), std::string::npos) << tp16;
  EXPECT_NE(result(r, "gb_tp20_c8_").unmodellable.find("20 does not divide the 64 attention heads"), std::string::npos);
  for (const char* id : {"h_tp2_c8_", "h_tp4_c8_"}) {
    EXPECT_EQ(result(r, id).unmodellable, "") << id;
    EXPECT_TRUE(std::isfinite(result(r, id).ttft_ms)) << id;
  }
  EXPECT_NE(result(r, "h_tp6_c8_").unmodellable.find("6 does not divide the 64 attention heads"), std::string::npos);
}

// SGLang prefills whenever a waiting prompt can be admitted, so in a closed loop whose KV pool holds
// every client's request a prompt waits at most for the prompts queued ahead of it: the train (all
// 8 prompts released together) is the slowest orbit. Made-up SGLang 0.5.6 Llama-3.1-8B FP8 points on
// one H200 at 8 clients of 1,024 + 128 tokens: the train's mean TTFT is the API path (80 ms each way)
// plus at most all 8 prompts' prefill (8,192 x 13.96e9 FLOP at half the 1.2 PFLOP/s the H200's FP8
// GEMMs reach: 0.19 s) plus a decode step, under 0.37 s; a measured 5 s is over 3x that and is not
// modellable (a delay outside the step loop), a measured 0.4 s stays, and so does the same 5 s on
// vLLM, whose rows the rule leaves alone.
TEST(Validate, SglangTtftAboveTheClosedLoopsCeilingIsNotModellable) {
  const std::string csv = ::testing::TempDir() + "ttft_ceiling.csv";
  {
    std::ifstream in(data("validate_sample.csv"));
    std::string header;
    std::getline(in, header);
    std::ofstream out(csv);
    const std::string row = ",source_file=made-up.csv; silicon_concurrency=8,{E},{V},nvidia/Llama-3.1-8B-Instruct-FP8,"
                            "h200_sxm,fp8,agg,1024,128,fp8,fp8,8,1,1,,1,1,,,,,,,,,,,,,,,{T},8\n";
    auto line = [&](const std::string& id, const std::string& engine, const std::string& version, const std::string& ttft) {
      std::string r = id + row;
      for (auto [k, val] : {std::pair<std::string, std::string>{"{E}", engine}, {"{V}", version}, {"{T}", ttft}})
        r.replace(r.find(k), k.size(), val);
      return r;
    };
    out << header << "\n"
        << line("sglang_stalled", "sglang", "0.5.6", "5000") << line("sglang_queued", "sglang", "0.5.6.post2", "400")
        << line("vllm_stalled", "vllm", "0.19.0", "5000");
  }
  v::Options o;
  add_llama(o);
  o.threads = 1;
  const v::Report r = v::run(v::read_silicon_csv(csv), o);
  const auto& stalled = result(r, "sglang_stalled");
  EXPECT_EQ(stalled.unmodellable, v::kAboveCeilingReason);
  EXPECT_GT(stalled.ttft_train_ms, 160.0);
  EXPECT_LT(stalled.ttft_train_ms, 370.0);
  EXPECT_GE(stalled.pool_holds_clients, v::kPoolHoldsClients);
  EXPECT_TRUE(stalled.above_ttft_ceiling());
  const auto& queued = result(r, "sglang_queued");
  EXPECT_EQ(queued.unmodellable, "");
  EXPECT_FALSE(queued.above_ttft_ceiling());
  EXPECT_EQ(result(r, "vllm_stalled").unmodellable, "");
  EXPECT_FALSE(std::isfinite(result(r, "vllm_stalled").ttft_train_ms));
  // Listed with its reason among the points servesim does not model, out of every error table.
  const std::string text = v::to_text(r, o);
  EXPECT_NE(text.find(v::kAboveCeilingReason), std::string::npos);
  for (const auto& g : v::to_json(r, o)["by_gpu"])
    if (g["engine"] == "sglang") {
      EXPECT_EQ(g["points"], 1);
    }
}

// Runs the project has not seen name their model by the Hugging Face id they served (Meta's older
// "Meta-Llama" repository name here), run disaggregated on GB300 NVL72 trays, or prefill prompts longer
// than TensorRT-LLM's default token budget, which runs a prompt whole: 15,000 tokens against 8,192. The
// run served them, so its budget held one; the point runs with the budget raised to the prompt.
TEST(Validate, RunsOfOtherIdsRacksAndLongPromptsAreSimulated) {
  const auto ps = read_csv_text("other_runs",
                                "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,tp_size,"
                                "prefill_num_workers,prefill_tp_size,decode_num_workers,decode_tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
                                "meta_c2,silicon_concurrency=2,vllm,0.19.0,meta-llama/Meta-Llama-3.1-8B-Instruct,h200_sxm,bf16,agg,1024,64,1,,,,,40,5\n"
                                "rack_c2,silicon_concurrency=2,vllm,0.19.0,Qwen/Qwen3-32B,gb300,bf16,disagg,1024,64,,1,1,1,1,300,8\n"
                                "long_c2,silicon_concurrency=2,trtllm,1.3.0rc5,Qwen/Qwen3-32B,b200_sxm,bf16,disagg,15000,64,,1,1,1,1,900,8\n",
                                nullptr);
  v::Options o;
  o.threads = 1;
  o.requests_per_client = 3;
  const v::Report r = v::run(ps, o);
  ASSERT_EQ(r.points.size(), 3u);
  for (const auto& p : r.points) EXPECT_EQ(p.unmodellable, "") << p.measured.id;
  EXPECT_EQ(result(r, "meta_c2").model, "llama-3.1-8b");
  EXPECT_EQ(result(r, "rack_c2").scenario["topology"].value("instance", std::string()), "");   // the GPU's first node kind
  const auto& tray = servesim::hw::Catalog::global().instance("gb300-nvl72-tray");
  EXPECT_EQ(tray.gpus, 4);
  EXPECT_EQ(tray.nvlink_domain_gpus, 72);
  EXPECT_EQ(result(r, "long_c2").scenario["engine"].value("max_num_batched_tokens", std::int64_t(0)), 15000);
}

// A scenario (and the command line's --model) may name the Hugging Face id a user serves: a quantised
// repository's id runs its checkpoint unless "precision" names another.
TEST(ScenarioModel, AHuggingFaceIdNamesTheModelAndItsCheckpoint) {
  const Scenario fp8 = servesim::sim::parse_scenario(R"({"model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "h200", "workload": {"concurrency": 1, "isl": 128, "osl": 16}})", "id.json");
  EXPECT_EQ(fp8.model, "qwen3-235b-a22b");
  EXPECT_EQ(fp8.precision, servesim::hw::Precision::fp8_block);
  const Scenario bf16 =
      servesim::sim::parse_scenario(R"({"model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "h200", "precision": "bf16", "workload": {"concurrency": 1, "isl": 128, "osl": 16}})", "id.json");
  EXPECT_EQ(bf16.precision, servesim::hw::Precision::bf16);
  const Scenario plain = servesim::sim::parse_scenario(R"({"model": "meta-llama/Llama-3.3-70B-Instruct", "gpu": "h200", "workload": {"concurrency": 1, "isl": 128, "osl": 16}})", "id.json");
  EXPECT_EQ(plain.model, "llama-3.3-70b");
  EXPECT_EQ(plain.precision, servesim::hw::Precision::bf16);
}

// band_cover: a measured figure counts inside when the band its prediction carries holds it, the
// calibration profile's own where the profile applies (here +-5 % on H200 vLLM 0.19 for
// llama-3.1-8b), else the shipped table. TTFT 100 ms predicted 98 (inside +-5 %), TPOT 10 ms
// predicted 12 (outside), no tok/s: 2 checks, 1 inside. Another model's point takes the shipped
// bands (2 checks more, none of them the profile's).
TEST(Validate, BandCoverCountsFiguresInsideTheBandTheyCarry) {
  auto point = [](const std::string& model) {
    v::PointResult p;
    p.model = model, p.gpu = "h200", p.engine = "vllm", p.mode = "agg", p.regime = "light";
    p.engine_profile = "vllm-0.19", p.precision = "bf16";
    p.measured.ttft_ms = 100, p.measured.tpot_ms = 10;
    p.ttft_ms = 98, p.itl_ms = 12;
    return p;
  };
  v::Report r;
  r.points = {point("llama-3.1-8b")};
  v::Options o;
  o.base = {{"calibration", std::string(SERVESIM_SOURCE_DIR) + "/tests/sim/data/h200-slow-kernels.calibration.json"}};
  v::BandCover b = v::band_cover(r, o);
  EXPECT_EQ(b.checks, 2);
  EXPECT_EQ(b.inside, 1);
  EXPECT_EQ(b.profile_checks, 2);
  EXPECT_EQ(b.profile_inside, 1);
  r.points.push_back(point("qwen3-32b"));
  b = v::band_cover(r, o);
  EXPECT_EQ(b.checks, 4);
  EXPECT_EQ(b.profile_checks, 2);
  EXPECT_EQ(v::band_cover(r, v::Options{}).profile_checks, 0);
}

// validate --calibration says which points the profile changed and how: one line per outcome, what
// applies first. A profile fitted on llama-3.1-8b, H200, vLLM 0.19 (GEMM and attention 1.3x, 2 ms a
// request) applies whole to two H200 points of that build, of any model, and to nothing of a B200 point
// or of an H200 point of another build (vLLM 0.12); the counts add up to the simulated points.
TEST(Validate, SaysWhichPointsACalibrationChanged) {
  auto point = [](const std::string& model, const std::string& gpu, const std::string& build) {
    v::PointResult p;
    p.model = model, p.gpu = gpu, p.engine = "vllm", p.mode = "agg", p.engine_profile = build, p.precision = "bf16";
    return p;
  };
  v::Report r;
  r.points = {point("llama-3.1-8b", "h200", "vllm-0.19"), point("qwen3-32b", "h200", "vllm-0.19"),
              point("llama-3.1-8b", "b200", "vllm-0.19"), point("llama-3.1-8b", "h200", "vllm-0.12")};
  v::PointResult unplaced = point("llama-3.1-8b", "h200", "vllm-0.19");
  unplaced.unmodellable = "no concurrency recorded";
  r.points.push_back(unplaced);
  v::Options o;
  EXPECT_TRUE(v::calibration_uses(r, o).empty());
  o.base = {{"calibration", std::string(SERVESIM_SOURCE_DIR) + "/tests/sim/data/h200-slow-kernels.calibration.json"}};
  const auto uses = v::calibration_uses(r, o);
  ASSERT_EQ(uses.size(), 4u);   // the qwen3-32b point applies the same parameters but keeps the shipped bands: its own line
  EXPECT_TRUE(uses[0].applies);
  EXPECT_EQ(uses[0].what.rfind("applies gemm_scale x1.3, attention_scale x1.3, request_overhead_ms 2 ms", 0), 0u) << uses[0].what;
  int points = 0, applied = 0;
  for (const auto& u : uses) points += u.points, applied += u.applies ? u.points : 0;
  EXPECT_EQ(points, 4);
  EXPECT_EQ(applied, 2);
  EXPECT_FALSE(uses[2].applies);
  EXPECT_NE(uses[2].what.find("nothing applies"), std::string::npos);
  const std::string text = v::to_text(r, o);
  EXPECT_NE(text.find("calibration " + std::string(SERVESIM_SOURCE_DIR) + "/tests/sim/data/h200-slow-kernels.calibration.json (fitted on llama-3.1-8b"),
            std::string::npos) << text;
  EXPECT_NE(text.find("  1 point (llama-3.1-8b h200 vllm-0.19 bf16): applies gemm_scale x1.3"), std::string::npos) << text;
  EXPECT_NE(text.find("(llama-3.1-8b b200 vllm-0.19 bf16): nothing applies"), std::string::npos) << text;
  const nlohmann::json j = v::to_json(r, o);
  EXPECT_EQ(j["calibration"]["uses"].size(), 4u);
}
