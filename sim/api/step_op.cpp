// api: one kernel's predicted time (`servesim op`) and one engine step explained (`servesim step`).
#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "models/step_cost.hpp"
#include "sim/api/api.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/engine/worker.hpp"
#include "sim/resolve.hpp"

namespace servesim::api {
namespace {

// The op's arguments: each read at most once, unknown or missing ones named with the known list.
class OpArgs {
 public:
  OpArgs(std::string_view kind, const nlohmann::json& j, std::vector<std::string> known)
      : where_("op " + std::string(kind)), j_(j), known_(std::move(known)) {
    known_.insert(known_.begin(), "gpu");
    if (!j_.is_object()) throw Error(where_, "", "arguments must be an object");
    for (const auto& [k, v] : j_.items())
      if (std::find(known_.begin(), known_.end(), k) == known_.end())
        throw Error(where_, k, "unknown argument; known: " + text::join(known_, ", "));
  }
  double number(const std::string& k, std::optional<double> dflt = std::nullopt) const {
    if (!j_.contains(k) || j_[k].is_null()) {
      if (!dflt) throw Error(where_, k, "required; arguments: " + text::join(known_, ", "));
      return *dflt;
    }
    if (!j_[k].is_number()) throw Error(where_, k, "expected a number, got " + brief(j_[k]));
    const double v = j_[k].get<double>();
    if (!std::isfinite(v)) throw Error(where_, k, "must be finite");
    return v;
  }
  std::int64_t integer(const std::string& k, std::optional<std::int64_t> dflt = std::nullopt, std::int64_t min = 1) const {
    const double v = number(k, dflt ? std::optional<double>(double(*dflt)) : std::nullopt);
    if (v != std::floor(v) || v < double(min) || v > 9e15)
      throw Error(where_, k, "expected a whole number >= " + std::to_string(min) + ", got " + brief(j_[k]));
    return static_cast<std::int64_t>(v);
  }
  int small(const std::string& k, std::optional<int> dflt = std::nullopt) const {
    const auto v = integer(k, dflt ? std::optional<std::int64_t>(*dflt) : std::nullopt);
    if (v > (1 << 30)) throw Error(where_, k, "too large: " + std::to_string(v));
    return static_cast<int>(v);
  }
  std::string str(const std::string& k, const std::string& dflt) const {
    if (!j_.contains(k) || j_[k].is_null()) return dflt;
    if (!j_[k].is_string()) throw Error(where_, k, "expected a string, got " + brief(j_[k]));
    return j_[k].get<std::string>();
  }

 private:
  std::string where_;
  const nlohmann::json& j_;
  std::vector<std::string> known_;
};

// The kernel tables of an engine profile (`simulate --engine` names), vLLM 0.24's when none is named.
hw::KernelTables tables_of(const std::string& engine, const std::string& where) {
  return engine.empty() ? hw::KernelTables{} : sim::engine_profile(engine, where).kernel_tables;
}

nlohmann::json op_json(const std::string& what, const hw::KernelModel& km, const hw::GpuSpec& gpu, const hw::OpTime& t,
                       nlohmann::json shape) {
  return {{"op", what},
          {"gpu", gpu.name},
          {"shape", std::move(shape)},
          {"seconds", t.seconds},
          {"cold_weights_seconds", t.cold_weights_s},
          {"source", hw::to_string(t.source)},
          {"bound", hw::to_string(t.bound)},
          {"flops", t.flops},
          {"bytes", t.bytes},
          {"achieved_flops_per_s", t.seconds > 0 ? t.flops / t.seconds : 0.0},
          {"achieved_bytes_per_s", t.seconds > 0 ? t.bytes / t.seconds : 0.0},
          {"kernel", std::string(t.kernel)},
          {"table", std::string(t.table)},
          {"provenance", km.provenance()}};
}

const std::map<std::string, std::vector<std::string>>& op_table() {
  static const std::map<std::string, std::vector<std::string>> t = {
      {"gemm", {"m", "n", "k", "dtype"}},
      {"grouped-gemm", {"experts", "tokens", "n", "k", "dtype", "skew"}},
      {"attention-prefill", {"batch", "seq", "heads", "kv_heads", "head_dim", "kv_dtype", "window"}},
      {"attention-decode", {"batch", "context", "heads", "kv_heads", "head_dim", "kv_dtype", "window"}},
      {"moe", {"tokens", "hidden", "inter", "topk", "experts", "tp", "ep", "dtype", "skew", "gated"}},
      {"tp-all-reduce", {"gpus", "bytes"}},
      {"mamba-scan", {"batch", "seqlen", "heads", "head_dim", "d_state", "groups"}},
      {"mamba-step", {"batch", "heads", "head_dim", "d_state", "groups"}},
      {"collective", {"op", "gpus", "bytes", "nodes", "instance"}},
  };
  static const auto with_engine = [] {
    auto e = t;
    for (auto& [kind, args] : e) args.push_back("engine");
    return e;
  }();
  return with_engine;
}

}  // namespace

const std::vector<std::string>& op_kinds() {
  static const std::vector<std::string> k = {"gemm", "grouped-gemm", "attention-prefill", "attention-decode", "moe",
                                             "mamba-scan", "mamba-step", "collective", "tp-all-reduce"};
  return k;
}

nlohmann::json op_time_of(std::string_view kind_in, const nlohmann::json& args);

nlohmann::json op_time(std::string_view kind_in, const nlohmann::json& args) {
  nlohmann::json j = op_time_of(kind_in, args);
  // What was resolved for flags left out (sim/resolve.hpp's GPU rule), for the header.
  auto given = [&](const char* k) { return args.is_object() && args.contains(k) && !args.at(k).is_null(); };
  nlohmann::json notes = nlohmann::json::array();
  if (!given("gpu") && !given("instance")) notes.push_back("GPU H200 (none named)");
  if (!given("dtype") && j.contains("shape") && j["shape"].is_object() && j["shape"].contains("dtype"))
    notes.push_back("dtype " + j["shape"]["dtype"].get<std::string>());
  j["defaults"] = notes;
  return j;
}

nlohmann::json op_time_of(std::string_view kind_in, const nlohmann::json& args) {
  std::string kind = text::lower(kind_in);
  std::replace(kind.begin(), kind.end(), '_', '-');
  const auto it = op_table().find(kind);
  if (it == op_table().end())
    throw Error("op", "", "unknown op '" + std::string(kind_in) + "'; known: " + text::join(op_kinds(), ", "));
  const OpArgs a(kind, args, it->second);
  // A collective on an instance runs on that instance's GPU; a --gpu naming another is refused.
  const std::string on_instance = kind == "collective" ? a.str("instance", "") : "";
  const auto& g = hw::Catalog::global().gpu(sim::resolve_gpu(a.str("gpu", ""), on_instance, "H200"));
  const auto& km = hw::kernel_model(g, tables_of(a.str("engine", ""), "--engine"));
  if (kind == "gemm") {
    const auto p = hw::parse_precision(a.str("dtype", "bf16"), "--dtype");
    const auto m = a.integer("m"), n = a.integer("n"), k = a.integer("k");
    return op_json(kind, km, g, km.gemm(m, n, k, p), {{"m", m}, {"n", n}, {"k", k}, {"dtype", hw::to_string(p)}});
  }
  if (kind == "grouped-gemm") {
    const auto p = hw::parse_precision(a.str("dtype", "bf16"), "--dtype");
    const int e = a.small("experts");
    const auto t = a.integer("tokens"), n = a.integer("n"), k = a.integer("k");
    const double skew = a.number("skew", 0.0);
    if (skew < 0) throw Error("op grouped-gemm", "skew", "must be >= 0");
    return op_json(kind, km, g, km.grouped_gemm(e, t, n, k, p, skew),
                   {{"experts", e}, {"tokens", t}, {"n", n}, {"k", k}, {"dtype", hw::to_string(p)}, {"skew", skew}});
  }
  if (kind == "attention-prefill" || kind == "attention-decode") {
    const bool prefill = kind == "attention-prefill";
    const char* len = prefill ? "seq" : "context";
    const int b = a.small("batch"), h = a.small("heads"), kv = a.small("kv_heads"), d = a.small("head_dim");
    const auto s = a.integer(len);
    const auto kvd = hw::parse_precision(a.str("kv_dtype", "bf16"), "--kv-dtype");
    if (kvd != hw::Precision::bf16 && kvd != hw::Precision::fp8) throw Error("--kv-dtype", "", "expected bf16 or fp8");
    const int w = int(a.integer("window", 0, 0));
    const auto t = prefill ? km.attention_prefill(b, s, h, kv, d, kvd, w) : km.attention_decode(b, s, h, kv, d, kvd, w);
    return op_json(kind, km, g, t, {{"batch", b}, {len, s}, {"heads", h}, {"kv_heads", kv}, {"head_dim", d},
                                {"kv_dtype", hw::to_string(kvd)}, {"window", w}});
  }
  if (kind == "moe") {
    const auto p = hw::parse_precision(a.str("dtype", "bf16"), "--dtype");
    hw::MoeShape m;
    m.tokens = double(a.integer("tokens"));
    m.hidden = double(a.integer("hidden"));
    m.inter = double(a.integer("inter"));
    m.topk = a.small("topk");
    m.experts = a.small("experts");
    m.tp = a.small("tp", 1);
    m.ep = a.small("ep", 1);
    m.skew = a.number("skew", 0.0);
    m.gated = a.integer("gated", 1, 0) != 0;
    return op_json(kind, km, g, km.moe(m, p),
                   {{"tokens", m.tokens}, {"hidden", m.hidden}, {"inter", m.inter}, {"topk", m.topk},
                    {"experts", m.experts}, {"tp", m.tp}, {"ep", m.ep}, {"dtype", hw::to_string(p)}, {"skew", m.skew},
                    {"gated", m.gated}, {"experts_touched", hw::moe_routing_expected(m).touched}});
  }
  if (kind == "tp-all-reduce") {
    const int gpus = a.small("gpus");
    const double bytes = a.number("bytes");
    return op_json(kind, km, g, km.tp_all_reduce(bytes, gpus), {{"gpus", gpus}, {"bytes", bytes}});
  }
  if (kind == "mamba-scan" || kind == "mamba-step") {
    const bool scan = kind == "mamba-scan";
    const int b = a.small("batch"), h = a.small("heads"), d = a.small("head_dim"), ds = a.small("d_state"), gr = a.small("groups");
    nlohmann::json shape = {{"batch", b}, {"heads", h}, {"head_dim", d}, {"d_state", ds}, {"groups", gr}};
    if (scan) {
      const auto s = a.integer("seqlen");
      shape["seqlen"] = s;
      return op_json(kind, km, g, km.mamba_scan(b, s, h, d, ds, gr), shape);
    }
    return op_json(kind, km, g, km.mamba_step(b, h, d, ds, gr), shape);
  }
  // collective
  const auto c = hw::parse_collective(a.str("op", ""), "--op");
  const int gpus = a.small("gpus"), nodes = a.small("nodes", 1);
  const double bytes = a.number("bytes");
  if (bytes < 0) throw Error("op collective", "bytes", "must be >= 0");
  const std::string iname = a.str("instance", "");
  const hw::InstanceSpec* inst = iname.empty() ? nullptr : &hw::Catalog::global().instance(iname);
  if (nodes > 1 && !inst) throw Error("--instance", "", "required when --nodes > 1");
  nlohmann::json shape = {{"op", hw::to_string(c)}, {"gpus", gpus}, {"nodes", nodes}, {"bytes", bytes}};
  if (inst) shape["instance"] = inst->name;
  return op_json(kind, km, g, km.collective(c, bytes, {gpus, nodes, inst}), shape);
}

namespace {

// The step's parts, and its bandwidth bound: every row's HBM bytes (weights touched, KV, state,
// activations) streamed once at the datasheet HBM bandwidth.
// The sampler row's name under each engine. Its time is one table whatever the engine: vLLM v1's
// Sampler timed as PyTorch ops (hwmodels/data/sampler_h200.json). SGLang samples with FlashInfer by
// default and TRT-LLM's PyExecutor with its TorchSampler (sampler_type auto, no beam search)
// (../shared/reference/sglang-trtllm-engines.md A6, B1); neither is timed on its own.
std::string sampler_kernel(sim::EngineKind k, const std::string& vllm_label) {
  switch (k) {
    case sim::EngineKind::sglang:
      return "SGLang sampler (FlashInfer sampling by default; timed as vLLM's Sampler: the same PyTorch ops)";
    case sim::EngineKind::trtllm:
      return "TRT-LLM TorchSampler (sampler_type auto; timed as vLLM's Sampler: the same PyTorch ops)";
    case sim::EngineKind::vllm: break;
  }
  return vllm_label;
}

nlohmann::json parts_json(const models::StepTime& t, const hw::GpuSpec& gpu, sim::EngineKind engine) {
  nlohmann::json a = nlohmann::json::array();
  double bytes = 0;
  for (const auto& p : t.parts) {
    bytes += p.hbm_bytes;
    a.push_back({{"kind", p.kind}, {"op", p.op}, {"seconds", p.seconds}, {"bound", p.bound}, {"source", p.source},
                 {"layers", p.layers}, {"kernel", p.kind == "sampler" ? sampler_kernel(engine, p.kernel) : p.kernel},
                 {"table", p.table}, {"hbm_bytes", p.hbm_bytes},
                 {"bandwidth_bound_seconds", p.hbm_bytes / gpu.hbm_bw_bytes_per_s}});
  }
  return {{"seconds", t.seconds}, {"parts", a}, {"hbm_bytes", bytes},
          {"bandwidth_bound_seconds", bytes / gpu.hbm_bw_bytes_per_s}};
}

// What the host books to launch each step's kernels under the engine's profile (the default
// vLLM profile without --engine): the forward's kernel count, its block-FP8 linears, the per-kernel
// and per-linear costs, and the launch time a Worker books for this decode and this prefill step
// (0 for a full CUDA-graph replay). A step lasts at least its launch time; where the engine's
// scheduler thread issues the kernels (TRT-LLM's PyExecutor) the next batch waits for them too.
nlohmann::json launch_json(const StepArgs& a, const models::ModelSpec& m, const hw::GpuSpec& gpu, int tp,
                           const models::StepCostModel& cost, const models::StepBatch& dec, const models::StepBatch& pre) {
  const std::string name = a.engine.empty() ? "vllm" : a.engine;
  const auto& p = sim::engine_profile(name, "--engine");
  sim::EngineConfig cfg;
  sim::apply_profile(p, m, gpu, nlohmann::json::object(), cfg, tp);
  const sim::Worker w(cfg, cost, 1 << 20, {}, 0);
  const auto lc = cost.launch_counts();
  const double per_kernel = cfg.enforce_eager ? cfg.launch_per_kernel_eager_s : cfg.launch_per_kernel_s;
  const double eager = w.launch_seconds(std::int64_t(1) << 40, false);   // beyond every graph: all from the host
  return {{"engine_profile", p.name}, {"kernels", lc.kernels}, {"fp8_block_linears", lc.fp8_block_linears},
          {"per_kernel_s", per_kernel}, {"per_fp8_block_linear_s", cfg.launch_per_fp8_block_linear_s},
          {"eager_forward_s", eager},
          {"decode_step_s", w.launch_seconds(dec.decode_seqs, true)},
          {"prefill_step_s", w.launch_seconds(pre.prefill_tokens, false)},
          {"on_scheduler_thread", cfg.launches_on_scheduler_thread}};
}

}  // namespace

nlohmann::json step(const StepArgs& a) {
  const auto& m = resolve_model(a.model, a.model_file);
  const sim::Resolved r = resolve_replica(m, a.model_file.empty() ? a.model : "", a.gpu, a.precision, a.tp, a.pp);
  const auto& gpu = hw::Catalog::global().gpu(r.gpu);
  const auto wp = r.precision;
  // "auto" on an engine: that engine's rule (SGLang keeps a DSA model's cache in BF16 on Hopper).
  const bool auto_kv = a.kv_cache_dtype.empty() || text::iequals(a.kv_cache_dtype, "auto");
  const auto kv = auto_kv && !a.engine.empty() ? sim::engine_profile(a.engine, "--engine").auto_kv_cache_dtype(m, gpu, wp)
                                               : models::resolve_kv_cache_dtype(a.kv_cache_dtype, wp, "--kv-cache-dtype");
  if (a.batch < 1) throw Error("--batch", "", "must be >= 1");
  if (a.context < 1) throw Error("--context", "", "must be >= 1");
  if (a.chunk < 0) throw Error("--chunk", "", "must be >= 0");
  if (a.vision_tiles < 0) throw Error("--vision-tiles", "", "must be >= 0");
  if (a.vision_tiles > 0 && !m.has_vision) throw Error("--vision-tiles", "", m.name + " has no vision encoder (text only)");
  if (a.batch > (1 << 20)) throw Error("--batch", "", "must be <= 1048576");
  if (a.context > (std::int64_t{1} << 31)) throw Error("--context", "", "must be <= 2^31 tokens");
  if (a.chunk > a.context) throw Error("--chunk", "", "must be <= --context (" + std::to_string(a.context) + ")");
  if (a.moe_all_to_all && (a.dp <= 1 || m.experts == 0))
    throw Error("--moe-all-to-all", "", "needs an MoE model under attention data parallelism (--dp > 1): the exchange it "
                                        "prices is between DP ranks");
  models::Parallelism par{r.tp, r.pp, a.ep, a.dp, a.moe_all_to_all};
  check_command_line_layout(a.engine, par);
  if (!a.engine.empty()) {   // the engine's attention-DP rules, as a run resolves them (--moe-all-to-all forces it)
    sim::EngineConfig cfg;
    const nlohmann::json given = a.moe_all_to_all ? nlohmann::json{{"moe_all_to_all", true}} : nlohmann::json::object();
    if (a.moe_all_to_all) cfg.moe_all_to_all = true;
    sim::apply_profile(sim::engine_profile(a.engine, "--engine"), m, gpu, given, cfg, r.tp);
    par = sim::with_engine_rules(par, cfg, m, gpu);
  }
  // Validates the shape and that it fits, with the engine's defaults and this KV dtype.
  models::EngineMemoryConfig mc;
  mc.kv_cache_dtype = kv;
  mc.max_num_seqs = models::serve_max_num_seqs(gpu);
  mc.max_num_batched_tokens = models::serve_max_num_batched_tokens(gpu);
  const auto plan = models::plan_memory(m, gpu, wp, par, mc);
  const auto cost = models::make_step_cost(m, gpu, wp, par, kv, tables_of(a.engine, "--engine"));
  const auto engine = a.engine.empty() ? sim::EngineKind::vllm : sim::engine_profile(a.engine, "--engine").kind;
  models::StepBatch dec;
  dec.decode_seqs = a.batch;
  dec.decode_context_tokens = std::int64_t(a.batch) * a.context;
  models::StepBatch pre;
  const std::int64_t c = a.chunk > 0 ? std::min<std::int64_t>(a.chunk, a.context) : a.context;
  pre.prefill_seqs = a.batch;
  pre.prefill_tokens = std::int64_t(a.batch) * c;
  const double prior = double(a.context - c);
  pre.prefill_attention_pairs = a.batch * (double(c) * prior + double(c) * (c + 1) / 2.0);
  pre.vision_tiles = a.vision_tiles;
  return {{"model", m.name}, {"gpu", gpu.name}, {"precision", std::string(hw::to_string(wp))},
          {"checkpoint_precision", m.checkpoint_precision}, {"checkpoint_format", models::checkpoint_format_label(m, wp)},
          {"quantized_experts_only", models::quantizes_experts_only(m, wp)},
          {"kv_cache_dtype", std::string(hw::to_string(kv))}, {"tp", r.tp}, {"pp", r.pp}, {"ep", a.ep}, {"dp", a.dp},
          {"defaults", r.notes},           {"batch", a.batch}, {"context", a.context}, {"prefill_chunk", c}, {"vision_tiles", a.vision_tiles},
          {"decode", parts_json(cost->breakdown(dec), gpu, engine)}, {"prefill", parts_json(cost->breakdown(pre), gpu, engine)},
          {"launch", launch_json(a, m, gpu, r.tp, *cost, dec, pre)}, {"provenance", cost->provenance()}, {"estimate", m.estimate}, {"kv_cache", kv_cache_json(plan, a.context)},
          {"hbm_bytes_per_s", gpu.hbm_bw_bytes_per_s}};
}

}  // namespace servesim::api
