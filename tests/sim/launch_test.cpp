// Steps beyond the captured CUDA-graph sizes (or with graphs off) wait for their eager kernel
// launches when launching takes longer than the kernels run.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "sim/api/api.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/engine/worker.hpp"
#include "sim/metrics.hpp"
#include "sim/scenario.hpp"
#include "sim/simulate.hpp"
#include "workloads/workload.hpp"

using namespace servesim;
using namespace servesim::sim;

namespace {

// 1 ms per step on the GPU; launching one forward eagerly takes 5 ms.
class SlowLaunchCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch&) const override { return 0.001; }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "test"; }
  double eager_launch_seconds() const override { return 0.005; }
};

struct Keep : RequestSink {
  std::vector<Request> all;
  void on_finished(const Request& r) override { all.push_back(r); }
};

Request lone(std::int64_t isl, std::int64_t osl, EngineConfig cfg) {
  SlowLaunchCost cost;
  ClusterShape shape;
  shape.kv_blocks = 10000;
  AggregatedCluster c(shape, cfg, cost);
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::concurrency;
  w.concurrency = 1;
  w.requests = 1;
  w.isl = workloads::LengthDist::fixed_at(isl);
  w.osl = workloads::LengthDist::fixed_at(osl);
  auto workload = workloads::make_workload(w);
  Keep k;
  c.run(*workload, k);
  return k.all.at(0);
}

}  // namespace

TEST(Launch, StepsBeyondTheCaptureSizeWaitForEagerLaunches) {
  EngineConfig cfg;
  cfg.step_overhead_s = 0.0005;
  cfg.max_cudagraph_capture_size = 512;
  // A 1000-token prefill (> 512) runs eagerly: max(1 ms, 5 ms) + 0.5 ms. Decodes replay graphs.
  Request r = lone(1000, 3, cfg);
  EXPECT_NEAR(r.first_token_s, 0.0055, 1e-12);
  EXPECT_NEAR(r.finish_s - r.first_token_s, 2 * 0.0015, 1e-12);
  // A 500-token prefill fits the captured sizes: 1 ms + 0.5 ms.
  EXPECT_NEAR(lone(500, 3, cfg).first_token_s, 0.0015, 1e-12);
}

TEST(Launch, EnforceEagerPaysTheLaunchOnEveryStep) {
  EngineConfig cfg;
  cfg.step_overhead_s = 0.0005;
  cfg.enforce_eager = true;
  Request r = lone(100, 3, cfg);
  EXPECT_NEAR(r.first_token_s, 0.0055, 1e-12);
  EXPECT_NEAR(r.finish_s - r.first_token_s, 2 * 0.0055, 1e-12);
}

TEST(Launch, RealModelEagerLaunchIsKernelsTimesTheMeasuredCost) {
  const auto& gpu = hw::Catalog::global().gpu("H200");
  const auto cost = models::make_step_cost(models::model("nemotron-3-super"), gpu, hw::Precision::fp8, {8, 1, 1});
  const double per_kernel = hw::launch_overhead(gpu).eager_per_kernel_s;
  ASSERT_GT(per_kernel, 0);
  const double kernels = cost->eager_launch_seconds() / per_kernel;
  EXPECT_NEAR(kernels, std::round(kernels), 1e-9);
  // 40 Mamba x 6 + 8 attention x 5 + 40 MoE x (6 + 3 shared + 2 latent) + 88 all-reduces + 5.
  EXPECT_EQ(std::lround(kernels), 40 * 6 + 8 * 5 + 40 * 11 + 88 + 5);
}

// Outside a CUDA graph vLLM issues a block-FP8 dense linear as its op (activation quantisation +
// GEMM through Python), whose measured eager call (AIConfigurator's eager fp8_block GEMM rows at
// m <= 64: 62 us on the H200, 182 us on the B200) replaces that linear's one kernel launch.
// Qwen3-235B-A22B (94 layers, block FP8): 2 linears per layer (QKV, O); the router stays BF16 and
// the routed experts run in the fused MoE. A BF16 checkpoint has none.
TEST(Launch, BlockFp8LinearsIssueAtTheirMeasuredEagerCall) {
  const auto& m = models::model("qwen3-235b-a22b");
  for (const char* name : {"H200", "B200"}) {
    const auto& gpu = hw::Catalog::global().gpu(name);
    const auto fp8 = models::make_step_cost(m, gpu, hw::Precision::fp8_block, {2, 1, 1});
    const auto bf16 = models::make_step_cost(m, gpu, hw::Precision::bf16, {4, 1, 1});
    const auto lc = fp8->launch_counts();
    EXPECT_EQ(lc.fp8_block_linears, 94 * 2);
    // 94 x (attention 5 + QK-norm 1) + 94 x MoE 6 + 188 all-reduces (TP 2: after attention and
    // after the MoE) + 5 (final norm, LM head, sampler).
    EXPECT_EQ(lc.kernels, 94 * 6 + 94 * 6 + 188 + 5);
    EXPECT_EQ(bf16->launch_counts().fp8_block_linears, 0);
    EngineConfig cfg;
    apply_profile(engine_profile("vllm-0.12"), m, gpu, nlohmann::json::object(), cfg, 2);
    const double per_linear = std::string(name) == "H200" ? 62e-6 : 182e-6;
    EXPECT_DOUBLE_EQ(cfg.launch_per_fp8_block_linear_s, per_linear);
    EXPECT_DOUBLE_EQ(cfg.launch_per_kernel_s, 27.6e-6);
    Worker w(cfg, *fp8, 100000, {}, 0);
    // A 1000-token prefill is beyond the largest graph (512): every kernel from the host, the
    // 188 linears at their measured call. H200: 27.6 us x (kernels - 188) + 62 us x 188.
    EXPECT_NEAR(w.launch_seconds(1000, false), 27.6e-6 * (lc.kernels - 188) + per_linear * 188, 1e-12) << name;
    EXPECT_EQ(w.launch_seconds(8, true), 0.0);   // a decode of 8 replays its full graph
  }
  // A GPU the profile measured nothing for keeps one kernel launch per linear.
  EngineConfig cfg;
  apply_profile(engine_profile("vllm-0.12"), m, hw::Catalog::global().gpu("H200"), nlohmann::json::object(), cfg, 2);
  cfg.launch_per_fp8_block_linear_s = 0;
  const auto fp8 = models::make_step_cost(m, hw::Catalog::global().gpu("H200"), hw::Precision::fp8_block, {2, 1, 1});
  Worker w(cfg, *fp8, 100000, {}, 0);
  EXPECT_NEAR(w.launch_seconds(1000, false), 27.6e-6 * fp8->launch_counts().kernels, 1e-12);
}

// An explicit capture list (vLLM cudagraph_capture_sizes, AIConfigurator's harness: every size
// 1...batch) gives a decode of 9 sequences its own graph, where vLLM's default list capped at 12
// is [1, 2, 4, 8] and 9 issues every kernel from the host. Qwen3-235B-A22B block FP8, TP2, H200:
// the eager decode of 9 costs 27.6 us x (kernels - 188) + 62 us x 188 of launches, the graph none.
namespace {
EngineConfig with_engine(const nlohmann::json& engine, const models::ModelSpec& m, const hw::GpuSpec& gpu,
                         const char* profile = "vllm-0.12") {
  nlohmann::json s = {{"model", m.name}, {"gpu", gpu.name}, {"engine", engine}, {"engine_profile", profile},
                      {"workload", {{"concurrency", 1}, {"isl", 8}, {"osl", 2}}}};
  const Scenario sc = parse_scenario(s.dump(), "t.json");
  EngineConfig cfg = sc.engine;
  apply_profile(engine_profile(profile), m, gpu, s.at("engine"), cfg, 2);
  return cfg;
}
}  // namespace

TEST(Launch, ExplicitCaptureListGivesEveryListedBatchItsGraph) {
  const auto& m = models::model("qwen3-235b-a22b");
  const auto& gpu = hw::Catalog::global().gpu("H200");
  const auto fp8 = models::make_step_cost(m, gpu, hw::Precision::fp8_block, {2, 1, 1});
  const double eager = 27.6e-6 * (fp8->launch_counts().kernels - 188) + 62e-6 * 188;
  const EngineConfig capped = with_engine({{"max_cudagraph_capture_size", 12}}, m, gpu);
  EXPECT_EQ(capped.cudagraph_capture_sizes, (std::vector<std::int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(capped.max_cudagraph_capture_size, 8);   // the largest graph captured
  const EngineConfig every = with_engine({{"cudagraph_capture_sizes", {12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 9}}}, m, gpu);
  ASSERT_EQ(every.cudagraph_capture_sizes.size(), 12u);   // sorted, the repeat dropped
  EXPECT_EQ(every.cudagraph_capture_sizes.front(), 1);
  EXPECT_EQ(every.max_cudagraph_capture_size, 12);
  Worker wc(capped, *fp8, 100000, {}, 0), we(every, *fp8, 100000, {}, 0);
  EXPECT_EQ(wc.launch_seconds(8, true), 0.0);
  EXPECT_NEAR(wc.launch_seconds(9, true), eager, 1e-12);
  EXPECT_NEAR(wc.launch_seconds(12, true), eager, 1e-12);
  for (int b = 1; b <= 12; ++b) EXPECT_EQ(we.launch_seconds(b, true), 0.0) << b;
  EXPECT_NEAR(we.launch_seconds(13, true), eager, 1e-12);   // beyond the list: from the host
  // Sizes above the token budget are dropped (a step never holds more tokens).
  const EngineConfig budget = with_engine({{"cudagraph_capture_sizes", {1, 2, 64, 128}}, {"max_num_batched_tokens", 100}, {"max_num_seqs", 64}}, m, gpu);
  EXPECT_EQ(budget.cudagraph_capture_sizes, (std::vector<std::int64_t>{1, 2, 64}));
  EXPECT_EQ(budget.max_cudagraph_capture_size, 64);
  // Graphs off: no list, whatever is given.
  EXPECT_TRUE(with_engine({{"cudagraph_capture_sizes", {1, 2}}, {"enforce_eager", true}}, m, gpu).cudagraph_capture_sizes.empty());
  // Decode-only graph engines take the list as batch sizes (SGLang --cuda-graph-bs).
  EXPECT_EQ(with_engine({{"cudagraph_capture_sizes", {3, 1, 2}}}, m, gpu, "sglang-0.5").cudagraph_capture_sizes,
            (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(Launch, CaptureListBadInputSaysWhichField) {
  auto reason = [](const nlohmann::json& engine) {
    try {
      parse_scenario(nlohmann::json{{"model", "qwen3-32b"}, {"engine", engine}, {"workload", {{"concurrency", 1}, {"isl", 8}, {"osl", 2}}}}.dump(),
                     "t.json");
    } catch (const Error& e) {
      return e.field() + ": " + e.reason();
    }
    return std::string("accepted");
  };
  EXPECT_NE(reason({{"cudagraph_capture_sizes", {1, 0}}}).find("cudagraph_capture_sizes: each size must be a whole number >= 1"),
            std::string::npos);
  EXPECT_NE(reason({{"cudagraph_capture_sizes", {1, 2.5}}}).find("whole number"), std::string::npos);
  EXPECT_NE(reason({{"cudagraph_capture_sizes", nlohmann::json::array()}}).find("at least one size"), std::string::npos);
  EXPECT_NE(reason({{"cudagraph_capture_sizes", {1, 2, 4}}, {"max_cudagraph_capture_size", 8}}).find("max_cudagraph_capture_size: is 8 but"),
            std::string::npos);
  EXPECT_EQ(reason({{"cudagraph_capture_sizes", {1, 2, 4}}, {"max_cudagraph_capture_size", 4}}), "accepted");
}

// A decode step of an MoE is priced on the sequences it carries, not only on the capture size it
// pads to: Kimi-K2.5 NVFP4, TP4 EP4 on GB200 (the disaggregated rows' decode worker), 5 and then 6
// pulled sequences on one decode
// worker, both replaying the graph of 8. The dense layers compute 8 tokens either way; the routed
// experts see 5 + 1 and 6 + 1 tokens (the padding's identical dummy tokens take one token's
// experts). The worker's remembered line for a decode step must not carry the first batch's
// padding over to the second.
TEST(Launch, MoeDecodeStepsPaddedToOneGraphPayTheirOwnRoutedTokens) {
  const auto& m = models::model("kimi-k2.5");
  const auto& gpu = hw::Catalog::global().gpu("GB200");
  const auto cost = models::make_step_cost(m, gpu, hw::Precision::nvfp4, {4, 1, 4});
  EngineConfig cfg;
  apply_profile(engine_profile("vllm-0.18"), m, gpu, nlohmann::json::object(), cfg, 4);
  cfg.role = WorkerRole::decode_only;
  cfg.async_scheduling = false;
  cfg.step_overhead_s = cfg.step_overhead_per_seq_s = cfg.step_gpu_s = 0;   // the GPU's time alone
  Worker w(cfg, *cost, 100000, {}, 0);
  auto land = [&](int id, double t) {
    workloads::RequestSpec s;
    s.id = static_cast<std::uint64_t>(id);
    s.input_tokens = 1000;
    s.output_tokens = 100;
    const std::int32_t slot = w.scheduler().add_transferred(s, t, t, id, false);
    w.scheduler().transfer_done(slot, t);
    w.scheduler().clear_outputs();
  };
  auto padded_to_8 = [](models::StepBatch b) {
    b.graph_padding_seqs = 8 - b.decode_seqs;
    b.decode_seqs = 8;
    return b;
  };
  for (int i = 0; i < 5; ++i) land(i, 0.0);
  const double s5 = w.start_step(0.0);
  const models::StepBatch b5 = padded_to_8(w.scheduler().batch());
  ASSERT_EQ(b5.graph_padding_seqs, 3);
  EXPECT_DOUBLE_EQ(s5, cost->seconds(b5));
  w.finish_step(s5);
  land(5, s5);
  const double s6 = w.start_step(s5);
  const models::StepBatch b6 = padded_to_8(w.scheduler().batch());
  ASSERT_EQ(b6.graph_padding_seqs, 2);
  EXPECT_NEAR(s6, cost->seconds(b6), 1e-12 * s6);
  // By hand: every op but attention (which reads each batch's own context) and the routed experts
  // costs the same at 8 tokens; the routed experts cost more at 7 tokens than at 6.
  const auto p5 = cost->breakdown(b5).parts, p6 = cost->breakdown(b6).parts;
  ASSERT_EQ(p5.size(), p6.size());
  int routed = 0;
  for (std::size_t i = 0; i < p5.size(); ++i) {
    if (p5[i].op.find("routed experts") != std::string::npos) {
      ++routed;
      EXPECT_GT(p6[i].seconds, p5[i].seconds);
    } else if (p5[i].op.find("attention") == std::string::npos) {   // MLA's decode attention reads the context
      EXPECT_DOUBLE_EQ(p6[i].seconds, p5[i].seconds) << p5[i].kind << " " << p5[i].op;
    }
  }
  EXPECT_EQ(routed, 1);
}

// `servesim step` names the launches each step books. TRT-LLM 1.3, Llama-3.1-8B BF16 at TP4: a
// forward launches 32 x 5 attention + 32 x 4 MLP + 64 all-reduces + 5 = 357 kernels, 8.25 ms at
// the profile's 23.1 us; a context step runs eagerly (all 357), a decode of 1 replays its graph
// (none), a decode of 33 has no graph (sizes 1-32, 64, 128, no padding) and launches all 357.
TEST(Launch, StepReportsTheLaunchesEachStepBooks) {
  api::StepArgs a;
  a.model = "llama-3.1-8b";
  a.gpu = "h200";
  a.precision = "bf16";
  a.tp = 4;
  a.batch = 1;
  a.context = 1024;
  a.engine = "trtllm-1.3";
  const auto l = api::step(a).at("launch");
  EXPECT_EQ(l.at("kernels").get<int>(), 32 * 5 + 32 * 4 + 64 + 5);
  EXPECT_EQ(l.at("fp8_block_linears").get<int>(), 0);
  EXPECT_NEAR(l.at("eager_forward_s").get<double>(), 357 * 23.1e-6, 1e-12);
  EXPECT_NEAR(l.at("prefill_step_s").get<double>(), 357 * 23.1e-6, 1e-12);
  EXPECT_EQ(l.at("decode_step_s").get<double>(), 0.0);
  EXPECT_TRUE(l.at("on_scheduler_thread").get<bool>());
  a.batch = 33;
  EXPECT_NEAR(api::step(a).at("launch").at("decode_step_s").get<double>(), 357 * 23.1e-6, 1e-12);
}

namespace servesim::sim {
namespace {

// The MoE token exchange under attention DP, priced both ways on DeepSeek-V3 FP8, TP1 DP8 EP8 on
// one H200 node, 64 sequences (8 a rank): all-gather + reduce-scatter move every rank's 8 tokens x
// 7,168 x 2 bytes to all (8 x 8 x 7,168 x 2 = 917,504 bytes each way); all-to-all sends each token
// to its top-8 experts' ranks, 7 of 8 copies leaving the rank: 8 x 8 x 7 / 8 = 56 copies, FP8 with an
// FP32 scale per 128 values out (56 x 7,168 x 1.03125 bytes) and BF16 back (56 x 7,168 x 2), one
// all-to-all each, in every one of the 58 MoE layers.
TEST(MoeExchange, AllToAllSendsEachTokenToItsExpertsRanks) {
  auto row = [](bool a2a) {
    const api::StepArgs a{.model = "deepseek-v3", .gpu = "h200", .precision = "fp8", .tp = 1, .ep = 8, .dp = 8,
                          .batch = 64, .context = 1024, .moe_all_to_all = a2a};
    const nlohmann::json step = api::step(a);
    for (const auto& p : step.at("decode").at("parts"))
      if (p.at("kind") == "collectives") return p;
    return nlohmann::json();
  };
  const auto a2a = row(true), ag = row(false);
  ASSERT_FALSE(a2a.is_null());
  EXPECT_EQ(a2a.at("op"), "MoE all-to-all dispatch + combine across DP ranks");
  EXPECT_EQ(ag.at("op"), "MoE all-gather + reduce-scatter across DP ranks");
  EXPECT_EQ(a2a.at("layers"), 58);
  const auto& km = hw::kernel_model(hw::Catalog::global().gpu("h200"));
  const hw::CommGroup node{8, 1, nullptr};
  const double copies = 8.0 * 8 * 7 / 8;
  const double per_layer = km.collective(hw::Collective::all_to_all, copies * 7168 * (1 + 4.0 / 128), node).seconds +
                           km.collective(hw::Collective::all_to_all, copies * 7168 * 2, node).seconds;
  EXPECT_NEAR(a2a.at("seconds").get<double>(), 58 * per_layer, 1e-12);
  const double gather = km.collective(hw::Collective::all_gather, 8.0 * 8 * 7168 * 2, node).seconds +
                        km.collective(hw::Collective::reduce_scatter, 8.0 * 8 * 7168 * 2, node).seconds;
  EXPECT_NEAR(ag.at("seconds").get<double>(), 58 * gather, 1e-12);
  // Only under attention DP: the exchange is between DP ranks.
  EXPECT_THROW(api::step({.model = "deepseek-v3", .gpu = "h200", .tp = 8, .moe_all_to_all = true}), Error);
  // A run the knob cannot reach keeps the default (validate --scenario gives it to every point).
  auto resolved = [](const char* json) {
    const Scenario s = parse_scenario(json, "test");
    return resolved_engine(s, models::model(s.model), hw::Catalog::global().gpu(s.gpu)).moe_all_to_all;
  };
  EXPECT_TRUE(resolved(R"({"model": "deepseek-v3", "gpu": "h200", "tp": 1, "dp": 8, "ep": 8, "engine": {"moe_all_to_all": true}, "workload": {"concurrency": 1, "isl": 8, "osl": 2}})"));
  EXPECT_FALSE(resolved(R"({"model": "deepseek-v3", "gpu": "h200", "tp": 8, "engine": {"moe_all_to_all": true}, "workload": {"concurrency": 1, "isl": 8, "osl": 2}})"));
  EXPECT_FALSE(resolved(R"({"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": {"moe_all_to_all": true}, "workload": {"concurrency": 1, "isl": 8, "osl": 2}})"));
}

}  // namespace
}  // namespace servesim::sim
