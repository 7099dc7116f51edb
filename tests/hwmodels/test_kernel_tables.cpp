// Kernel tables per engine release (hw::KernelTables): each release's measured rows come back as
// measured, a family a release lacks falls back to the next nearest release, then to vLLM 0.24,
// and a lazily read calibration fits the same bits as one read whole. Expected times are rows of
// hwmodels/calibration/h200/<release>/*.json (the "ms" column, x 1e-3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hwmodels/calibration.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"

using namespace servesim::hw;

namespace {
const GpuSpec& h200() { return Catalog::global().gpu("H200"); }
// What the table timed: the model's time less the cold-weights term it adds to a resident-L2 row.
double table_s(const OpTime& t) { return t.seconds - t.cold_weights_s; }
}  // namespace

TEST(KernelTables, ReleaseFoldersAreDiscoveredFromTheEmbeddedFiles) {
  const auto r = Calibration::embedded_releases(h200());
  for (const char* want : {"sglang-0.5.14", "trtllm-1.3.0rc20", "vllm-0.14.0", "vllm-0.18.0", "vllm-0.19.0", "vllm-0.22.0"})
    EXPECT_NE(std::find(r.begin(), r.end(), want), r.end()) << want;
  EXPECT_EQ(std::find(r.begin(), r.end(), "vllm"), r.end());  // the 0.24 tables are the base folder
}

TEST(KernelTables, ALoneGemmShapeReturnsEachReleasesMeasuredTime) {
  // bf16 64 x 4096 x 4096 on the H200: 0.01216 ms in vLLM 0.19's table, 0.012 in 0.14's, 0.01205 in 0.24's.
  const struct { const char* version; double ms; const char* table; } rows[] = {
      {"0.19", 0.01216, "vLLM 0.19.0 table"}, {"0.14", 0.012, "vLLM 0.14.0 table"}, {"0.24", 0.01205, "vLLM 0.24.0"}};
  for (const auto& r : rows) {
    const OpTime t = kernel_model(h200(), {"vllm", r.version}).gemm(64, 4096, 4096, Precision::bf16);
    EXPECT_DOUBLE_EQ(table_s(t), r.ms * 1e-3) << r.version;
    EXPECT_EQ(t.source, Source::measured) << r.version;
    EXPECT_EQ(t.table, r.table) << r.version;
  }
  // fp8 per tensor: 0.01836 ms in 0.14's table against 0.01079 in 0.24's.
  EXPECT_DOUBLE_EQ(table_s(kernel_model(h200(), {"vllm", "0.14"}).gemm(64, 4096, 4096, Precision::fp8)), 0.01836e-3);
}

TEST(KernelTables, OtherEnginesNameTheirOwnTables) {
  // SGLang 0.5.14 decode attention (fa3), 16 sequences of 1,024 tokens, 32 query / 4 KV heads of 128, bf16 KV.
  const OpTime a = kernel_model(h200(), {"sglang", "0.5"}).attention_decode(16, 1024, 32, 4, 128, Precision::bf16, 0);
  EXPECT_DOUBLE_EQ(table_s(a), 0.01542e-3);
  EXPECT_EQ(a.table, "SGLang 0.5.14 table");
  EXPECT_EQ(a.kernel, "fa3");
  // TensorRT-LLM 1.3.0rc20 fused MoE (its CUTLASS MoE): 1,024 tokens, hidden 7168, inter 2048, top-8 of
  // 256, TP1 EP1, balanced, FP8 128-block weights: 3.333 ms (vLLM 0.19's Triton fused_moe: 3.292).
  const MoeShape s{1024, 7168, 2048, 8, 256, 1, 1};
  const OpTime m = kernel_model(h200(), {"trtllm", "1.3"}).moe(s, Precision::fp8_block);
  EXPECT_DOUBLE_EQ(table_s(m), 3.333e-3);
  EXPECT_EQ(m.table, "TensorRT-LLM 1.3.0rc20 table");
  EXPECT_EQ(m.kernel, "moe_torch_flow_cutlass");
  EXPECT_DOUBLE_EQ(table_s(kernel_model(h200(), {"vllm", "0.19"}).moe(s, Precision::fp8_block)), 3.292e-3);
}

// A TP all-reduce timed on another engine's rows carries that engine's kernel name, not vLLM's
// pick for the size. 8 H200s: SGLang 0.5.14 1 MiB 0.01305 ms, 16 MiB 0.1076 ms (custom_all_reduce.json
// rows [8,1048576,..], [8,16777216,..]); TensorRT-LLM 1.3.0rc20 16 MiB 0.1214 ms.
TEST(KernelTables, OtherEnginesNameTheirOwnAllReduce) {
  const double MiB = 1024.0 * 1024.0;
  const KernelModel& sg = kernel_model(h200(), {"sglang", "0.5"});
  const OpTime small = sg.tp_all_reduce(1 * MiB, 8), large = sg.tp_all_reduce(16 * MiB, 8);
  EXPECT_DOUBLE_EQ(small.seconds, 0.01305e-3);
  EXPECT_EQ(small.kernel, "SGLang custom all-reduce");
  EXPECT_DOUBLE_EQ(large.seconds, 0.1076e-3);
  EXPECT_EQ(large.kernel, "SGLang PyNCCL all-reduce");  // at and above its 8 MiB switch
  EXPECT_EQ(large.table, "SGLang 0.5.14 table");
  const OpTime trt = kernel_model(h200(), {"trtllm", "1.3"}).tp_all_reduce(16 * MiB, 8);
  EXPECT_DOUBLE_EQ(trt.seconds, 0.1214e-3);
  EXPECT_EQ(trt.kernel, "TensorRT-LLM AllReduce (strategy AUTO)");
  EXPECT_EQ(trt.table, "TensorRT-LLM 1.3.0rc20 table");
  // vLLM's own rows keep vLLM's pick: torch symmetric memory (multimem) at 16 MiB on 8 Hopper GPUs.
  EXPECT_EQ(kernel_model(h200(), {"vllm", "0.19"}).tp_all_reduce(16 * MiB, 8).kernel, "torch symm-mem multimem all-reduce");
}

TEST(KernelTables, NearestMeasuredRelease) {
  const auto table = [](const char* engine, const char* version) {
    return std::string(kernel_model(h200(), {engine, version}).gemm(64, 4096, 4096, Precision::bf16).table);
  };
  // Nothing at or below 0.12: the oldest above.
  EXPECT_EQ(table("vllm", "0.12"), "vLLM 0.14.0 table (nearest measured: 0.14.0 for 0.12)");
  // Between releases: the newest below.
  EXPECT_EQ(table("vllm", "0.20"), "vLLM 0.19.0 table (nearest measured: 0.19.0 for 0.20)");
  EXPECT_EQ(table("vllm", "0.19.1"), "vLLM 0.19.0 table (nearest measured: 0.19.0 for 0.19.1)");
  // At or past 0.24: the 0.24 tables.
  EXPECT_EQ(table("vllm", "0.24"), "vLLM 0.24.0");
  EXPECT_EQ(table("vllm", "0.30"), "vLLM 0.24.0");
  // A release is a build of the version asked: "1.3" asks for 1.3.0rc20.
  EXPECT_EQ(table("trtllm", "1.3"), "TensorRT-LLM 1.3.0rc20 table");
  EXPECT_EQ(table("sglang", "0.5.14"), "SGLang 0.5.14 table");
  // An engine with no tables here: vLLM 0.24's.
  EXPECT_EQ(table("other", "1.0"), "vLLM 0.24.0");
}

TEST(KernelTables, AFamilyAReleaseLacksFallsBackAndSaysSo) {
  // vLLM 0.22 timed no fused MoE nor custom all-reduce on the H200: the next nearest release (0.19,
  // the newest below) times them; a family no vLLM release timed (the Mamba state update) comes from
  // this project's H200 runs, NCCL from the 0.24 collection.
  const KernelModel& km = kernel_model(h200(), {"vllm", "0.22"});
  EXPECT_EQ(km.gemm(64, 4096, 4096, Precision::bf16).table, "vLLM 0.22.0 table");
  const OpTime m = km.moe({1024, 7168, 2048, 8, 256, 1, 1}, Precision::fp8_block);
  EXPECT_EQ(m.table, "vLLM 0.19.0 table (nearest measured: 0.19.0 for 0.22)");
  EXPECT_DOUBLE_EQ(table_s(m), 3.292e-3);
  EXPECT_EQ(km.tp_all_reduce(1 << 20, 8).table, "vLLM 0.19.0 table (nearest measured: 0.19.0 for 0.22)");
  EXPECT_TRUE(km.mamba_step(64, 128, 64, 128, 8).table.starts_with("torch"));
  EXPECT_EQ(km.collective(Collective::all_gather, 1 << 24, {8, 1, nullptr}).table, "NCCL 2.29.2");
  EXPECT_NE(km.provenance().find("vLLM 0.19.0 table (nearest measured: 0.19.0 for 0.22): "), std::string::npos);
  // SGLang timed no fp8 per-tensor MoE on the H200: the rule's FP8 block rows of its own table.
  const OpTime s = kernel_model(h200(), {"sglang", "0.5"}).moe({1024, 7168, 2048, 8, 256, 1, 1}, Precision::fp8);
  EXPECT_EQ(s.table, "SGLang 0.5.14 table");
  EXPECT_EQ(s.source, Source::interpolated);  // another format's rows: never reported as measured
}

TEST(KernelTables, TheDefaultTablesAreTheSameModel) {
  EXPECT_EQ(&kernel_model(h200()), &kernel_model(h200(), KernelTables{}));
  EXPECT_EQ(&kernel_model(h200(), {"vllm", "0.19"}), &kernel_model(h200(), {"vllm", "0.19"}));
}

// Reading lazily (one family at a time, in any order) fits the same bits as reading every file first.
TEST(KernelTables, LazyReadingFitsTheSameBitsAsAWholeRead) {
  for (const char* gpu : {"H200", "B200"}) {
    const GpuSpec& g = Catalog::global().gpu(gpu);
    for (const std::string& release : {std::string(), std::string("vllm-0.19.0")}) {
      const Calibration whole = Calibration::embedded(g, release);
      const auto& all = whole.families();
      ASSERT_FALSE(all.empty()) << gpu << " " << release;
      const Calibration lazy = Calibration::embedded(g, release);
      for (auto it = all.rbegin(); it != all.rend(); ++it) {  // the other order
        const FamilyCalibration* f = lazy.family(it->first);
        ASSERT_NE(f, nullptr) << it->first;
        ASSERT_EQ(f->samples.size(), it->second.samples.size()) << it->first;
        EXPECT_EQ(f->fit_max_error, it->second.fit_max_error) << it->first;
        for (std::size_t i = 0; i < f->samples.size(); ++i) {
          Sample q = it->second.samples[i];
          q.x[0] += 0.37;  // off the measured shape: the fitted surface, not the stored row
          EXPECT_EQ(f->fit.predict(q, nullptr), it->second.fit.predict(q, nullptr)) << it->first << " " << i;
          EXPECT_EQ(f->samples[i].seconds, it->second.samples[i].seconds);
        }
      }
    }
  }
}

// A provenance line needs each family's name, origin, runtime and rejected reason: header() and
// headers() give them from the files alone, nothing fitted, the same as the fitted families say.
TEST(KernelTables, HeadersNameEveryFamilyWithoutFittingIt) {
  const GpuSpec& g = Catalog::global().gpu("H200");
  for (const std::string& release : {std::string(), std::string("vllm-0.19.0")}) {
    const Calibration read = Calibration::embedded(g, release);
    const auto& headers = read.headers();
    ASSERT_FALSE(headers.empty()) << release;
    for (const auto& [name, h] : headers) {
      EXPECT_TRUE(h.samples.empty()) << name;  // read, not fitted
      EXPECT_EQ(read.header(name), &h) << name;
    }
    const Calibration fitted = Calibration::embedded(g, release);
    const auto& all = fitted.families();
    ASSERT_EQ(all.size(), headers.size()) << release;
    for (const auto& [name, f] : all) {
      const FamilyCalibration* h = read.header(name);
      ASSERT_NE(h, nullptr) << name;
      EXPECT_FALSE(f.samples.empty()) << name;
      EXPECT_EQ(h->origin, f.origin) << name;
      EXPECT_EQ(h->runtime, f.runtime) << name;
      EXPECT_EQ(h->rejected, f.rejected) << name;
      EXPECT_EQ(h->file, f.file) << name;
    }
    EXPECT_EQ(read.header("no_such_family"), nullptr);
  }
}

// How far a shape lies outside a table's measured grid: the summed log distance, along the shape
// coordinates asked, from the query to the range of the group's points; 0 inside.
TEST(KernelTables, OutsideTheGridIsTheLogDistanceToItsRange) {
  // Decode attention rows of heads 8-64 over 1 KV head of 128 (one group), and one row in another group.
  std::vector<Sample> s;
  for (double heads : {8.0, 16.0, 64.0}) {
    Sample p;
    p.key = shape_key({heads});
    p.group = attention_group(2, 0);
    p.x = attention_features(16, 1024, heads, 1, 128);
    p.memory_s = 1e-5, p.compute_s = 1e-6, p.seconds = 2e-5;
    s.push_back(p);
  }
  Sample other = s.front();
  other.group = attention_group(1, 0), other.x = attention_features(16, 1024, 512, 1, 512);
  s.push_back(other);
  const FamilyFit fit(s, FitMethod::local_linear);
  constexpr unsigned shape = 1u << 2 | 1u << 3 | 1u << 4;  // heads, KV heads, head size
  const std::uint64_t bf16 = attention_group(2, 0);
  EXPECT_EQ(fit.outside_grid(bf16, attention_features(16, 1024, 32, 1, 128), shape), 0);  // between 16 and 64
  EXPECT_EQ(fit.outside_grid(bf16, attention_features(1, 8, 8, 1, 128), shape), 0);       // batch and context are not shape
  EXPECT_NEAR(fit.outside_grid(bf16, attention_features(16, 1024, 128, 1, 128), shape), std::log(2.0), 1e-12);
  // 128 heads of 288: log(128 / 64) + log(288 / 128); the fp8 row's 512 heads count for its own group only.
  EXPECT_NEAR(fit.outside_grid(bf16, attention_features(16, 1024, 128, 1, 288), shape), std::log(2.0) + std::log(2.25), 1e-12);
  EXPECT_NEAR(fit.outside_grid(bf16, attention_features(16, 1024, 4, 1, 128), shape), std::log(2.0), 1e-12);
  EXPECT_TRUE(std::isinf(fit.outside_grid(attention_group(2, 128), attention_features(16, 1024, 8, 1, 128), shape)));
}

// A table that lacks the asked attention shape gives the figure of the nearest table that covers it,
// exactly, and says so; a shape it covers keeps its own figure.
TEST(KernelTables, AShapeATableLacksComesFromTheNearestTableThatCoversIt) {
  // vLLM 0.19's H200 decode rows stop at head size 128; 0.18 and 0.14 too; 0.22 times 8 x 1 heads of
  // 256 (16 sequences of 1,024 tokens, bf16 KV: 0.01334 ms).
  const KernelModel& v19 = kernel_model(h200(), {"vllm", "0.19"});
  const OpTime a = v19.attention_decode(16, 1024, 8, 1, 256, Precision::bf16, 0);
  EXPECT_DOUBLE_EQ(table_s(a), 0.01334e-3);
  EXPECT_EQ(a.seconds, kernel_model(h200(), {"vllm", "0.22"}).attention_decode(16, 1024, 8, 1, 256, Precision::bf16, 0).seconds);
  EXPECT_EQ(a.table, "vLLM 0.19.0 table: no attention_decode at 8 x 1 x 256; from vLLM 0.22.0 table (nearest measured: 0.22.0 for 0.19)");
  // Covered (head size 128): its own table.
  const OpTime c = v19.attention_decode(16, 1024, 8, 1, 128, Precision::bf16, 0);
  EXPECT_EQ(c.table, "vLLM 0.19.0 table");
  EXPECT_EQ(c.source, Source::measured);
  // TensorRT-LLM 1.3.0rc20's H200 rows reach head size 288 (its MLA rows); 8 x 1 heads of 512 come
  // from the GPU's vLLM 0.24 table (0.04715 ms), another engine's, and say so.
  const OpTime t = kernel_model(h200(), {"trtllm", "1.3"}).attention_decode(16, 1024, 8, 1, 512, Precision::bf16, 0);
  EXPECT_DOUBLE_EQ(table_s(t), 0.04715e-3);
  EXPECT_EQ(t.seconds, kernel_model(h200()).attention_decode(16, 1024, 8, 1, 512, Precision::bf16, 0).seconds);
  EXPECT_EQ(t.table, "TensorRT-LLM 1.3.0rc20 table: no attention_decode at 8 x 1 x 512; from vLLM 0.24.0");
  // No table times 160 query heads: the least extrapolation (the tables reaching 128 heads at head
  // size 288: SGLang's and TensorRT-LLM's MLA rows, the earlier in order on the tie), and the label
  // says none covers it.
  const OpTime n = kernel_model(h200()).attention_decode(16, 1024, 160, 1, 288, Precision::bf16, 0);
  EXPECT_NE(n.table.find("(none covers it: the least extrapolation); from SGLang 0.5.14 table"), std::string::npos) << n.table;
}

// TensorRT-LLM runs an MLA decode with its own MLA generation kernel, not the attention op its
// attention rows time: its tables carry AIC's mla_generation rows as the step model asks for an
// absorbed MLA decode (TP-local heads over one KV head of (512 + 64) / 2 = 288, the latent's bytes).
// SGLang decodes an MLA layer with its MLA backends too (the FA3 MLA kernel on Hopper, trtllm_mla on
// Blackwell): the same query reads AIC's SGLang 0.5.14 mla_generation rows, 16 x 1,024 tokens at 128
// heads, bf16 latent: H200 0.03013 ms, B200 0.02679 (mla_generation_mla_perf, step 1,023).
TEST(KernelTables, SglangTimesMlaDecodeWithItsMlaKernel) {
  const struct { const char* gpu; double ms; } rows[] = {{"H200", 0.03013}, {"B200", 0.02679}};
  for (const auto& r : rows) {
    const OpTime t = kernel_model(Catalog::global().gpu(r.gpu), {"sglang", "0.5"}).attention_decode(16, 1024, 128, 1, 288, Precision::bf16, 0);
    EXPECT_DOUBLE_EQ(table_s(t), r.ms * 1e-3) << r.gpu;
    EXPECT_EQ(t.kernel, "mla_generation") << r.gpu;
    EXPECT_EQ(t.table, "SGLang 0.5.14 table") << r.gpu;
  }
}

TEST(KernelTables, TensorRtLlmTimesMoeTpOnItsEpRows) {
  // TensorRT-LLM 1.3.0rc20's CUTLASS MoE on the H200, DeepSeek's experts (hidden 7168, inter 2048,
  // top-8 of 256, FP8 128-block, balanced), 8,192 tokens: MoE TP8 4.98 ms, EP8 1.284 ms
  // (hwmodels/calibration/h200/trtllm-1.3.0rc20/moe.json). Both ranks do the same expert work:
  // TP8 = 8,192 x 8 slots x 3 x 7168 x 256 x 2 FLOPs, EP8 = 8,192 slots x 3 x 7168 x 2048 x 2, both
  // 7.2e11; and stream the same weights (256 x 3 x 7168 x 256 = 32 x 3 x 7168 x 2048 bytes).
  const MoeShape tp8{8192, 7168, 2048, 8, 256, 8, 1};
  const MoeShape ep8{8192, 7168, 2048, 8, 256, 1, 8};
  const KernelTables rows{"trtllm", "1.3"};
  KernelTables on_ep = rows;
  on_ep.moe_tp_on_ep_rows = true;
  EXPECT_DOUBLE_EQ(table_s(kernel_model(h200(), rows).moe(tp8, Precision::fp8_block)), 4.98e-3);
  EXPECT_DOUBLE_EQ(table_s(kernel_model(h200(), rows).moe(ep8, Precision::fp8_block)), 1.284e-3);
  // "moe_tp": "ep rows": the TP8 layer is the EP8 row, named so.
  const OpTime t = kernel_model(h200(), on_ep).moe(tp8, Precision::fp8_block);
  EXPECT_DOUBLE_EQ(table_s(t), 1.284e-3);
  EXPECT_EQ(t.source, Source::measured);
  EXPECT_EQ(t.table, "TensorRT-LLM 1.3.0rc20 table");
  EXPECT_EQ(t.kernel, "moe_torch_flow_cutlass (MoE TP8 on its EP8 rows)");
  const double flops = 8192.0 * 8 * 3 * 7168 * 256 * 2;
  EXPECT_NEAR(t.flops, flops, 1e-9 * flops);
  EXPECT_NEAR(kernel_model(h200(), rows).moe(tp8, Precision::fp8_block).flops, flops, 1e-9 * flops);
  // An EP layer and the vLLM 0.24 tables are read as before.
  EXPECT_DOUBLE_EQ(kernel_model(h200(), on_ep).moe(ep8, Precision::fp8_block).seconds,
                   kernel_model(h200(), rows).moe(ep8, Precision::fp8_block).seconds);
  KernelTables vllm_on_ep;
  vllm_on_ep.moe_tp_on_ep_rows = true;
  EXPECT_DOUBLE_EQ(kernel_model(h200(), vllm_on_ep).moe(tp8, Precision::fp8_block).seconds,
                   kernel_model(h200()).moe(tp8, Precision::fp8_block).seconds);
}

TEST(KernelTables, TensorRtLlmTimesMlaDecodeWithItsMlaKernel) {
  // 16 sequences of 1,024 tokens, 128 heads (DeepSeek at TP1), bf16 latent: H200 0.02912 ms, B200 0.02509.
  const struct { const char* gpu; double ms; } rows[] = {{"H200", 0.02912}, {"B200", 0.02509}};
  for (const auto& r : rows) {
    const OpTime t = kernel_model(Catalog::global().gpu(r.gpu), {"trtllm", "1.3"}).attention_decode(16, 1024, 128, 1, 288, Precision::bf16, 0);
    EXPECT_DOUBLE_EQ(table_s(t), r.ms * 1e-3) << r.gpu;
    EXPECT_EQ(t.kernel, "mla_generation") << r.gpu;
    EXPECT_EQ(t.table, "TensorRT-LLM 1.3.0rc20 table") << r.gpu;
    // The latent streamed once per sequence: 16 x 1,024 tokens x 576 elements x 2 bytes, plus the
    // queries and outputs (16 x 128 heads x 288 x 2 x 2 bytes).
    EXPECT_DOUBLE_EQ(t.bytes, 16.0 * 1024 * 576 * 2 + 16.0 * 128 * 288 * 2 * 2) << r.gpu;
  }
}

TEST(KernelTables, TensorRtLlmTimesBlockFp8GemmsOnItsOwnBlockRows) {
  // TensorRT-LLM 1.3.0rc20 on the H200, 16 x 4096 x 4096: its fp8_block row takes 0.01086 ms, its
  // per-tensor fp8 row 0.0172 (hwmodels/calibration/h200/trtllm-1.3.0rc20/gemm.json). Its block rows
  // are kernel times, not a launch floor (m <= 64: a median 0.67x its per-tensor rows on the H200),
  // so a profile asking for them ("block_fp8_gemm": "fp8_block rows", trtllm-1.3) gets that row.
  const KernelTables own{"trtllm", "1.3", true};
  const OpTime b = kernel_model(h200(), own).gemm(16, 4096, 4096, Precision::fp8_block);
  EXPECT_DOUBLE_EQ(table_s(b), 0.01086e-3);
  EXPECT_EQ(b.source, Source::measured);
  EXPECT_EQ(b.table, "TensorRT-LLM 1.3.0rc20 table");
  EXPECT_EQ(b.kernel, "block-FP8 GEMM (the release's fp8_block rows)");
  // Without the key, the per-tensor row timed with the block format's bytes: (4096 x 4096 + 16 x 4096
  // x 2 + its scales) against 16.8 MB: within 2 % of the 0.0172 ms row, never the 0.01086 block row.
  const OpTime p = kernel_model(h200(), {"trtllm", "1.3"}).gemm(16, 4096, 4096, Precision::fp8_block);
  EXPECT_NEAR(table_s(p), 0.0172e-3, 0.02 * 0.0172e-3);
  EXPECT_NE(p.kernel, b.kernel);
  // vLLM 0.24's block rows were timed eagerly (a launch floor) and stay rejected: a vLLM profile that
  // asked for block rows gets the per-tensor ones, its own engine's having none.
  const OpTime v = kernel_model(h200(), {"vllm", "0.24", true}).gemm(16, 4096, 4096, Precision::fp8_block);
  EXPECT_DOUBLE_EQ(v.seconds, kernel_model(h200(), {"vllm", "0.24"}).gemm(16, 4096, 4096, Precision::fp8_block).seconds);
}

TEST(KernelTables, OneRowFp8GemmOnBlackwellCostsAtMostTwoRows) {
  // vLLM 0.24's per-tensor FP8 rows on the B200, n x k = 1024 x 8192: m = 1 takes 0.02303 ms, m = 2
  // 0.01067, m = 4 0.01068 (hwmodels/calibration/b200/vllm/gemm.json). The releases the vLLM profiles
  // model measure no such step (vLLM 0.19 on the B200: m = 1 / m = 2 a median 0.99), so with
  // "fp8_gemm_m1": "at most the m = 2 row" one row is the m = 2 row's time.
  const GpuSpec& b200 = Catalog::global().gpu("B200");
  const OpTime asis = kernel_model(b200, {"vllm", "0.24"}).gemm(1, 1024, 8192, Precision::fp8);
  EXPECT_DOUBLE_EQ(table_s(asis), 0.02303e-3);
  const KernelTables capped{"vllm", "0.24", false, true};
  const OpTime one = kernel_model(b200, capped).gemm(1, 1024, 8192, Precision::fp8);
  EXPECT_DOUBLE_EQ(table_s(one), 0.01067e-3);
  EXPECT_DOUBLE_EQ(one.seconds, kernel_model(b200, capped).gemm(2, 1024, 8192, Precision::fp8).seconds);
  EXPECT_DOUBLE_EQ(one.flops, asis.flops);  // still one row's work: 2 x 1024 x 8192
  EXPECT_DOUBLE_EQ(one.flops, 2.0 * 1024 * 8192);
  // Block-FP8 on those rows too; two rows and BF16 are as measured.
  EXPECT_LT(kernel_model(b200, capped).gemm(1, 1024, 8192, Precision::fp8_block).seconds,
            kernel_model(b200, {"vllm", "0.24"}).gemm(1, 1024, 8192, Precision::fp8_block).seconds);
  EXPECT_DOUBLE_EQ(kernel_model(b200, capped).gemm(2, 1024, 8192, Precision::fp8).seconds,
                   kernel_model(b200, {"vllm", "0.24"}).gemm(2, 1024, 8192, Precision::fp8).seconds);
  EXPECT_DOUBLE_EQ(kernel_model(b200, capped).gemm(1, 1024, 8192, Precision::bf16).seconds,
                   kernel_model(b200, {"vllm", "0.24"}).gemm(1, 1024, 8192, Precision::bf16).seconds);
  // Hopper's rows have no step; they stay as measured.
  for (std::int64_t n : {1024, 8192, 65536})
    EXPECT_DOUBLE_EQ(kernel_model(h200(), capped).gemm(1, n, 8192, Precision::fp8).seconds,
                     kernel_model(h200(), {"vllm", "0.24"}).gemm(1, n, 8192, Precision::fp8).seconds) << n;
}

// A release table that timed one layer with two kernels of its weight format: SGLang 0.5.14 on the B200
// timed gpt-oss-120b's MoE (2880 x 2880, top-4 of 128) with FlashInfer's TRTLLM-gen MXFP4 MoE at BF16
// and at MXFP8 activations, 1,024 tokens balanced at TP1 EP1: 0.6792 and 0.4121 ms
// (hwmodels/calibration/b200/sglang-0.5.14/moe.json). Without "moe_first" the table's first named
// family of the format is read (mxfp4_w4a16 by name); SGLang's profile names MXFP8.
TEST(KernelTables, AProfileNamesWhichOfATablesMoeKernelsItRuns) {
  const GpuSpec& b200 = Catalog::global().gpu("B200");
  const MoeShape gpt_oss{1024, 2880, 2880, 4, 128, 1, 1};
  EXPECT_DOUBLE_EQ(table_s(kernel_model(b200, {"sglang", "0.5"}).moe(gpt_oss, Precision::mxfp4)), 0.6792e-3);
  KernelTables first{"sglang", "0.5"};
  first.moe_first = {"moe_mxfp4_w4a8_trtllm"};
  const OpTime t = kernel_model(b200, first).moe(gpt_oss, Precision::mxfp4);
  EXPECT_DOUBLE_EQ(table_s(t), 0.4121e-3);
  EXPECT_EQ(t.table, "SGLang 0.5.14 table");
  // Other formats keep the table's order: a family of another format is not a candidate.
  const MoeShape ds{1024, 7168, 2048, 8, 256, 8, 1};
  EXPECT_DOUBLE_EQ(kernel_model(b200, first).moe(ds, Precision::fp8_block).seconds,
                   kernel_model(b200, {"sglang", "0.5"}).moe(ds, Precision::fp8_block).seconds);
}

TEST(KernelTables, AMoeShapeTheReleaseTableLacksComesFromTheSameKernelsMeasuredShape) {
  // TensorRT-LLM 1.3.0rc23's MXFP4 x MXFP8 MoE table on the B200 timed two shapes (4096 x 2048,
  // top-6 of 256; 7168 x 3072, top-6 of 384) at EP 2-64 only. SGLang 0.5.14's FlashInfer TRTLLM-gen
  // MXFP4 x MXFP8 rows (TensorRT-LLM's trtllm-gen MoE kernels) timed gpt-oss's 2880 x 2880, top-4 of
  // 128 at every layout: 1,024 tokens balanced, TP1 EP1 0.4121 ms, MoE TP2 0.2228 ms
  // (hwmodels/calibration/b200/sglang-0.5.14/moe.json).
  const GpuSpec& b200 = Catalog::global().gpu("B200");
  KernelTables as_measured{"trtllm", "1.3"};
  as_measured.moe_same_kernel = {"moe_mxfp4_w4a8_trtllm"};
  const MoeShape tp1{1024, 2880, 2880, 4, 128, 1, 1}, tp2{1024, 2880, 2880, 4, 128, 2, 1};
  const OpTime a = kernel_model(b200, as_measured).moe(tp1, Precision::mxfp4);
  EXPECT_DOUBLE_EQ(table_s(a), 0.4121e-3);
  EXPECT_EQ(a.source, Source::measured);
  EXPECT_EQ(a.kernel, "sglang_flashinfer_trtllm_moe");
  EXPECT_EQ(a.table, "SGLang 0.5.14 table at 2880 x 2880, top-4 of 128; TensorRT-LLM 1.3.0rc23 table lacks that shape");
  EXPECT_DOUBLE_EQ(table_s(kernel_model(b200, as_measured).moe(tp2, Precision::mxfp4)), 0.2228e-3);
  // With "moe_tp": "ep rows" (TensorRT-LLM's profiles) the MoE-TP2 layer is that table's EP2 row of
  // the same per-rank experts, 0.2046 ms, as on the release's own rows.
  KernelTables on_ep = as_measured;
  on_ep.moe_tp_on_ep_rows = true;
  const OpTime e = kernel_model(b200, on_ep).moe(tp2, Precision::mxfp4);
  EXPECT_DOUBLE_EQ(table_s(e), 0.2046e-3);
  EXPECT_EQ(e.kernel, "sglang_flashinfer_trtllm_moe (MoE TP2 on its EP2 rows)");
  // Above the HBM floor: all 128 experts' MXFP4 weights, 128 x 3 x 2880 x 2880 x (0.5 + 1/32) bytes
  // = 1.69 GB, at the datasheet 7.7 TB/s = 0.22 ms.
  EXPECT_GT(a.seconds, 128.0 * 3 * 2880 * 2880 * (0.5 + 1.0 / 32) / b200.hbm_bw_bytes_per_s);
  // A shape the release table timed stays its own: 4096 x 2048, top-6 of 256 at EP2, 1,024 tokens
  // balanced, 0.3495 ms (hwmodels/calibration/b200/trtllm-1.3.0rc23/moe.json).
  const OpTime own = kernel_model(b200, as_measured).moe({1024, 4096, 2048, 6, 256, 1, 2}, Precision::mxfp4);
  EXPECT_DOUBLE_EQ(table_s(own), 0.3495e-3);
  EXPECT_EQ(own.table, "TensorRT-LLM 1.3.0rc23 table");
  // Scaled ("scale": "own table's ratio"): times the release table's time over SGLang's at the two shapes both
  // timed, at the layer's tokens and layout (geometric mean). SGLang's TP1 EP1 rows of those shapes
  // at 1,024 tokens: 0.7138 ms and the 7168 x 3072 row (the table's first family of that format).
  KernelTables scaled = as_measured;
  scaled.moe_same_kernel_scaled = true;
  const MoeShape s1{1024, 4096, 2048, 6, 256, 1, 1}, s2{1024, 7168, 3072, 6, 384, 1, 1};
  const KernelModel& trt = kernel_model(b200, {"trtllm", "1.3"});
  const KernelModel& sgl = kernel_model(b200, {"sglang", "0.5"});
  EXPECT_DOUBLE_EQ(table_s(sgl.moe(s1, Precision::mxfp4)), 0.7138e-3);
  const double ratio = std::sqrt(trt.moe(s1, Precision::mxfp4).seconds / sgl.moe(s1, Precision::mxfp4).seconds *
                                 trt.moe(s2, Precision::mxfp4).seconds / sgl.moe(s2, Precision::mxfp4).seconds);
  const OpTime s = kernel_model(b200, scaled).moe(tp1, Precision::mxfp4);
  EXPECT_NEAR(s.seconds, a.seconds * ratio, 1e-9 * a.seconds);
  EXPECT_EQ(s.source, Source::interpolated);
  // Without the key (vLLM's and SGLang's profiles, and before), the release table's interpolation.
  EXPECT_EQ(trt.moe(tp1, Precision::mxfp4).table, "TensorRT-LLM 1.3.0rc23 table");
}
