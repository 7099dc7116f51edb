// Kernel and collective cost model: roofline limits by hand, every committed measurement
// reproduced within its family's reported error, transfer to other GPUs, launch overhead.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "hwmodels/calibration.hpp"
#include "hwmodels/kernel_model.hpp"
#include "hwmodels/work.hpp"

using namespace servesim::hw;

namespace {
const GpuSpec& gpu(const char* n) { return Catalog::global().gpu(n); }
const char* kAll[] = {"H100", "H200", "B200", "GB200", "B300", "GB300"};
}  // namespace

TEST(KernelModel, LargeGemmNeverFasterThanPeak) {
  for (const char* n : kAll) {
    const auto& g = gpu(n);
    for (Precision p : {Precision::bf16, Precision::fp8, Precision::nvfp4}) {
      const double m = 16384, nn = 16384, k = 16384;
      OpTime t = kernel_model(g).gemm(m, nn, k, p);
      double peak = g.native(p) ? g.dense_flops(p) : g.bf16_flops;  // nvfp4 without FP4 runs BF16 math
      EXPECT_GE(t.seconds, 2 * m * nn * k / peak) << n << " " << to_string(p);
      EXPECT_EQ(t.bound, Bound::compute) << n << " " << to_string(p);
      // Not absurdly slow either: at least 25% of peak for a 16k cube (vLLM's NVFP4 GEMM reaches
      // 27% of Blackwell Ultra's 14-15 PF in the measured tables).
      EXPECT_LE(t.seconds, 2 * m * nn * k / (0.25 * peak)) << n << " " << to_string(p);
    }
  }
}

TEST(KernelModel, GemvNeverFasterThanBandwidth) {
  for (const char* n : kAll) {
    const auto& g = gpu(n);
    for (Precision p : {Precision::bf16, Precision::fp8, Precision::nvfp4}) {
      OpTime t = kernel_model(g).gemm(1, 8192, 8192, p);
      double weight_bytes = 8192.0 * 8192 * element_bytes(p);
      EXPECT_GE(t.seconds, weight_bytes / g.hbm_bw_bytes_per_s) << n << " " << to_string(p);
      EXPECT_NE(t.bound, Bound::compute) << n << " " << to_string(p);
    }
  }
}

TEST(KernelModel, CollectivesNeverFasterThanLinks) {
  const double S = 1 << 30;
  for (const char* n : kAll) {
    const auto& g = gpu(n);
    const auto& km = kernel_model(g);
    for (int gpus : {2, 4, 8}) {
      double ar = km.collective(Collective::all_reduce, S, {gpus, 1, nullptr}).seconds;
      EXPECT_GE(ar, S * 2 * (gpus - 1) / gpus / g.nvlink_bw_bytes_per_s) << n << " x" << gpus;
      double ag = km.collective(Collective::all_gather, S, {gpus, 1, nullptr}).seconds;
      EXPECT_GE(ag, S * (gpus - 1) / gpus / g.nvlink_bw_bytes_per_s) << n << " x" << gpus;
    }
    // Small messages pay a latency that grows with the group.
    EXPECT_GT(km.collective(Collective::all_reduce, 1024, {8, 1, nullptr}).seconds,
              km.collective(Collective::all_reduce, 1024, {2, 1, nullptr}).seconds);
  }
  // Across two p5 nodes each GPU's 50 GB/s NIC share carries 2(K-1)/K of S/8.
  const auto& p5 = Catalog::global().instance("p5.48xlarge");
  OpTime x = kernel_model(gpu("H100")).collective(Collective::all_reduce, S, {16, 2, &p5});
  EXPECT_GE(x.seconds, S / 8 / p5.efa_per_gpu_bytes_per_s);
  EXPECT_GE(x.seconds, p5.efa_latency_s);
  EXPECT_EQ(x.bound, Bound::communication);
  // A small all-gather (or reduce-scatter) across the nodes is one phase of the measured small
  // all-reduce: half its latency plus the in-node NVLink stage (a few us at 1 KiB).
  const auto& h100m = kernel_model(gpu("H100"));
  const double lat = p5.efa_latency_s;
  EXPECT_GE(h100m.collective(Collective::all_reduce, 1024, {16, 2, &p5}).seconds, lat);
  // That latency is a measured 16-GPU all-reduce, in-node hops included: an 8-byte all-reduce
  // over two nodes costs it, not it plus the in-node NVLink stages' own latency.
  EXPECT_NEAR(h100m.collective(Collective::all_reduce, 8, {16, 2, &p5}).seconds, lat, 1e-6);
  for (Collective op : {Collective::all_gather, Collective::reduce_scatter}) {
    const double t = h100m.collective(op, 1024, {16, 2, &p5}).seconds;
    EXPECT_GE(t, 0.5 * lat);
    EXPECT_LT(t, lat);
  }
  // An NVL72 domain keeps 16 GPUs of four p6e-gb200 nodes on NVLink: far faster than EFA.
  const auto& gb = Catalog::global().instance("p6e-gb200.36xlarge");
  EXPECT_LT(kernel_model(gpu("GB200")).collective(Collective::all_reduce, S, {16, 4, &gb}).seconds, x.seconds);
  EXPECT_THROW(kernel_model(gpu("H100")).collective(Collective::all_reduce, S, {16, 2, nullptr}), servesim::Error);
  OpTime p2p = kernel_model(gpu("H200")).transfer(S, true, &Catalog::global().instance("p5en.48xlarge"));
  EXPECT_GE(p2p.seconds, S / 50e9);
}

// Every point of every committed H200 calibration file, through the public API (which must find
// the same shape series as the fit), within the fit error its family reports; families fitted by
// a measured shape returns its measurement exactly, with source "measured". PyTorch runs that a
// vLLM table shadows (<family>_torch) are not what the model answers with and are skipped.
TEST(KernelModel, EveryCommittedMeasurementReproduced) {
  const auto& h200 = gpu("H200");
  const auto& km = kernel_model(h200);
  Calibration cal = Calibration::embedded(h200);
  cal.validate();
  int checked = 0;
  for (auto path : servesim::data::list("hwmodels/calibration/h200/")) {
    // This GPU's base folder (its own runs and vllm/, the 0.24 tables); the release folders are
    // other models' (KernelTables.*).
    if (const auto rest = path.substr(26); rest.find('/') != std::string_view::npos && !rest.starts_with("vllm/")) continue;
    auto doc = nlohmann::json::parse(servesim::data::get(path));
    expand_point_rows(doc, std::string(path));
    std::string fam = doc["family"];
    const std::string origin = doc.value("kernels_from", "torch");
    for (const auto& p : doc["points"]) {
      OpTime t;
      std::string name = fam;
      auto i = [&](const char* k) { return p[k].get<std::int64_t>(); };
      const Precision kv = p.value("kv_dtype", "bf16") == "fp8" ? Precision::fp8 : Precision::bf16;
      const int window = p.value("window", 0);
      if (fam == "gemm") {
        name += "_" + p["dtype"].get<std::string>();
        if (p["dtype"] == "fp8_block") continue;  // no block-scaled query in the API
        t = km.gemm(i("m"), i("n"), i("k"), parse_precision(p["dtype"].get<std::string>()));
      } else if (fam == "grouped_gemm") {
        name += "_" + p["dtype"].get<std::string>();
        double skew = p.value("routing", "balanced") == "balanced" ? 0 : p.value("skew", 1.2);
        t = km.grouped_gemm(i("experts"), i("tokens"), i("n"), i("k"), parse_precision(p["dtype"].get<std::string>()), skew);
      } else if (fam == "attention_prefill") {
        t = km.attention_prefill(i("batch"), i("seq"), i("heads"), i("kv_heads"), i("head_dim"), kv, window);
      } else if (fam == "attention_decode") {
        t = km.attention_decode(i("batch"), i("context"), i("heads"), i("kv_heads"), i("head_dim"), kv, window);
      } else if (fam == "mamba_scan") {
        t = km.mamba_scan(i("batch"), i("seqlen"), i("heads"), i("head_dim"), i("d_state"), i("groups"));
      } else if (fam == "mamba_step") {
        t = km.mamba_step(i("batch"), i("heads"), i("head_dim"), i("d_state"), i("groups"));
      } else if (fam == "conv1d") {
        bool decode = p["mode"] == "decode";
        name += decode ? "_decode" : "_prefill";
        if (!decode && p.value("batch", 1) != 1) continue;  // the API's prefill conv is one sequence
        t = km.conv1d(decode ? i("batch") : i("tokens"), i("channels"), i("kernel"), decode);
      } else {
        continue;  // elementwise/copy: keyed by op; nccl, moe, gdn, encoder: their own tests
      }
      const auto* fc = cal.family(name);
      ASSERT_NE(fc, nullptr) << name;
      if (fc->origin != origin) continue;  // shadowed by a vLLM table
      double meas = p["ms"].get<double>() * 1e-3;
      double err = std::fabs(t.seconds - t.cold_weights_s - meas) / meas;
      // A measured shape answers with its measurement (plus, for a table that timed its weights
      // resident in L2, their cold read: KernelModel.ColdWeightsAsMeasured).
      EXPECT_LT(err, 1e-9) << name << " " << p.dump();
      EXPECT_EQ(t.source, Source::measured) << name << " " << p.dump();
      ++checked;
    }
  }
  EXPECT_GT(checked, 3000);
  // The surface itself (the measurement not returned; nearest-shape interpolation leaves the point
  // out) reproduces every point within the bound the report prints, and most points well inside
  // the held-out target: the bound is not carried by a few outliers.
  for (const auto& [name, f] : cal.families()) {
    std::vector<double> errs;
    for (const auto& s : f.samples) {
      double err = std::fabs(f.fit.predict(s, nullptr, true) - s.seconds) / s.seconds;
      EXPECT_LE(err, f.fit_max_error + 1e-9) << name;
      errs.push_back(err);
    }
    std::sort(errs.begin(), errs.end());
    EXPECT_GT(f.fit_max_error, 0) << name;  // a real surface, not the stored measurements
    EXPECT_LE(errs[errs.size() / 2], 0.12) << name;
  }
}

// The cold-weights term against the H200 runs it was fitted on (hwmodels/measure/results/
// h200_l2_reuse*.json: GEMMs, MoE expert GEMMs, decode attention): each point's cold minus resident time, where copies x bytes stay within 3/4
// of the L2, is the law's within 1.5 us (3.4 sd of the dense residuals); past it the term is 0 and
// so is the measured gap, within 2 us or 3 % of the call (the replay's noise on 0.2-1.4 ms calls). By hand: a 7.34 MB bf16 GEMM timed on 6 copies (44 MB, 70 %
// of the 60 MiB L2) pays 0.54 + 0.093 x 7.34 = 1.22 us; on a B200 (7.7 TB/s) 0.54 + 0.093 x 7.34 x
// 4.8 / 7.7 = 0.97 us.
TEST(KernelModel, ColdWeightsAsMeasured) {
  int inside = 0, outside = 0;
  double l2 = 0;
  for (const char* file : {"h200_l2_reuse.json", "h200_l2_reuse_attention.json"}) {
    std::ifstream in(std::string(SERVESIM_SOURCE_DIR) + "/hwmodels/measure/results/" + file);
    ASSERT_TRUE(in) << file;
    const auto doc = nlohmann::json::parse(in);
    l2 = doc["env"]["l2_bytes"].get<double>();
    EXPECT_EQ(l2, gpu("H200").l2_bytes);
    // A point's shape: every field but how it was timed.
    auto key = [](nlohmann::json p) {
      for (const char* k : {"mode", "copies", "ms", "ms_eager"}) p.erase(k);
      return p.dump();
    };
    std::map<std::string, double> cold;
    for (const auto& p : doc["points"])
      if (p["mode"] == "cold") cold[key(p)] = p["ms"].get<double>() * 1e-3;
    for (const auto& p : doc["points"]) {
      if (p["mode"] == "cold" || !cold.count(key(p))) continue;
      const double bytes = p["weight_bytes"].get<double>(), copies = p["copies"].get<double>();
      // The family of a table that timed the op this way: one copy is the MoE / attention / nvfp4
      // method, six the GEMMs'.
      const std::string family = p["op"] == "moe_experts"        ? "moe_bf16_triton"
                                 : p["op"] == "attention_decode" ? "attention_decode"
                                 : copies == 1                    ? "gemm_nvfp4"
                                                                  : "gemm_bf16";
      const double law = cold_weights(family, "vllm", l2, 4.8e12).seconds(bytes);
      const double gap = cold[key(p)] - p["ms"].get<double>() * 1e-3;
      if (copies * bytes <= 0.75 * l2) {
        EXPECT_GT(law, 0) << p.dump();
        EXPECT_NEAR(gap, law, 1.5e-6) << p.dump();
        ++inside;
      } else {
        EXPECT_EQ(law, 0) << p.dump();
        EXPECT_NEAR(gap, 0, std::max(2e-6, 0.03 * p["ms"].get<double>() * 1e-3)) << p.dump();
        ++outside;
      }
    }
  }
  EXPECT_GE(inside, 90);
  EXPECT_GE(outside, 130);
  EXPECT_NEAR(cold_weights("gemm_bf16", "vllm", l2, 4.8e12).seconds(7.34e6), 1.2226e-6, 1e-9);
  EXPECT_NEAR(cold_weights("gemm_bf16", "vllm", 126e6, 7.7e12).seconds(7.34e6), 0.54e-6 + 0.093e-6 * 7.34 * 4.8 / 7.7, 1e-12);
  // This project's own runs rotate their operands, and prefill attention is compute-bound: nothing.
  EXPECT_EQ(cold_weights("gemm_bf16", "torch", l2, 4.8e12).seconds(7.34e6), 0);
  EXPECT_EQ(cold_weights("attention_prefill", "vllm", l2, 4.8e12).seconds(1e6), 0);
  // In a step: gpt-oss-120b's TP8 QKV projection (2880 -> 640, 3.7 MB of bf16) at 4 tokens.
  const OpTime t = kernel_model(gpu("H200")).gemm(4, 640, 2880, Precision::bf16);
  EXPECT_NEAR(t.cold_weights_s, 0.54e-6 + 0.093e-6 * (2.0 * (4 * 2880 + 640 * 2880 + 4 * 640)) / 1e6, 1e-10);
}

// Families no vLLM table covers come from the H200 PyTorch/Triton runs on every other GPU; the
// measured ones do not.
TEST(KernelModel, OtherGpusAreTransferred) {
  for (const char* n : {"B200", "B300", "H100", "GB200", "GB300"}) {
    const auto& km = kernel_model(gpu(n));
    EXPECT_NE(km.provenance().find("transferred from H200"), std::string::npos) << n;
    EXPECT_EQ(km.mamba_step(64, 64, 64, 128, 8).source, Source::transferred) << n;
    EXPECT_EQ(km.mamba_scan(1, 8192, 64, 64, 128, 8).source, Source::transferred) << n;
    EXPECT_EQ(km.grouped_gemm(128, 4096, 1856, 2688, Precision::bf16).source, Source::transferred) << n;
    EXPECT_EQ(km.memory_bound(1e8).source, Source::transferred) << n;
    EXPECT_NE(km.gemm(4096, 4096, 4096, Precision::bf16).source, Source::transferred) << n;
    EXPECT_NE(km.attention_prefill(1, 4096, 32, 8, 128).source, Source::transferred) << n;
  }
  EXPECT_NE(kernel_model(gpu("H200")).provenance().find("measured on H200"), std::string::npos);
}

TEST(KernelModel, TransferFollowsPeaksAndPriors) {
  // A compute-bound grouped GEMM (measured on the H200 only) on B200 vs H200:
  // (989 / 2250) × (0.78 / 0.65) of the H200 time, the launch term aside.
  const auto& h200 = gpu("H200");
  const auto& b200 = gpu("B200");
  double th = kernel_model(h200).grouped_gemm(8, 65536, 14336, 4096, Precision::bf16).seconds;
  double tb = kernel_model(b200).grouped_gemm(8, 65536, 14336, 4096, Precision::bf16).seconds;
  double expect = h200.bf16_flops / b200.bf16_flops * h200.priors.gemm_bf16 / b200.priors.gemm_bf16;
  EXPECT_NEAR(tb / th, expect, 0.05 * expect);
  // A bandwidth-bound state update scales with HBM bandwidth × memory prior.
  double gh = kernel_model(h200).mamba_step(512, 128, 64, 128, 8).seconds;
  double gb = kernel_model(b200).mamba_step(512, 128, 64, 128, 8).seconds;
  double bw = h200.hbm_bw_bytes_per_s * h200.priors.memory / (b200.hbm_bw_bytes_per_s * b200.priors.memory);
  EXPECT_NEAR(gb / gh, bw, 0.1 * bw);
}

TEST(KernelModel, Nvfp4FallbackOnHopperReadsFourBitWeights) {
  const auto& km = kernel_model(gpu("H200"));
  double bf16 = km.gemm(1, 16384, 16384, Precision::bf16).seconds;
  double fp4 = km.gemm(1, 16384, 16384, Precision::nvfp4).seconds;
  EXPECT_LT(fp4, 0.45 * bf16);  // 0.5625 of a byte per weight instead of 2
  EXPECT_NE(km.gemm(1, 16384, 16384, Precision::nvfp4).source, Source::measured);
  // Compute-bound: the BF16 tensor cores set the pace.
  double big16 = km.gemm(16384, 16384, 16384, Precision::bf16).seconds;
  double big4 = km.gemm(16384, 16384, 16384, Precision::nvfp4).seconds;
  EXPECT_NEAR(big4 / big16, 1.0, 0.1);
}

// Sliding windows the tables timed (AIC: 128 on every GPU) use those rows; a window they did not
// time runs as full attention over one sequence with as many causal query-key pairs (prefill) or
// over the window's tokens (decode), not as a full-attention row of the same length.
TEST(KernelModel, UnmeasuredSlidingWindowCountsItsPairs) {
  const auto& km = kernel_model(gpu("H200"));
  const auto bf16 = Precision::bf16;
  const double full = km.attention_prefill(1, 8192, 64, 8, 64, bf16, 0).seconds;
  const double w128 = km.attention_prefill(1, 8192, 64, 8, 64, bf16, 128).seconds;
  EXPECT_LT(w128, 0.25 * full);
  // 1,024 is not timed for this shape: 8192 x 1024 - 1024^2 / 2 pairs = one 3,966-token sequence.
  const double pairs = 8192.0 * 1024 - 0.5 * 1024 * 1024;
  const auto equal = std::int64_t(std::round(std::sqrt(2 * pairs)));
  ASSERT_EQ(equal, 3966);
  EXPECT_DOUBLE_EQ(km.attention_prefill(1, 8192, 64, 8, 64, bf16, 1024).seconds,
                   km.attention_prefill(1, equal, 64, 8, 64, bf16, 0).seconds);
  // A window longer than the prompt changes nothing.
  EXPECT_DOUBLE_EQ(km.attention_prefill(1, 2000, 64, 8, 64, bf16, 4096).seconds,
                   km.attention_prefill(1, 2000, 64, 8, 64, bf16, 0).seconds);
  EXPECT_DOUBLE_EQ(km.attention_decode(64, 8192, 64, 8, 64, bf16, 4096).seconds,
                   km.attention_decode(64, 4096, 64, 8, 64, bf16, 0).seconds);
  // A stand-in is never reported as measured, even where the row it borrows was.
  ASSERT_EQ(km.attention_decode(64, 4096, 64, 8, 64, bf16, 0).source, Source::measured);
  EXPECT_EQ(km.attention_decode(64, 8192, 64, 8, 64, bf16, 4096).source, Source::interpolated);
}

TEST(KernelModel, LaunchOverheadMeasured) {
  LaunchOverhead h = launch_overhead(gpu("H200"));
  EXPECT_GT(h.eager_per_kernel_s, h.graph_per_kernel_s);
  EXPECT_GT(h.graph_per_kernel_s, 0);
  EXPECT_LT(h.eager_per_kernel_s, 1e-3);
  EXPECT_NE(h.source.find("measured"), std::string::npos);
  LaunchOverhead b = launch_overhead(gpu("B200"));
  EXPECT_DOUBLE_EQ(b.eager_per_kernel_s, h.eager_per_kernel_s);
  EXPECT_NE(b.source.find("transferred"), std::string::npos);
}

TEST(KernelModel, BadShapesThrow) {
  const auto& km = kernel_model(gpu("H200"));
  EXPECT_THROW(km.gemm(0, 10, 10, Precision::bf16), servesim::Error);
  EXPECT_THROW(km.attention_decode(1, -5, 8, 8, 128), servesim::Error);
  EXPECT_THROW(parse_collective("broadcast"), servesim::Error);
  EXPECT_EQ(parse_collective("All-Reduce"), Collective::all_reduce);
  EXPECT_THROW(km.collective(Collective::all_reduce, 1e6, {16, 1, nullptr}), servesim::Error);  // > NVLink domain
}

// `calibrate fit DIR` on points made from a known roofline: the fit must give it back.
TEST(Calibration, FitRecoversAKnownRoofline) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / "calib_known";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto& h200 = gpu("H200");
  nlohmann::json pts = nlohmann::json::array();
  for (double b = 1e4; b < 1e10; b *= 1.7)  // copy: 2 × bytes moved at 80% of 4.8 TB/s + 2 µs
    pts.push_back({{"bytes", b}, {"ms", (2e-6 + 2 * b / (0.8 * h200.hbm_bw_bytes_per_s)) * 1e3}});
  nlohmann::json doc = nlohmann::json::object();
  doc["about"] = "synthetic";
  doc["family"] = "copy";
  doc["points"] = pts;
  std::ofstream(dir / "copy.json") << doc.dump();
  Calibration c = Calibration::from_dir(dir.string(), h200);
  const auto* f = c.family("copy");
  ASSERT_NE(f, nullptr);
  EXPECT_LT(f->cv.median, 0.01);
  EXPECT_NEAR(f->fit.memory_efficiency(), 0.8, 0.01);
  EXPECT_NEAR(f->fit.launch_s(), 2e-6, 0.05e-6);
  std::ofstream(dir / "bad.json") << R"({"family": "gemm", "points": [{"dtype": "bf16", "m": 1, "n": 2}]})";
  try {
    Calibration::from_dir(dir.string(), h200);
    FAIL();
  } catch (const servesim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("points[0].k"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Calibration::from_dir((dir / "nope").string(), h200), servesim::Error);
}

// The method choice is not tuned to the report's split: a second deterministic split (every fifth
// point from the third) holds every family that meets the target on the first to the same target.
// elementwise meets the median on both but its p90 on this split is 21.7%: its points are placed
// by bytes alone (memory_bound() queries carry no token/hidden split), so narrow and wide norms
// of equal bytes stand in for each other.
TEST(Calibration, SecondSplitMeetsTheTarget) {
  Calibration c = Calibration::embedded(gpu("H200"));
  for (const auto& [name, f] : c.families()) {
    if (f.origin != "torch") continue;  // the vLLM tables: test_vllm_kernels.cpp
    bool meets = f.cv.median <= 0.08 && f.cv.p90 <= 0.20;
    EXPECT_TRUE(meets) << name << " median " << f.cv.median << " p90 " << f.cv.p90;
    CrossValidation other = cross_validate(f.samples, f.fit.method(), f.prior_compute, f.prior_memory, 2);
    EXPECT_EQ(other.held_out, static_cast<int>((f.samples.size() + 2) / 5)) << name;
    EXPECT_LE(other.median, 0.08) << name;
    EXPECT_LE(other.p90, name == "elementwise" ? 0.25 : 0.20) << name;
  }
}

// A glitch in a measured series (one point 5x off both neighbours, which agree) is returned at
// its own shape but stands in for no other; a shape far beyond every measurement keeps the ratio
// to the fitted roofline of its nearest measured shapes instead of extrapolating a slope.
TEST(Calibration, GlitchesAndFarShapes) {
  auto point = [](double m, double n) {
    Sample s;
    s.key = shape_key({n, 4096});
    s.x = gemm_features(m, n, 4096);
    s.compute_s = 2 * m * n * 4096 / 989e12;
    s.memory_s = (m * 4096 * 2 + n * 4096 * 2 + m * n * 2) / 4.8e12;
    s.seconds = 1.25 * std::max(s.compute_s, s.memory_s) + 5e-6;  // by hand: 80% of the roofline + 5 us
    return s;
  };
  std::vector<Sample> pts;
  for (double n : {2048.0, 4096.0, 8192.0})
    for (double m = 1; m <= 32768; m *= 2) pts.push_back(point(m, n));
  const size_t glitch = 15 + 5;  // n 4096, m 32
  pts[glitch].seconds *= 5;
  FamilyFit fit(pts, FitMethod::local_linear);
  for (size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(fit.spike(i), i == glitch) << i;
  bool exact = false;
  EXPECT_DOUBLE_EQ(fit.predict(pts[glitch], &exact), pts[glitch].seconds);  // the measurement itself
  EXPECT_TRUE(exact);
  for (double m : {24.0, 48.0, 40.0}) {  // around the glitch: the clean neighbours' answer
    const Sample q = point(m, 4096);
    EXPECT_NEAR(fit.predict(q) / q.seconds, 1.0, 0.05) << m;
  }
  const Sample far = point(1 << 22, 4096);  // 128x the largest measured m
  EXPECT_NEAR(fit.predict(far) / far.seconds, 1.0, 0.05);
}

// A held-out row that is a glitch of the whole measured set is counted and listed, and left out
// of the median / p90 / max, which the *_all figures keep it in: by hand, the clean neighbours
// predict the clean time (80% of the roofline + 5 us) and the glitch measures 5x that, so its
// error is (5 - 1) / 5 = 0.8 while every clean row stays within 10%.
TEST(Calibration, HeldOutGlitchesAreCountedApart) {
  std::vector<Sample> pts;
  for (double n : {2048.0, 4096.0, 8192.0})
    for (double m = 1; m <= 32768; m *= 2) {
      Sample s;
      s.key = shape_key({n, 4096});
      s.x = gemm_features(m, n, 4096);
      s.compute_s = 2 * m * n * 4096 / 989e12;
      s.memory_s = (m * 4096 * 2 + n * 4096 * 2 + m * n * 2) / 4.8e12;
      s.seconds = 1.25 * std::max(s.compute_s, s.memory_s) + 5e-6;
      pts.push_back(s);
    }
  const size_t glitch = 16 + 3;  // n 4096, m 8: held out (index % 5 == 4)
  ASSERT_TRUE(held_out(glitch));
  pts[glitch].seconds *= 5;
  const CrossValidation cv = cross_validate(pts, FitMethod::local_linear);
  EXPECT_EQ(cv.held_out, 9);
  EXPECT_EQ(cv.glitches, 1);
  ASSERT_EQ(cv.glitch_rows.size(), 1u);
  EXPECT_EQ(cv.glitch_rows[0], int(glitch));
  EXPECT_LT(cv.max, 0.10);
  EXPECT_NEAR(cv.max_all, 0.8, 0.05);
  for (const auto& [err, i] : cv.worst) EXPECT_NE(i, int(glitch));
}

// Collectives are fitted on each series' lower envelope along the message size. An all-to-all
// series of 7 us + bytes / 100 GB/s from 512 B to 1 MiB, with the 16 and 32 KiB rows measured
// 2.2x slow (as H100 NCCL all-to-all on 8 GPUs): with the envelope a query at 16 KiB costs what
// 64 KiB measured (7 + 0.66 us), both slow rows are held-out glitches (over 1.5x a larger
// message of their series), and every other held-out row is within 10%. Without it, the slow
// pair is returned as measured and carried onto the rows beside it.
TEST(Calibration, CollectivesFitTheirLowerEnvelope) {
  std::vector<Sample> pts;
  auto truth = [](double bytes) { return 7e-6 + bytes / 100e9; };
  for (double b = 512; b <= 1048576; b *= 2) {
    Sample s;
    s.key = s.group = shape_key({8});
    s.x = bytes_features(b);
    s.memory_s = b / 400e9;
    s.seconds = truth(b) * (b == 16384 || b == 32768 ? 2.2 : 1);
    pts.push_back(s);
  }
  ASSERT_EQ(pts.size(), 12u);
  const FitOptions envelope{.robust_plane = false, .size_envelope = true};
  const FamilyFit fit(pts, FitMethod::local_linear, 0.7, 0.7, envelope);
  EXPECT_NEAR(fit.predict(pts[5]), truth(65536), 1e-12);  // 16 KiB
  EXPECT_NEAR(fit.predict(pts[9]), truth(262144), 1e-12);  // a clean row returns its measurement
  EXPECT_NEAR(FamilyFit(pts, FitMethod::local_linear).predict(pts[5]), 2.2 * truth(16384), 1e-12);
  const CrossValidation cv = cross_validate(pts, FitMethod::local_linear, 0.7, 0.7, kAllFolds, envelope);
  EXPECT_EQ(cv.held_out, 12);
  ASSERT_EQ(cv.glitch_rows.size(), 2u);
  EXPECT_EQ(cv.glitch_rows[0], 5);
  EXPECT_EQ(cv.glitch_rows[1], 6);
  EXPECT_LT(cv.max, 0.10);
  EXPECT_GT(cross_validate(pts, FitMethod::local_linear, 0.7, 0.7, kAllFolds).p90, 0.30);
}

// Series fits (fused MoE): the token count moves every coordinate, so no grid line brackets a
// point, and a glitch is judged against its series neighbours in tokens. One that is off their
// interpolation by more than 1.5x and out of order in time (16 tokens slower than 64) is a
// glitch; a kernel step that stays (every count from 64 on twice as slow) is not.
TEST(Calibration, SeriesGlitchesAreOutOfOrderInTime) {
  auto series = [](double step_from, double glitch_at) {
    std::vector<Sample> pts;
    for (double t = 1; t <= 4096; t *= 4) {
      Sample s;
      s.key = shape_key({7168, 2048});
      s.x = {std::log(t), std::log(std::min(t * 8, 384.0)), std::log(t * 8 / std::min(t * 8, 384.0))};
      s.memory_s = std::min(t * 8, 384.0) * 7168 * 2048 * 3 / 2 / 4.8e12;
      s.compute_s = t * 8 * 7168 * 2048 * 6 / 989e12;
      s.seconds = (1.25 * std::max(s.compute_s, s.memory_s) + 20e-6) * (t >= step_from ? 2 : 1) * (t == glitch_at ? 6 : 1);
      pts.push_back(s);
    }
    return pts;
  };
  const std::vector<Sample> glitchy = series(1e9, 16);
  const FamilyFit g(glitchy, FitMethod::local_linear_series);
  for (size_t i = 0; i < glitchy.size(); ++i) EXPECT_EQ(g.spike(i), i == 2) << i;  // 1, 4, 16, ...
  ASSERT_GT(glitchy[2].seconds, 1.5 * glitchy[3].seconds);  // by hand: 16 tokens slower than 64
  const std::vector<Sample> stepped = series(64, 0);
  const FamilyFit s(stepped, FitMethod::local_linear_series);
  for (size_t i = 0; i < stepped.size(); ++i) EXPECT_FALSE(s.spike(i)) << i;
}

// Nearest-shape interpolation: a shape between measured ones lands between their times, and it
// never beats the datasheet roofline.
TEST(Calibration, NearestShapeInterpolation) {
  std::vector<Sample> pts;
  for (double m : {256.0, 1024.0, 4096.0}) {
    Sample s;
    s.x = gemm_features(m, 4096, 4096);
    s.compute_s = 2 * m * 4096 * 4096 / 989e12;
    s.memory_s = (m * 4096 * 2 + 4096 * 4096 * 2 + m * 4096 * 2) / 4.8e12;
    s.seconds = 1.25 * std::max(s.compute_s, s.memory_s) + 5e-6;
    pts.push_back(s);
  }
  FamilyFit fit(pts, FitMethod::nearest_log);
  Sample q = pts[1];
  bool exact = false;
  EXPECT_DOUBLE_EQ(fit.predict(q, &exact), pts[1].seconds);
  EXPECT_TRUE(exact);
  q.x = gemm_features(2048, 4096, 4096);
  q.compute_s = 2 * 2048.0 * 4096 * 4096 / 989e12;
  q.memory_s = (2048.0 * 4096 * 4 + 4096.0 * 4096 * 2) / 4.8e12;
  double t = fit.predict(q, &exact);
  EXPECT_FALSE(exact);
  EXPECT_GT(t, pts[1].seconds);
  EXPECT_LT(t, pts[2].seconds);
  EXPECT_GE(t, std::max(q.compute_s, q.memory_s));
}

// Routing as the measurement script does it: even split, or Zipf shares with largest remainders.
TEST(Calibration, RoutingMatchesTheRecordedSplit) {
  Routing even = route(128, 64, 0);
  EXPECT_EQ(even.max_tokens, 1);
  EXPECT_EQ(even.active, 64);
  EXPECT_EQ(route(8, 4096, 0).max_tokens, 512);
  // Every skewed point of the committed file records its busiest expert and active experts.
  auto doc = nlohmann::json::parse(servesim::data::get("hwmodels/calibration/h200/grouped_gemm.json"));
  expand_point_rows(doc, "grouped_gemm.json");
  int skewed = 0;
  for (const auto& p : doc["points"]) {
    if (p.value("routing", "balanced") != "skewed") continue;
    Routing r = route(p["experts"].get<int>(), p["tokens"].get<double>(), p["skew"].get<double>());
    EXPECT_EQ(r.max_tokens, p["max_expert_tokens"].get<double>()) << p.dump();
    EXPECT_EQ(r.active, p["active_experts"].get<double>()) << p.dump();
    ++skewed;
  }
  EXPECT_GT(skewed, 0);
}

TEST(Calibration, ReportCoversEveryCommittedFamily) {
  Calibration c = Calibration::embedded(gpu("H200"));
  c.validate();
  ASSERT_FALSE(c.empty());
  for (const auto& [name, f] : c.families()) {
    EXPECT_GT(f.cv.held_out, 0) << name;
    EXPECT_GE(f.cv.p90, f.cv.median) << name;
    EXPECT_GE(f.cv.max, f.cv.p90) << name;
    EXPECT_EQ(f.cv.held_out, static_cast<int>(f.samples.size())) << name;  // five folds: every point once
  }
  EXPECT_FALSE(Calibration::embedded(gpu("B200")).empty());
}

// The indexed nearest-shape search returns exactly what a scan of every point of the group gives:
// on every measured shape (stored and surface values) and on off-grid shapes of every family.
namespace {
double brute_nearest(const FamilyCalibration& f, const Sample& q, bool surface_only) {
  const auto s = f.options.size_envelope ? lower_envelope(f.samples) : f.samples;  // what the fit saw
  bool known = std::any_of(s.begin(), s.end(), [&](const Sample& x) { return x.group == q.group; });
  std::vector<std::pair<double, size_t>> c;
  for (size_t i = 0; i < s.size(); ++i) {
    if (known && s[i].group != q.group) continue;
    double d = 0;
    for (int j = 0; j < kMaxFeatures; ++j) d += (s[i].x[j] - q.x[j]) * (s[i].x[j] - q.x[j]);
    if (d < 1e-9) {
      if (!surface_only) return std::max(s[i].seconds, std::max(q.compute_s, q.memory_s));
      continue;
    }
    if (f.fit.spike(i)) continue;  // a glitch stands in for no other shape
    c.push_back({d, i});
  }
  std::sort(c.begin(), c.end());
  double ls = f.fit.roofline_fit(q.compute_s, q.memory_s), sw = 0, sr = 0;
  for (size_t j = 0; j < std::min<size_t>(4, c.size()); ++j) {
    const Sample& x = s[c[j].second];
    sw += 1 / c[j].first, sr += std::log(x.seconds / f.fit.roofline_fit(x.compute_s, x.memory_s)) / c[j].first;
  }
  double t = c.empty() ? ls : ls * std::exp(sr / sw);
  return std::max(t, std::max(q.compute_s, q.memory_s));
}
}  // namespace

TEST(Calibration, IndexedNearestMatchesFullScan) {
  Calibration c = Calibration::embedded(gpu("H200"));
  int checked = 0;
  for (const auto& [name, f] : c.families()) {
    if (f.fit.method() != FitMethod::nearest_log) continue;
    for (size_t i = 0; i < f.samples.size(); ++i) {
      Sample q = f.samples[i];
      for (bool surface : {false, true}) {
        double a = f.fit.predict(q, nullptr, surface), b = brute_nearest(f, q, surface);
        EXPECT_LE(std::fabs(a - b), 1e-12 * b) << name;  // the same neighbours; sums may round apart
      }
      q.x[0] += 0.37, q.x[1] -= 0.21;  // off the grid, near its series
      q.key ^= i % 3 ? 0 : 0x9e3779b97f4a7c15ull;  // a third of them with no series of their own
      EXPECT_LE(std::fabs(f.fit.predict(q) - brute_nearest(f, q, false)), 1e-12 * brute_nearest(f, q, false)) << name;
      checked += 3;
    }
  }
  EXPECT_GT(checked, 10000);
}
