// The calibrated kernel model: a measured GPU's own fitted surfaces, or the H200 surfaces carried
// over to another GPU's datasheet peaks and achieved-fraction priors (catalog.hpp), or, for a
// family nobody measured, the roofline with those priors alone.
#include "hwmodels/kernel_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>
#include <map>
#include <optional>
#include <array>
#include <cstdio>
#include <set>
#include <mutex>

#include "common/error.hpp"
#include "common/text.hpp"
#include "hwmodels/moe_kernels.hpp"
#include "hwmodels/published.hpp"
#include "hwmodels/work.hpp"

namespace servesim::hw {

std::string_view to_string(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::launch: return "launch";
    case Bound::communication: return "communication";
  }
  return "?";
}

std::string_view to_string(Source s) {
  switch (s) {
    case Source::measured: return "measured";
    case Source::interpolated: return "interpolated";
    case Source::transferred: return "transferred";
    case Source::roofline: return "roofline";
  }
  return "?";
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

Collective parse_collective(std::string_view s, const std::string& where) {
  std::string k = text::lower(s);
  for (char& ch : k) if (ch == '-') ch = '_';
  for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                       Collective::all_to_all, Collective::send_recv})
    if (k == to_string(c)) return c;
  throw Error(where, "", "unknown collective '" + std::string(s) +
                             "' (known: all-reduce, all-gather, reduce-scatter, all-to-all, send-recv)");
}

ColdWeights cold_weights(std::string_view family, std::string_view origin, double table_l2_bytes,
                         double hbm_bw_bytes_per_s) {
  constexpr double kResidentFraction = 0.75, kStreamS = 0.54e-6, kStreamSPerByteH200 = 0.093e-6 / 1e6,
                   kMoeS = 1.74e-6, kH200HbmBw = 4.8e12;
  const bool moe = family.starts_with("moe"), gemm = family.starts_with("gemm_");
  if (origin != "vllm" || table_l2_bytes <= 0 || !(moe || gemm || family == "attention_decode")) return {};
  const double copies = gemm && family != "gemm_nvfp4" && family != "gemm_fp8_block" ? 6 : 1;
  const double max_bytes = kResidentFraction * table_l2_bytes / copies;
  if (moe) return {kMoeS, 0, max_bytes};
  return {kStreamS, kStreamSPerByteH200 * kH200HbmBw / hbm_bw_bytes_per_s, max_bytes};
}

namespace {

// Fixed per-op latency of the roofline prior where no measurement exists: NVIDIA's
// aiconfigurator constant for a memory-bound op (hardware.md §1.3).
constexpr double kPriorLaunchS = 3e-6;
// Achieved fraction of the per-GPU EFA share for bulk NCCL traffic: 2x p5.48xlarge all-reduce at
// 16 GiB reaches 487 GB/s busbw = 260 GB/s algbw against 8 x 50 GB/s of NICs (hardware.md §3.2).
constexpr double kEfaEfficiency = 0.65;

const char* nccl_family(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "nccl_all_reduce";
    case Collective::all_gather: return "nccl_all_gather";
    case Collective::reduce_scatter: return "nccl_reduce_scatter";
    case Collective::all_to_all: return "nccl_all_to_all";
    case Collective::send_recv: return "nccl_send_recv";
  }
  return "";
}

// A query of one op family: its work, the series key, and the compute peak/prior that apply.
struct Query {
  std::string_view family;
  std::uint64_t key;
  Work work;
  Precision query_prec;   // precision whose peak this GPU runs the op at
  Precision family_prec;  // precision the family was measured in
  Features x{};           // log-space shape coordinates (work.hpp)
  std::uint64_t group = 0;
  std::string_view label = {};  // kernel name when it is not the measured one (a substitute path)
  // A substitute path: the work of the same shape as the family measured it (e.g. BF16 weights for
  // Marlin W4A16 timed on the BF16 GEMM surface); the time moves by the roofline ratio of the two.
  Work measured_as{-1, -1};
  double dispatch_bytes = 0;  // fused MoE: moe_dispatch_bytes (the fit's dispatch term)
  // Shape coordinates (bit f = feature f) a table must cover to time the query: outside its
  // measured grid in any of them, the family comes from the nearest table that covers it
  // (Model::covering). 0: any table that timed the family will do.
  unsigned shape_dims = 0;
};

// Attention: heads, KV heads and head size (attention_features 2-4); the group is the KV dtype and window.
constexpr unsigned kAttentionShapeDims = 1u << 2 | 1u << 3 | 1u << 4;

// vLLM's custom all-reduce size limit (bytes) per compute capability and world size, with
// VLLM_ALLREDUCE_USE_SYMM_MEM on (its default): min(8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES[cc][ws]);
// and torch symmetric memory's limit SYMM_MEM_ALL_REDUCE_MAX_SIZES (vllm-engine.md §4).
constexpr double kMiB = 1024.0 * 1024.0;
double custom_ar_max_bytes(const GpuSpec& g, int ws) {
  const int i = ws == 2 ? 0 : ws == 4 ? 1 : ws == 6 ? 2 : ws == 8 ? 3 : -1;
  if (i < 0) return 0;  // custom all-reduce runs only for 2, 4, 6 or 8 GPUs
  static const double hopper[] = {8 * kMiB, 8 * kMiB, 0.5 * kMiB, 0.25 * kMiB};
  static const double blackwell[] = {2 * kMiB, 2 * kMiB, 1 * kMiB, 1 * kMiB};
  static const double ultra[] = {4 * kMiB, 4 * kMiB, 8 * kMiB, 4 * kMiB};
  return g.arch == "hopper" ? hopper[i] : g.arch == "blackwell-ultra" ? ultra[i] : blackwell[i];
}
double symm_mem_max_bytes(const GpuSpec& g, int ws) {
  const int i = ws == 2 ? 0 : ws == 4 ? 1 : ws == 6 ? 2 : ws == 8 ? 3 : -1;
  if (i < 0) return 0;
  static const double hopper[] = {64 * kMiB, 32 * kMiB, 64 * kMiB, 64 * kMiB};
  static const double blackwell[] = {8 * kMiB, 32 * kMiB, 128 * kMiB, 128 * kMiB};
  static const double ultra[] = {4 * kMiB, 32 * kMiB, 32 * kMiB, 64 * kMiB};
  return g.arch == "hopper" ? hopper[i] : g.arch == "blackwell-ultra" ? ultra[i] : blackwell[i];
}

// The all-reduce another engine's table timed, named as that engine dispatches it by size (AIC
// timed its tensor_model_parallel_all_reduce, which ran the engine's own rules): SGLang's custom
// all-reduce below 8 MiB on 2, 4, 6 or 8 GPUs, PyNCCL at and above (sglang-trtllm-engines.md: the
// size is believed, not verified); TensorRT-LLM's AllReduce under strategy AUTO (its thresholds not
// read from source, so the pick is not named). A vLLM table keeps vLLM's name.
std::string_view engine_all_reduce_kernel(std::string_view runtime, int n, double bytes, std::string_view vllm) {
  if (runtime.starts_with("SGLang"))
    return bytes < 8 * kMiB && (n == 2 || n == 4 || n == 6 || n == 8) ? "SGLang custom all-reduce" : "SGLang PyNCCL all-reduce";
  if (runtime.starts_with("TensorRT-LLM")) return "TensorRT-LLM AllReduce (strategy AUTO)";
  return vllm;
}

// One table a model reads, in order: the engine's releases nearest the asked one, then this GPU's
// vLLM 0.24 tables and own runs (`base`), then the reference GPU's (transferred).
struct Layer {
  std::shared_ptr<const Calibration> cal;
  std::string label;        // "SGLang 0.5.14 table", "vLLM 0.14.0 table (nearest measured: 0.14.0 for 0.12)"
  bool own = true;          // measured on the GPU the model is for
  bool vllm_kernels = true; // the release runs vLLM's kernels (moe_kernels.json's rules name them)
  // Another engine's table on this GPU (or a release of this engine past the asked one's order):
  // read only where every earlier table lacks the query's shape (Model::covering).
  bool fallback_only = false;
};

// A fused-MoE family without a kernel library ("moe_bf16"): its table named a kernel moe_kernel_library
// does not know (TensorRT-LLM's non-gated MoE, a plain torch flow).
bool bare_moe_family(std::string_view n) {
  for (const char* d : {"mxfp4_w4a16", "mxfp4_w4a8", "fp8_block", "int4_wo", "nvfp4", "bf16", "fp8"})
    if (n == std::string("moe_") + d) return true;
  return false;
}

class Model final : public KernelModel {
  struct Found;

 public:
  Model(const GpuSpec& gpu, std::vector<Layer> releases, std::shared_ptr<const Calibration> own,
        std::shared_ptr<const Calibration> ref, std::string asked, std::vector<Layer> others = {},
        const KernelTables& tables = {})
      : gpu_(gpu), releases_(std::move(releases)), own_(std::move(own)), ref_(std::move(ref)), asked_(std::move(asked)),
        block_fp8_gemm_rows_(tables.block_fp8_gemm_rows), fp8_gemm_m1_at_most_m2_(tables.fp8_gemm_m1_at_most_m2),
        moe_tp_on_ep_rows_(tables.moe_tp_on_ep_rows), moe_same_kernel_(tables.moe_same_kernel),
        moe_same_kernel_scaled_(tables.moe_same_kernel_scaled), moe_first_(tables.moe_first) {
    layers_ = releases_;
    layers_.push_back({own_, "", true, true});  // labelled by each family's runtime ("vLLM 0.24.0", "torch 2.11.0")
    for (Layer& l : others) l.fallback_only = true, layers_.push_back(std::move(l));
    if (ref_) layers_.push_back({ref_, "", false, true});
  }

  bool weight_only(Precision p) const { return hw::weight_only(gpu_, p); }
  static std::string_view marlin_label(Precision p) {
    switch (p) {
      case Precision::int4: return "Marlin W4A16 (INT4 group-32 weights, BF16 math)";
      case Precision::mxfp4: return "Marlin W4A16 (MXFP4 weights, BF16 math)";
      default: return "Marlin W4A16 (NVFP4 weights, BF16 math)";
    }
  }

  OpTime gemm(std::int64_t m, std::int64_t n, std::int64_t k, Precision p) const override {
    check_positive({double(m), double(n), double(k)}, "gemm");
    OpTime t = gemm_rows(m, n, k, p);
    // KernelTables::fp8_gemm_m1_at_most_m2: on Blackwell (where vLLM 0.24's FP8 rows step up at
    // m = 1) one row costs at most what two rows cost on the FP8 rows.
    const bool fp8_rows = p == Precision::fp8 || (p == Precision::fp8_block && !block_fp8_gemm_rows_);
    if (m == 1 && fp8_gemm_m1_at_most_m2_ && fp8_rows && gpu_.arch.rfind("blackwell", 0) == 0) {
      const OpTime two = gemm_rows(2, n, k, p);
      if (two.seconds < t.seconds) {
        t.seconds = two.seconds;
        t.cold_weights_s = two.cold_weights_s;
        t.bound = two.bound;
        t.source = Source::interpolated;
        t.table = two.table;
      }
    }
    return t;
  }

  OpTime gemm_rows(std::int64_t m, std::int64_t n, std::int64_t k, Precision p) const {
    std::uint64_t key = shape_key({double(n), double(k)});
    if (weight_only(p))
      return eval({"gemm_bf16", key, gemm_work(m, n, k, p, Precision::bf16), Precision::bf16, Precision::bf16,
                   gemm_features(m, n, k), 0, marlin_label(p), gemm_work(m, n, k, Precision::bf16, Precision::bf16)},
                  true);
    if (p == Precision::nvfp4 && find("gemm_nvfp4").cal)
      return eval({"gemm_nvfp4", key, gemm_work(m, n, k, p, p), p, p, gemm_features(m, n, k)});
    if (p == Precision::fp8_block && block_fp8_gemm_rows_)
      // The engine's own release tables timed its block-FP8 GEMM as a kernel (KernelTables::
      // block_fp8_gemm_rows): their fp8_block rows, where the nearest release that has them.
      for (const Layer& l : releases_)
        if (const auto* f = l.cal->header("gemm_fp8_block"); f && f->rejected.empty())
          return eval({"gemm_fp8_block", key, gemm_work(m, n, k, p, p), p, p, gemm_features(m, n, k), 0,
                       "block-FP8 GEMM (the release's fp8_block rows)"});
    if (p == Precision::fp8_block)
      // Block-scaled FP8 (DeepSeek-style checkpoints): AIC timed its fp8_block GEMMs eagerly with one
      // weight copy (a 60-150 us launch floor at small m), so the CUDA-graph per-tensor FP8 rows
      // time it, the bytes moved to the block format's.
      return eval({"gemm_fp8", key, gemm_work(m, n, k, p, Precision::fp8), p, Precision::fp8, gemm_features(m, n, k), 0,
                   "CUTLASS block-FP8 GEMM (timed on the per-tensor FP8 rows)",
                   gemm_work(m, n, k, Precision::fp8, Precision::fp8)}, true);
    Precision fam = p == Precision::bf16 ? Precision::bf16 : Precision::fp8;
    bool substitute = p == Precision::nvfp4 || p == Precision::int8;
    return eval({fam == Precision::bf16 ? "gemm_bf16" : "gemm_fp8", key, gemm_work(m, n, k, p, p), p, fam,
                 gemm_features(m, n, k)}, substitute);
  }

  OpTime grouped_gemm(int experts, std::int64_t tokens, std::int64_t n, std::int64_t k, Precision p,
                      double skew) const override {
    check_positive({double(experts), double(tokens), double(n), double(k)}, "grouped_gemm");
    if (skew < 0) throw Error("grouped_gemm", "skew", "must be >= 0");
    std::uint64_t key = shape_key({double(experts), double(n), double(k), skew});
    Routing r = route(experts, double(tokens), skew);
    Features x = grouped_gemm_features(experts, double(tokens), r, n, k, skew, p != Precision::bf16);
    if (weight_only(p))
      return eval({"grouped_gemm_bf16", key, grouped_gemm_work(r.active, tokens, n, k, p, Precision::bf16),
                   Precision::bf16, Precision::bf16, x}, true);
    Precision fam = p == Precision::bf16 ? Precision::bf16 : Precision::fp8;
    return eval({fam == Precision::bf16 ? "grouped_gemm_bf16" : "grouped_gemm_fp8", key,
                 grouped_gemm_work(r.active, tokens, n, k, p, math_precision(p)), p, fam, x},
                p == Precision::nvfp4 || p == Precision::int8 || p == Precision::fp8_block);
  }

  OpTime attention_prefill(int batch, std::int64_t seq, int heads, int kv_heads, int head_dim, Precision kv,
                           int window) const override {
    check_positive({double(batch), double(seq), double(heads), double(kv_heads), double(head_dim)}, "attention_prefill");
    const double kvb = kv == Precision::bf16 ? 2 : 1;
    if (window > 0 && !window_measured("attention_prefill", kvb, window)) {
      // A window no table timed: full attention over the single sequence with as many causal
      // query-key pairs (the tables' work counts pairs), not a full-attention row at the same length.
      const double pairs = causal_pairs(double(seq), double(window));
      const auto equal = std::int64_t(std::max(1.0, std::round(std::sqrt(2 * pairs))));
      return not_measured(attention_prefill(batch, std::min(seq, equal), heads, kv_heads, head_dim, kv, 0));
    }
    return eval({"attention_prefill",
                 shape_key({double(batch), double(heads), double(kv_heads), double(head_dim), kvb, double(window)}),
                 attention_prefill_work(batch, seq, heads, kv_heads, head_dim, kvb, window), Precision::bf16,
                 Precision::bf16, attention_features(batch, seq, heads, kv_heads, head_dim),
                 attention_group(kvb, window), {}, {-1, -1}, 0, kAttentionShapeDims});
  }

  OpTime attention_decode(int batch, std::int64_t context, int heads, int kv_heads, int head_dim, Precision kv,
                          int window) const override {
    check_positive({double(batch), double(context), double(heads), double(kv_heads), double(head_dim)}, "attention_decode");
    const double kvb = kv == Precision::bf16 ? 2 : 1;
    if (window > 0 && !window_measured("attention_decode", kvb, window))  // reads at most the window
      return not_measured(attention_decode(batch, std::min<std::int64_t>(context, window), heads, kv_heads, head_dim, kv, 0));
    return eval({"attention_decode",
                 shape_key({double(batch), double(heads), double(kv_heads), double(head_dim), kvb, double(window)}),
                 attention_decode_work(batch, context, heads, kv_heads, head_dim, kvb, window), Precision::bf16,
                 Precision::bf16, attention_features(batch, context, heads, kv_heads, head_dim),
                 attention_group(kvb, window), {}, {-1, -1}, 0, kAttentionShapeDims});
  }

  OpTime encoder_attention(int batch, std::int64_t seq, int heads, int head_dim) const override {
    check_positive({double(batch), double(seq), double(heads), double(head_dim)}, "encoder_attention");
    Query q{"encoder_attention", shape_key({double(batch), double(heads), double(head_dim)}),
            encoder_attention_work(batch, seq, heads, head_dim, gpu_.sms, encoder_tiles(gpu_.arch)), Precision::bf16, Precision::bf16,
            attention_features(batch, seq, heads, heads, head_dim), encoder_attention_group(head_dim)};
    if (find("encoder_attention").cal) return eval(q);
    // Not measured anywhere: the prefill attention surface with twice the causal work (every
    // query sees every key), as a substitute.
    q.family = "attention_prefill";
    q.group = attention_group(2, 0);
    q.label = "flash attention (bidirectional, from the causal prefill surface)";
    q.measured_as = attention_prefill_work(batch, seq, heads, heads, head_dim);
    return eval(q, true);
  }

  OpTime moe(const MoeShape& m, Precision p) const override {
    check_positive({m.tokens, m.hidden, m.inter, double(m.topk), double(m.experts), double(m.tp), double(m.ep)}, "moe");
    if (m.skew < 0) throw Error("moe", "skew", "must be >= 0");
    if (m.topk > m.experts) throw Error("moe", "topk", "must not exceed the expert count");
    const std::uint64_t key = shape_key({m.hidden, m.inter, double(m.topk), double(m.experts), double(m.tp), double(m.ep), m.skew});
    // vLLM's kernel for this GPU, weight format and layout (hwmodels/data/moe_kernels.json). Of the
    // families timing it, the one that measured this exact shape and layout (vLLM's dispatch for
    // it as recorded), else the first one measured here or on the reference GPU.
    const MoeKernelRule& rule = moe_kernel_rule(gpu_, p, m.ep);
    const std::string* fam = nullptr;
    // A release table first (nearest first): of the families it timed — the release's own kernels
    // for this weight format (what that release ran for it: vLLM 0.14-0.22 time per-tensor FP8 with
    // Triton fused_moe, TensorRT-LLM with its CUTLASS MoE), then the rule's — the one that measured
    // this exact shape, else the first.
    std::vector<std::string> cands;
    bool vllm_kernels = true;
    const Layer* from = nullptr;  // the release table the family came from
    for (const Layer& l : releases_) {
      cands.clear();
      const std::vector<std::string> usable = l.cal->family_names("moe_", true);  // named, not yet fitted
      for (const auto& n : usable)
        if (moe_family_dtype(n).weights == p) cands.push_back(n);
      // Named kernel libraries before the bare dtype (a table's non-gated or unnamed kernel).
      std::stable_partition(cands.begin(), cands.end(), [](const std::string& n) { return !bare_moe_family(n); });
      // KernelTables::moe_first: the profile's kernel for this format before the table's others.
      for (auto f = moe_first_.rbegin(); f != moe_first_.rend(); ++f)
        if (auto at = std::find(cands.begin(), cands.end(), *f); at != cands.end()) std::rotate(cands.begin(), at, at + 1);
      for (const auto& n : rule.families)
        if (std::find(cands.begin(), cands.end(), n) == cands.end() &&
            std::find(usable.begin(), usable.end(), n) != usable.end())
          cands.push_back(n);
      if (cands.empty()) continue;
      // Fitted one at a time, in order, until one timed this shape series.
      auto it = std::find_if(cands.begin(), cands.end(), [&](const std::string& n) { return l.cal->family(n)->fit.has_series(key); });
      cands.front() = it == cands.end() ? cands.front() : *it;
      fam = &cands.front();
      vllm_kernels = l.vllm_kernels;
      from = &l;
      // KernelTables::moe_tp_on_ep_rows: a MoE-TP layer on this release's EP rows of the same
      // per-rank experts, where it timed that shape at EP (its own kernel; its TP rows not read).
      if (moe_tp_on_ep_rows_ && !l.vllm_kernels && m.tp > 1 && m.ep == 1 &&
          l.cal->family(*fam)->fit.has_series(
              shape_key({m.hidden, m.inter, double(m.topk), double(m.experts), 1.0, double(m.tp), m.skew}))) {
        MoeShape e = m;
        e.ep = m.tp;
        e.tp = 1;
        OpTime t = moe(e, p);
        t.kernel = label(std::string(t.kernel) + " (MoE TP" + std::to_string(m.tp) + " on its EP" + std::to_string(m.tp) + " rows)");
        return t;
      }
      break;
    }
    if (!fam)
      for (const auto& name : rule.families)
        if (Found f = find(name); f.cal && f.own && f.cal->fit.has_series(key)) { fam = &name; break; }
    if (!fam)
      for (const auto& name : rule.families)
        if (find(name).cal) { fam = &name; break; }
    if (!fam) fam = &rule.families.front();  // measured nowhere: roofline prior
    if (from && !moe_same_kernel_.empty())
      if (std::optional<OpTime> t = moe_same_kernel(m, p, *from, *fam)) return *t;
    return moe_on(m, p, *fam, vllm_kernels && (*fam == rule.families.front() || moe_family_dtype(*fam).weights != p)
                                  ? rule.kernel : std::string_view());
  }

  // One fused MoE layer on family `fam_name` (of the table find() gives, or `at`), labelled `kernel_label` when
  // the kernel is not the one the family's rows name.
  OpTime moe_on(const MoeShape& m, Precision p, const std::string& fam_name, std::string_view kernel_label,
                const Found* at = nullptr) const {
    const std::string* fam = &fam_name;
    const std::uint64_t key = shape_key({m.hidden, m.inter, double(m.topk), double(m.experts), double(m.tp), double(m.ep), m.skew});
    const MoeDtype md = moe_family_dtype(*fam);
    // The work as the family's fit counts it: vLLM's fused Marlin MoE computes block-padded slots.
    const bool marlin = std::string_view(*fam).ends_with("_marlin");
    const MoeRouting r = moe_routing_expected(m, marlin ? marlin_block_m(m.tokens, m.topk, m.experts / std::max(1, m.ep)) : 0);
    const Features x = moe_features(m, r);
    // A format other than the family's (NVFP4 on the Marlin FP4 rows, per-tensor FP8 on the block
    // rows): the family's time for its own bytes, moved by the roofline ratio to this format's.
    const bool substitute = md.weights != p;
    const Precision run_as = gpu_.native(p) ? math_precision(p) : Precision::bf16;
    Query q{*fam, key, moe_work(m, r, p), run_as, md.math, x};
    if (substitute) q.measured_as = moe_work(m, r, md.weights);
    q.dispatch_bytes = moe_dispatch_bytes(m);
    // The rule's kernel name, unless a later family (vLLM's other kernel for this shape) timed it;
    // another engine's table names its own kernel.
    q.label = kernel_label;
    return eval(q, substitute, at);
  }

  static bool timed_shape(const FamilyCalibration& f, const std::array<double, 5>& shape) {
    return std::binary_search(f.moe_shapes.begin(), f.moe_shapes.end(), shape);
  }

  // KernelTables::moe_same_kernel: the layer priced from another table's measured shape, timed by
  // a kernel this engine runs, where the release table `own` (its family `own_name`) never timed it.
  std::optional<OpTime> moe_same_kernel(const MoeShape& m, Precision p, const Layer& own, const std::string& own_name) const {
    const FamilyCalibration* mine = own.cal->family(own_name);
    const std::array<double, 5> shape{m.hidden, m.inter, double(m.topk), double(m.experts), m.gated ? 1.0 : 0.0};
    if (!mine || timed_shape(*mine, shape)) return std::nullopt;
    for (const Layer& l : layers_) {
      if (!l.own || l.cal == own.cal) continue;  // this GPU's other tables only
      for (const std::string& name : moe_same_kernel_) {
        if (moe_family_dtype(name).weights != p) continue;
        const FamilyCalibration* h = l.cal->header(name);
        if (!h || !h->rejected.empty()) continue;
        const FamilyCalibration* f = l.cal->family(name);
        if (!f || !timed_shape(*f, shape)) continue;
        const Found there = found(l, f), here = found(own, mine);
        // KernelTables::moe_tp_on_ep_rows: a MoE-TP t layer on that table's EP t rows, as on the release's.
        MoeShape on = m;
        if (moe_tp_on_ep_rows_ && m.tp > 1 && m.ep == 1 &&
            f->fit.has_series(shape_key({m.hidden, m.inter, double(m.topk), double(m.experts), 1.0, double(m.tp), m.skew})))
          on.ep = m.tp, on.tp = 1;
        OpTime t = moe_on(on, p, name, {}, &there);
        if (on.ep != m.ep)
          t.kernel = label(std::string(t.kernel) + " (MoE TP" + std::to_string(m.tp) + " on its EP" + std::to_string(m.tp) + " rows)");
        // The release table's time over this family's at the shapes both timed (same gating), at
        // the layer's tokens, layout and routing: geometric mean.
        double log_ratio = 0;
        int both = 0;
        for (const auto& sh : mine->moe_shapes) {
          if (sh[4] != shape[4] || !timed_shape(*f, sh)) continue;
          MoeShape at = on;
          at.hidden = sh[0], at.inter = sh[1], at.topk = int(sh[2]), at.experts = int(sh[3]);
          if (at.topk > at.experts) continue;
          log_ratio += std::log(moe_on(at, p, own_name, {}, &here).seconds / moe_on(at, p, name, {}, &there).seconds);
          ++both;
        }
        const double ratio = both && moe_same_kernel_scaled_ ? std::exp(log_ratio / both) : 1.0;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.0f x %.0f, top-%d of %d", m.hidden, m.inter, m.topk, m.experts);
        std::string why = std::string(t.table) + " at " + buf + "; " + std::string(own.label) + " lacks that shape";
        if (ratio != 1.0) {
          char r[96];
          std::snprintf(r, sizeof r, " (x %.2f: its time over this table's at the %d shape%s both timed)", ratio, both,
                        both == 1 ? "" : "s");
          why += r;
          t.seconds *= ratio;
          t = not_measured(t);
        }
        t.table = label(std::move(why));
        return t;
      }
    }
    return std::nullopt;
  }

  ColdWeights cold_weights(std::string_view family) const override {
    Found f = find(family);
    if (!f.cal) return {};
    return hw::cold_weights(f.cal->family, f.cal->origin, f.gpu->l2_bytes, gpu_.hbm_bw_bytes_per_s);
  }

  OpTime gdn(bool decode, int batch, std::int64_t seq, int k_heads, int v_heads, int head_k, int head_v) const override {
    check_positive({double(batch), double(seq), double(k_heads), double(v_heads), double(head_k), double(head_v)}, "gdn");
    return eval({decode ? "gdn_decode" : "gdn_prefill",
                 shape_key({double(k_heads), double(v_heads), double(head_k), double(head_v)}),
                 gdn_work(decode, batch, decode ? 1 : seq, k_heads, v_heads, head_k, head_v), Precision::bf16,
                 Precision::bf16, gdn_features(batch, decode ? 1 : seq, k_heads, v_heads, head_k, head_v)});
  }

  OpTime tp_all_reduce(double bytes, int n) const override {
    if (n < 1) throw Error("tp_all_reduce", "gpus", "must be >= 1");
    if (!(bytes >= 0)) throw Error("tp_all_reduce", "bytes", "must be >= 0");
    if (n == 1 || bytes == 0) return collective(Collective::all_reduce, bytes, {n, 1, nullptr});
    if (n > gpu_.nvlink_domain)
      throw Error("tp_all_reduce", "gpus", std::to_string(n) + " GPUs exceed the NVLink domain of " + gpu_.name);
    // The kernel vLLM picks for this size (CudaCommunicator.all_reduce order).
    const bool custom = bytes < custom_ar_max_bytes(gpu_, n);
    const bool one_shot = custom_ar_one_shot(n, bytes);
    const bool symm = !custom && bytes <= symm_mem_max_bytes(gpu_, n);
    const bool multimem = symm && (gpu_.arch == "hopper" ? n >= 4 : n >= 6);
    std::string_view label = custom ? (one_shot ? "vLLM custom all-reduce (one-shot)" : "vLLM custom all-reduce (two-shot)")
                             : symm ? (multimem ? "torch symm-mem multimem all-reduce" : "torch symm-mem two-shot all-reduce")
                                    : "NCCL all-reduce";
    // Time: vLLM's tensor_model_parallel_all_reduce as measured on this GPU at this size (its own
    // dispatch ran the same rules), else NCCL.
    Found f = find("custom_all_reduce");
    const std::uint64_t key = shape_key({double(n), one_shot ? 1.0 : 2.0});
    if (f.cal && f.cal->fit.has_series(key)) {
      OpTime t;
      t.bound = Bound::communication;
      t.bytes = bytes;
      const GpuSpec& mg = *f.gpu;
      Sample at;
      at.key = at.group = key, at.x = bytes_features(bytes);
      at.memory_s = bytes * bus_factor("all_reduce", n) / mg.nvlink_bw_bytes_per_s;
      bool exact = false;
      t.seconds = f.cal->fit.predict(at, &exact);
      t.source = !f.own ? Source::transferred : exact ? Source::measured : Source::interpolated;
      if (!f.own) t.seconds *= mg.nvlink_bw_bytes_per_s / gpu_.nvlink_bw_bytes_per_s;
      t.seconds = std::max(t.seconds, bytes * bus_factor("all_reduce", n) / gpu_.nvlink_bw_bytes_per_s);
      t.kernel = engine_all_reduce_kernel(f.cal->runtime, n, bytes, label);
      t.table = f.table;
      return t;
    }
    OpTime t = collective(Collective::all_reduce, bytes, {n, 1, nullptr});
    if (custom || symm)
      if (auto k = nvlink_allreduce(gpu_, n, bytes); k && k->seconds < t.seconds) {
        t.seconds = k->seconds;
        t.source = k->exact_table ? Source::interpolated : Source::transferred;
      }
    t.kernel = label;
    return t;
  }

  OpTime mamba_scan(int batch, std::int64_t seqlen, int heads, int head_dim, int d_state, int groups) const override {
    check_positive({double(batch), double(seqlen), double(heads), double(head_dim), double(d_state), double(groups)}, "mamba_scan");
    return eval({"mamba_scan", shape_key({double(heads), double(head_dim), double(d_state), double(groups)}),
                 mamba_scan_work(batch, seqlen, heads, head_dim, d_state, groups), Precision::bf16, Precision::bf16,
                 mamba_scan_features(batch, seqlen, heads, head_dim, d_state, groups)});
  }

  OpTime mamba_step(int batch, int heads, int head_dim, int d_state, int groups) const override {
    check_positive({double(batch), double(heads), double(head_dim), double(d_state), double(groups)}, "mamba_step");
    return eval({"mamba_step", shape_key({double(heads), double(head_dim), double(d_state), double(groups)}),
                 mamba_step_work(batch, heads, head_dim, d_state, groups), Precision::bf16, Precision::bf16,
                 mamba_step_features(batch, heads, head_dim, d_state, groups)});
  }

  OpTime conv1d(std::int64_t tokens, std::int64_t channels, int kernel, bool decode) const override {
    check_positive({double(tokens), double(channels), double(kernel)}, "conv1d");
    return eval({decode ? "conv1d_decode" : "conv1d_prefill", shape_key({double(channels), double(kernel)}),
                 conv1d_work(tokens, channels, kernel, decode), Precision::bf16, Precision::bf16,
                 conv1d_features(tokens, channels, kernel)});
  }

  OpTime memory_bound(double bytes) const override {
    check_positive({bytes}, "memory_bound");
    Work w{0, bytes};
    // Elementwise/norm kernels if measured, else the plain copy bandwidth.
    if (find("elementwise").cal || !find("copy").cal)
      return eval({"elementwise", 0, w, Precision::bf16, Precision::bf16, bytes_features(bytes)});
    return eval({"copy", 0, w, Precision::bf16, Precision::bf16, bytes_features(bytes)});
  }

  OpTime collective(Collective op, double bytes, const CommGroup& g) const override {
    if (g.gpus < 1 || g.nodes < 1) throw Error("collective", "gpus", "must be >= 1");
    if (!(bytes >= 0)) throw Error("collective", "bytes", "must be >= 0");
    OpTime t;
    t.bound = Bound::communication;
    t.bytes = bytes;
    if (g.gpus == 1 || bytes == 0) { t.source = Source::roofline; return t; }
    // Several nodes stay on NVLink only when the instance's NVLink domain spans nodes (NVL72).
    bool nvlink_only = g.nodes == 1 || (g.instance && g.instance->nvlink_domain_gpus > g.instance->gpus &&
                                        g.gpus <= g.instance->nvlink_domain_gpus);
    if (nvlink_only) {
      if (g.nodes == 1 && g.gpus > gpu_.nvlink_domain)
        throw Error("collective", "gpus", std::to_string(g.gpus) + " GPUs exceed the NVLink domain of " + gpu_.name +
                                              " (" + std::to_string(gpu_.nvlink_domain) + "); give --nodes and --instance");
      return nvlink(op, bytes, g.gpus);
    }
    if (!g.instance) throw Error("collective", "instance", "an instance type is required when the GPUs span nodes");
    if (g.gpus % g.nodes) throw Error("collective", "gpus", "must be a multiple of the node count");
    int per_node = g.gpus / g.nodes, K = g.nodes;
    if (per_node > g.instance->gpus)
      throw Error("collective", "gpus", std::to_string(per_node) + " GPUs per node exceed " + g.instance->name +
                                            "'s " + std::to_string(g.instance->gpus));
    double nic = g.instance->efa_per_gpu_bytes_per_s * kEfaEfficiency;
    if (nic <= 0) throw Error("collective", "instance", g.instance->name + " has no EFA bandwidth");
    // Hierarchical: NVLink inside each node, one ring over the nodes per GPU's NIC share;
    // NCCL pipelines the two, so the slower stage sets the pace.
    double intra = 0, inter = 0;
    double S = bytes;
    // The in-node NVLink stage: its bandwidth part only (time at S less time at one byte): the
    // catalogue's EFA latency is a measured small-message collective over the nodes, in-node hops
    // included, so its latency is counted once.
    auto in_node = [&](Collective c, double b) {
      return per_node > 1 ? std::max(0.0, nvlink(c, b, per_node).seconds - nvlink(c, 1, per_node).seconds) : 0.0;
    };
    switch (op) {
      case Collective::all_reduce:
        intra = in_node(Collective::reduce_scatter, S) + in_node(Collective::all_gather, S);
        inter = 2.0 * (K - 1) / K * (S / per_node) / nic;
        break;
      case Collective::all_gather:
      case Collective::reduce_scatter:
        intra = in_node(op, S / K);
        inter = double(K - 1) / K * (S / per_node) / nic;
        break;
      case Collective::all_to_all:
        intra = in_node(op, S * per_node / g.gpus);
        inter = S * double(g.gpus - per_node) / g.gpus / nic;
        break;
      case Collective::send_recv:
        inter = S / nic;
        break;
    }
    // The catalogue's EFA latency is a measured small-message all-reduce across nodes. An
    // all-gather, reduce-scatter or all-to-all is one of its two phases (NCCL's ring: n - 1 of the
    // all-reduce's 2(n - 1) steps), so it pays half of it; a send/recv pays it whole.
    const double phases = op == Collective::all_reduce || op == Collective::send_recv ? 1.0 : 0.5;
    t.seconds = phases * g.instance->efa_latency_s * std::ceil(std::log2(K)) + std::max(intra, inter);
    t.source = Source::roofline;  // published EFA figures, not this project's runs
    return t;
  }

  OpTime transfer(double bytes, bool cross_node, const InstanceSpec* instance) const override {
    if (!cross_node) return collective(Collective::send_recv, bytes, {2, 1, nullptr});
    if (!instance) throw Error("transfer", "instance", "an instance type is required for a cross-node transfer");
    return collective(Collective::send_recv, bytes, {2, 2, instance});
  }

  std::string provenance() const override {
    std::string out;
    if (!releases_.empty()) {
      out = "kernel tables for " + asked_ + ", nearest release first:";
      for (const Layer& l : releases_) {
        std::string fams;
        for (const auto& [name, f] : l.cal->headers())
          if (f.rejected.empty() && !find(name, false).table.compare(l.label)) fams += (fams.empty() ? "" : ", ") + name;
        if (!fams.empty()) out += " " + l.label + ": " + fams + ";";
      }
      out += " every other family: ";
    }
    return out + base_provenance();
  }

  std::string base_provenance() const {
    const Calibration& own_ = *this->own_;
    if (!own_.empty()) {
      int vllm = 0, torch = 0;
      std::string runtimes;
      for (const auto& [name, f] : own_.headers()) {
        if (name.ends_with("_torch")) continue;
        (f.origin == "vllm" ? vllm : torch)++;
        if (f.origin == "vllm" && runtimes.find(f.runtime) == std::string::npos)
          runtimes += (runtimes.empty() ? "" : ", ") + f.runtime;
      }
      std::string out = "measured on " + gpu_.name;
      if (vllm) out += " (" + runtimes + " kernels: " + std::to_string(vllm) + " families)";
      if (torch) out += std::string(vllm ? " and" : "") + " (PyTorch/Triton runs: " + std::to_string(torch) + " families)";
      std::string moved;
      if (ref_)
        for (const auto& [name, f] : ref_->headers())
          if (!name.ends_with("_torch") && !own_.header(name)) moved += (moved.empty() ? "" : ", ") + name;
      if (!moved.empty())
        out += "; transferred from " + ref_->gpu().name + " (scaled by the datasheet bandwidth and compute ratios "
               "with achieved-fraction priors): " + moved;
      return out + "; roofline priors for families measured nowhere";
    }
    if (ref_ && !ref_->empty())
      return "transferred from " + ref_->gpu().name + " measurements onto " + gpu_.name +
             "'s datasheet peaks with its achieved-fraction priors (hardware.md §2)";
    return "roofline priors only (no calibration data)";
  }

  LaunchOverhead launch(bool graph_floor) const {
    if (!own_->empty()) {
      LaunchOverhead o = own_->launch_overhead(graph_floor);
      if (o.eager_per_kernel_s > 0) return o;
    }
    if (ref_) {
      LaunchOverhead o = ref_->launch_overhead(graph_floor);
      o.source = "transferred: " + o.source + " (CPU launch cost assumed the same on " + gpu_.name + ")";
      return o;
    }
    return {};
  }

 private:
  struct Found {
    const FamilyCalibration* cal = nullptr;
    bool own = false;
    const GpuSpec* gpu = nullptr;  // the GPU the family was measured on
    std::string_view table;        // which table (Layer::label)
  };

  // The first table that timed `family`, nearest release first, then vLLM 0.24, then the reference
  // GPU's. A family whose timings the data's provenance rejects is never used (FamilyCalibration::rejected).
  // `fitted` false: the family as read (Calibration::header), for naming its table without fitting it.
  Found find(std::string_view family, bool fitted = true) const {
    for (const Layer& l : layers_)
      if (l.fallback_only) continue;
      else if (const auto* f = fitted ? l.cal->family(family) : l.cal->header(family); f && f->rejected.empty())
        return found(l, f);
    return {};
  }
  static Found found(const Layer& l, const FamilyCalibration* f) {
    return {f, l.own, &l.cal->gpu(), l.label.empty() ? std::string_view(f->runtime) : std::string_view(l.label)};
  }

  // The table that times a query with shape coordinates (Query::shape_dims). `first` (what find()
  // gives) covers the query when its measured grid holds the query's value of every shape
  // coordinate (FamilyFit::outside_grid 0: no extrapolation in head count, KV heads, head size, and
  // the KV dtype and window measured). Otherwise the first table in order that covers it: this
  // engine's releases nearest first, the GPU's vLLM 0.24 tables and own runs, the other releases
  // measured on this GPU (this engine's first, then the other engines'), the reference GPU's; where
  // none does, the one that extrapolates least (summed log distance outside the grids), the earlier
  // on a tie. The figure is that table's, exactly; its `table` says which and why.
  Found covering(const Query& q, const Found& first) const {
    if (!q.shape_dims || !first.cal || first.cal->fit.outside_grid(q.group, q.x, q.shape_dims) == 0) return first;
    Found best = first;
    double least = first.cal->fit.outside_grid(q.group, q.x, q.shape_dims);
    for (const Layer& l : layers_) {
      const FamilyCalibration* f = l.cal->header(q.family);
      if (!f || !f->rejected.empty() || f == first.cal) continue;
      f = l.cal->family(q.family);
      const double d = f->fit.outside_grid(q.group, q.x, q.shape_dims);
      if (d < least) least = d, best = found(l, f);
      if (d == 0) break;
    }
    if (best.cal == first.cal) return first;
    std::string shape;
    for (int i = 0; i < kMaxFeatures; ++i)
      if (q.shape_dims >> i & 1u)
        shape += (shape.empty() ? "" : " x ") + std::to_string(std::lround(std::exp(q.x[i])));
    std::string why = std::string(first.table) + ": no " + std::string(q.family) + " at " + shape +
                      (least == 0 ? "" : " (none covers it: the least extrapolation)") + "; from " +
                      std::string(best.table);
    best.table = label(std::move(why));
    return best;
  }

  // Whether the family's tables timed this sliding window (at any shape): a query at an unmeasured
  // window would otherwise borrow full-attention rows of the same shape, window ignored.
  bool window_measured(std::string_view family, double kv_bytes, int window) const {
    const Found f = find(family);
    return !f.cal || f.cal->fit.has_group(attention_group(kv_bytes, window));
  }

  // A stand-in for a shape no table timed is never reported as measured.
  static OpTime not_measured(OpTime t) {
    if (t.source == Source::measured) t.source = Source::interpolated;
    return t;
  }

  static void check_positive(std::initializer_list<double> v, const char* op) {
    for (double x : v)
      if (!(x > 0)) throw Error(op, "", "shape values must be > 0");
  }

  double compute_prior(const GpuSpec& g, Precision p) const {
    double e = g.priors.gemm(p);
    return e > 0 ? e : g.priors.gemm_bf16;
  }
  double peak(const GpuSpec& g, Precision p) const {
    double f = g.dense_flops(p);
    return f > 0 ? f : g.bf16_flops;
  }

  // Picks the split term (launch, compute, memory) the fitted model spends most time in.
  static Bound bound_of(double launch, double compute, double memory) {
    if (launch >= compute && launch >= memory) return Bound::launch;
    return compute >= memory ? Bound::compute : Bound::memory;
  }

  OpTime eval(const Query& q, bool substitute = false, const Found* at_table = nullptr) const {
    OpTime t;
    t.flops = q.work.flops;
    t.bytes = q.work.bytes;
    const Found f = at_table ? *at_table : covering(q, find(q.family));
    if (!f.cal) {  // roofline prior with this GPU's achieved fractions
      RooflineSplit r = split_roofline(q.work.flops / (peak(gpu_, q.query_prec) * compute_prior(gpu_, q.query_prec)),
                                       q.work.bytes / (gpu_.hbm_bw_bytes_per_s * gpu_.priors.memory));
      t.seconds = kPriorLaunchS + r.total();
      t.bound = bound_of(kPriorLaunchS, r.compute, r.memory);
      t.source = Source::roofline;
      return t;
    }
    const GpuSpec& mg = *f.gpu;  // the GPU the family was measured on
    const FamilyFit& fit = f.cal->fit;
    const Work& wm = q.measured_as.flops >= 0 ? q.measured_as : q.work;
    double c_ref = wm.flops / peak(mg, q.family_prec), m_ref = wm.bytes / mg.hbm_bw_bytes_per_s;
    bool exact = false;
    Sample at;  // the query on the measured GPU
    const double d_ref = q.dispatch_bytes / mg.hbm_bw_bytes_per_s;
    at.key = q.key, at.group = q.group, at.x = q.x, at.compute_s = c_ref, at.memory_s = m_ref, at.dispatch_s = d_ref;
    int kid = -1;
    double t_ref = fit.predict(at, &exact, false, &kid);
    t.kernel = !q.label.empty() ? q.label
               : kid >= 0 && kid < int(f.cal->kernels.size()) ? std::string_view(f.cal->kernels[kid]) : std::string_view();
    // The query on this GPU, in the measured GPU's efficiency units: peak × prior ratio.
    double c = q.work.flops / peak(gpu_, q.query_prec) * compute_prior(mg, q.family_prec) / compute_prior(gpu_, q.query_prec);
    double m = q.work.bytes / gpu_.hbm_bw_bytes_per_s * mg.priors.memory / gpu_.priors.memory;
    bool moved = !f.own || substitute;
    const double d = q.dispatch_bytes / gpu_.hbm_bw_bytes_per_s * mg.priors.memory / gpu_.priors.memory;
    t.seconds = moved ? t_ref * fit.roofline_fit(c, m, 1, d) / fit.roofline_fit(c_ref, m_ref, 1, d_ref) : t_ref;
    t.cold_weights_s = hw::cold_weights(f.cal->family, f.cal->origin, mg.l2_bytes, gpu_.hbm_bw_bytes_per_s).seconds(q.work.bytes);
    t.seconds += t.cold_weights_s;
    RooflineSplit r = split_roofline(c, m);
    t.bound = bound_of(fit.launch_s(), r.compute / std::max(fit.compute_efficiency(), 1e-9) * (fit.compute_efficiency() > 0),
                       r.memory / std::max(fit.memory_efficiency(), 1e-9) * (fit.memory_efficiency() > 0));
    if (fit.compute_efficiency() == 0 && fit.memory_efficiency() == 0) t.bound = Bound::launch;
    t.source = !f.own ? Source::transferred : (exact && !substitute ? Source::measured : Source::interpolated);
    t.table = f.table;
    return t;
  }

  // Collective inside one NVLink domain, from the 2-GPU fit scaled to n GPUs: bus bytes grow by
  // the ring factor, the fixed latency by the tree depth log2(n).
  OpTime nvlink(Collective op, double bytes, int n) const {
    OpTime t;
    t.bound = Bound::communication;
    t.bytes = bytes;
    double bus = bytes * bus_factor(to_string(op), n), depth = std::log2(double(n));
    Found f = find(nccl_family(op));
    if (!f.cal) {
      t.seconds = gpu_.priors.nccl_latency_s * depth + bus / (gpu_.nvlink_bw_bytes_per_s * gpu_.priors.nccl_busbw);
      t.source = Source::roofline;
      return t;
    }
    const GpuSpec& mg = *f.gpu;
    const FamilyFit& fit = f.cal->fit;
    std::uint64_t key = shape_key({double(n)});
    t.table = f.table;
    double m_ref = bus / mg.nvlink_bw_bytes_per_s;
    bool exact = false;
    Sample at;
    at.key = at.group = key, at.x = bytes_features(bytes), at.memory_s = m_ref;
    double t_ref;
    const std::uint64_t key2 = shape_key({2.0});
    const auto scaling = op == Collective::all_reduce ? nccl_allreduce_scaling(gpu_, n, bytes) : std::nullopt;
    if (fit.has_series(key)) {
      t_ref = fit.predict(at, &exact);
    } else if (scaling && fit.has_series(key2)) {
      // Not measured at n GPUs: our 2-GPU measurement times the published n-GPU / 2-GPU ratio.
      Sample two = at;
      two.key = two.group = key2;
      two.memory_s = bytes * bus_factor(to_string(op), 2) / mg.nvlink_bw_bytes_per_s;
      t_ref = fit.predict(two, nullptr) * *scaling;
    } else {
      t_ref = fit.roofline_fit(0, m_ref, depth);
    }
    t.source = exact ? Source::measured : Source::interpolated;
    if (!f.own) {
      double m = bus / gpu_.nvlink_bw_bytes_per_s * mg.priors.nccl_busbw / gpu_.priors.nccl_busbw;
      double lat = gpu_.priors.nccl_latency_s / mg.priors.nccl_latency_s;
      t_ref *= fit.roofline_fit(0, m, depth * lat) / fit.roofline_fit(0, m_ref, depth);
      t.source = Source::transferred;
    }
    // Never faster than the ring's bus bytes over this GPU's NVLink (a scaled or transferred curve could be).
    t.seconds = std::max(t_ref, bus / gpu_.nvlink_bw_bytes_per_s);
    return t;
  }

  const GpuSpec& gpu_;
  std::vector<Layer> releases_;
  std::shared_ptr<const Calibration> own_;
  std::shared_ptr<const Calibration> ref_;
  std::string asked_;
  bool block_fp8_gemm_rows_ = false;
  bool fp8_gemm_m1_at_most_m2_ = false;
  bool moe_tp_on_ep_rows_ = false;
  std::vector<std::string> moe_same_kernel_;
  bool moe_same_kernel_scaled_ = false;
  std::vector<std::string> moe_first_;
  std::vector<Layer> layers_;
  // Labels composed at query time (a covering table's OpTime::table, a MoE-TP layer's
  // OpTime::kernel), kept for the views (set nodes do not move).
  mutable std::mutex labels_mu_;
  mutable std::set<std::string, std::less<>> labels_;
  std::string_view label(std::string s) const {
    std::lock_guard<std::mutex> lock(labels_mu_);
    return *labels_.insert(std::move(s)).first;
  }
};

// The GPU whose measurements stand in for GPUs without their own calibration folder.
constexpr const char* kReferenceGpu = "H200";

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

bool weight_only(const GpuSpec& gpu, Precision p) {
  return p == Precision::int4 || p == Precision::mxfp4 || (p == Precision::nvfp4 && !gpu.native(p));
}

namespace {

// A release as its folder names it: "vllm-0.19.0", "sglang-0.5.14", "trtllm-1.3.0rc20".
struct Release {
  std::string folder, engine, version;
};

// Version order: numeric components ("0.5.14"), a pre-release ("1.3.0rc20") before its final.
struct Version {
  std::vector<long> parts;
  long pre = std::numeric_limits<long>::max();  // rc number; max = a final release
};
Version parse_version(std::string_view v) {
  Version out;
  for (std::size_t i = 0; i <= v.size();) {
    std::size_t j = v.find('.', i);
    if (j == std::string_view::npos) j = v.size();
    const std::string_view part = v.substr(i, j - i);
    std::size_t d = 0;
    while (d < part.size() && std::isdigit(static_cast<unsigned char>(part[d]))) ++d;
    out.parts.push_back(d ? std::stol(std::string(part.substr(0, d))) : 0);
    if (const auto rc = part.find("rc"); rc != std::string_view::npos && rc + 2 < part.size())
      out.pre = std::stol(std::string(part.substr(rc + 2)));
    i = j + 1;
  }
  return out;
}
// -1, 0, 1 as a is older than, the same as, newer than b (missing components count as 0).
int compare(const Version& a, const Version& b) {
  for (std::size_t i = 0; i < std::max(a.parts.size(), b.parts.size()); ++i) {
    const long x = i < a.parts.size() ? a.parts[i] : 0, y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return a.pre == b.pre ? 0 : a.pre < b.pre ? -1 : 1;
}
// Whether `release` is a build of the asked version: "0.5" asks for 0.5.14, "1.3" for 1.3.0rc20.
bool is_build_of(const Version& release, const Version& asked) {
  if (asked.parts.size() > release.parts.size()) return false;
  for (std::size_t i = 0; i < asked.parts.size(); ++i)
    if (asked.parts[i] != release.parts[i]) return false;
  return asked.pre == std::numeric_limits<long>::max() || asked.pre == release.pre;
}

std::string engine_name(std::string_view engine) {
  if (engine == "vllm") return "vLLM";
  if (engine == "sglang") return "SGLang";
  if (engine == "trtllm") return "TensorRT-LLM";
  return std::string(engine);
}

// The releases of `tables.engine` measured on `gpu`, nearest first: the builds of the asked version
// and the older releases, newest first; then the newer ones, oldest first. vLLM's 0.24 tables are
// the base folder (not listed): a release newer than every listed one and older than 0.24 falls to it.
std::vector<Release> nearest_releases(const GpuSpec& gpu, const KernelTables& tables) {
  const Version asked = parse_version(tables.version);
  std::vector<std::pair<Release, Version>> below, above;
  for (const auto& folder : Calibration::embedded_releases(gpu)) {
    const auto dash = folder.find('-');
    if (dash == std::string::npos || folder.substr(0, dash) != tables.engine) continue;
    Release r{folder, folder.substr(0, dash), folder.substr(dash + 1)};
    const Version v = parse_version(r.version);
    (is_build_of(v, asked) || compare(v, asked) < 0 ? below : above).emplace_back(std::move(r), v);
  }
  std::sort(below.begin(), below.end(), [](const auto& a, const auto& b) { return compare(a.second, b.second) > 0; });
  std::sort(above.begin(), above.end(), [](const auto& a, const auto& b) { return compare(a.second, b.second) < 0; });
  std::vector<Release> out;
  // vLLM: the base folder is 0.24.0; a release past it stays behind it.
  const bool vllm = tables.engine == "vllm";
  const Version base = parse_version("0.24.0");
  const bool base_at_or_below = vllm && (is_build_of(base, asked) || compare(base, asked) < 0);
  for (auto& [r, v] : below)
    if (!base_at_or_below || compare(v, base) > 0) out.push_back(r);
  if (!base_at_or_below)
    for (auto& [r, v] : above)
      if (!vllm || compare(v, base) < 0) out.push_back(r);
  return out;
}

}  // namespace

const KernelModel& kernel_model(const GpuSpec& gpu) { return kernel_model(gpu, KernelTables{}); }

const KernelModel& kernel_model(const GpuSpec& gpu, const KernelTables& tables) {
  std::lock_guard<std::mutex> lock(cache_mutex());
  static std::map<std::pair<const GpuSpec*, KernelTables>, std::unique_ptr<Model>> cache;
  static std::map<std::pair<const GpuSpec*, std::string>, std::shared_ptr<const Calibration>> tables_cache;
  const auto key = std::make_pair(&gpu, tables);
  if (auto it = cache.find(key); it != cache.end()) return *it->second;
  // Calibrations are read lazily and shared by every model of the GPU.
  auto calibration = [&](const GpuSpec& g, const std::string& folder) {
    auto& c = tables_cache[{&g, folder}];
    if (!c) c = std::make_shared<const Calibration>(Calibration::embedded(g, folder));
    return c;
  };
  std::vector<Layer> releases;
  const std::vector<Release> listed = nearest_releases(gpu, tables);
  const Version asked = parse_version(tables.version);
  for (const Release& r : listed) {
    const Version v = parse_version(r.version);
    std::string label = engine_name(r.engine) + " " + r.version + " table";
    if (!is_build_of(v, asked)) label += " (nearest measured: " + r.version + " for " + tables.version + ")";
    releases.push_back({calibration(gpu, r.folder), label, true, r.engine == "vllm"});
  }
  // The other release folders of this GPU, read only for a shape the tables above lack: this
  // engine's first (nearest first), then the other engines' in folder order.
  std::vector<Layer> others;
  std::vector<Release> rest;
  for (const auto& folder : Calibration::embedded_releases(gpu)) {
    if (std::any_of(listed.begin(), listed.end(), [&](const Release& r) { return r.folder == folder; })) continue;
    const auto dash = folder.find('-');
    if (dash == std::string::npos) continue;
    rest.push_back({folder, folder.substr(0, dash), folder.substr(dash + 1)});
  }
  std::stable_sort(rest.begin(), rest.end(), [&](const Release& a, const Release& b) {
    const bool sa = a.engine == tables.engine, sb = b.engine == tables.engine;
    if (sa != sb) return sa;
    return sa && compare(parse_version(a.version), parse_version(b.version)) > 0;
  });
  for (const Release& r : rest)
    others.push_back({calibration(gpu, r.folder), engine_name(r.engine) + " " + r.version + " table", true, r.engine == "vllm"});
  // Families this GPU has no measurement of come from the reference GPU's runs.
  const bool transfer = !text::iequals(gpu.name, kReferenceGpu);
  auto m = std::make_unique<Model>(gpu, std::move(releases), calibration(gpu, ""),
                                   transfer ? calibration(Catalog::global().gpu(kReferenceGpu), "") : nullptr,
                                   engine_name(tables.engine) + " " + tables.version, std::move(others), tables);
  return *cache.emplace(key, std::move(m)).first->second;
}

LaunchOverhead launch_overhead(const GpuSpec& gpu, bool graph_floor) {
  return static_cast<const Model&>(kernel_model(gpu)).launch(graph_floor);
}

}  // namespace servesim::hw
