#include "sim/engine/engine_profile.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "models/memory.hpp"

namespace servesim::sim {
namespace {

constexpr std::string_view kFolder = "sim/data/engines/";

// "0.12" -> {0, 12}; non-numeric parts compare as 0.
std::vector<int> version_key(const std::string& v) {
  std::vector<int> out;
  int x = 0;
  bool digits = true;
  for (char c : v) {
    if (c == '.') {
      out.push_back(x);
      x = 0;
      digits = true;
    } else if (digits && c >= '0' && c <= '9') {
      x = x * 10 + (c - '0');
    } else {
      digits = false;
    }
  }
  out.push_back(x);
  return out;
}

std::map<int, double> by_world_size(const JsonReader& j) {
  std::map<int, double> out;
  for (const auto& [k, v] : j.json().items()) out[std::stoi(k)] = v.get<double>();
  return out;
}

// A profile may name another embedded profile it "extends": its JSON is the base's with this
// file's fields merged over it (RFC 7396 merge patch: objects merge, anything else replaces, null
// removes), so a release that differs in a few knobs states only those.
nlohmann::json profile_json(std::string_view text, const std::string& file, int depth = 0) {
  nlohmann::json own = parse_json(text, file);
  if (!own.is_object() || !own.contains("extends")) return own;
  const JsonReader j(own, file);
  const std::string base = j.string("extends");
  const std::string base_file = std::string(kFolder) + base + ".json";
  if (depth >= 4) throw Error(file, "extends", "a chain of more than 4 profiles (is it circular?)");
  nlohmann::json merged = profile_json(data::get(base_file), base_file, depth + 1);
  own.erase("extends");
  merged.merge_patch(own);
  return merged;
}

EngineProfile parse_profile(std::string_view text, const std::string& file) {
  EngineProfile p;
  p.json = profile_json(text, file);
  const JsonReader j(p.json, file);
  p.name = j.string("name");
  p.engine = j.string("engine");
  p.version = j.string("version");
  p.description = j.string_or("description", "");
  p.kind = engine_kind(p.engine, file, "engine");
  p.kernel_tables = {p.engine, p.version};
  if (j.has("kernel_tables")) {
    const JsonReader k = j.object("kernel_tables");
    p.kernel_tables = {k.string("engine"), k.string("version")};
    // A key of two named values, `on` or `off` (the default), read as whether it is `on`.
    const auto choice = [&k](const char* key, const std::string& on, const std::string& on_means, const std::string& off,
                             const std::string& off_means, bool& out) {
      if (!k.has(key)) return;
      const std::string v = k.string(key);
      if (v != on && v != off)
        k.fail(key, "'" + v + "' unknown; valid: \"" + on + "\" (" + on_means + ") or \"" + off + "\" (" + off_means +
                        ", the default)");
      out = v == on;
    };
    choice("block_fp8_gemm", "fp8_block rows", "the release tables' own block-FP8 GEMM rows", "fp8 rows",
           "the per-tensor FP8 rows", p.kernel_tables.block_fp8_gemm_rows);
    choice("fp8_gemm_m1", "at most the m = 2 row", "a one-row FP8 GEMM costs at most the same shape's m = 2 time",
           "as measured", "the table's m = 1 rows", p.kernel_tables.fp8_gemm_m1_at_most_m2);
    choice("dsa_prefill", "sparse MLA", "DSA prompts past index_topk attended by FlashMLA's sparse kernel on Hopper, heads padded to 64",
           "dense MHA", "un-absorbed MHA over the picked tokens", p.kernel_tables.dsa_sparse_mla_prefill);
    choice("moe_tp", "ep rows", "a MoE-TP t layer on the release table's EP t rows of the same per-rank experts", "tp rows",
           "the table's MoE-TP rows", p.kernel_tables.moe_tp_on_ep_rows);
    // A non-empty list of fused-MoE family names at `key` of `r`.
    const auto families = [](const JsonReader& r, const char* key, const char* what) {
      const nlohmann::json& fams = r.json().contains(key) ? r.json().at(key) : nlohmann::json();
      if (!fams.is_array() || fams.empty())
        r.fail(key, std::string("needs a list of fused-MoE families (\"moe_<dtype>_<library>\") ") + what);
      std::vector<std::string> out;
      for (const nlohmann::json& f : fams) {
        if (!f.is_string() || !f.get<std::string>().starts_with("moe_"))
          r.fail(key, f.dump() + " is no fused-MoE family; valid: names such as \"moe_mxfp4_w4a8_trtllm\"");
        out.push_back(f.get<std::string>());
      }
      return out;
    };
    if (k.has("moe_first")) p.kernel_tables.moe_first = families(k, "moe_first", "to try first");
    if (k.has("moe_same_kernel")) {
      const JsonReader s = k.object("moe_same_kernel");
      p.kernel_tables.moe_same_kernel = families(s, "families", "of other engines' tables");
      if (s.has("scale")) {
        const std::string v = s.string("scale");
        if (v != "own table's ratio" && v != "as measured")
          s.fail("scale", "'" + v + "' unknown; valid: \"as measured\" (the default) or \"own table's ratio\" (times the " +
                              "release table's time over the family's at the shapes both timed)");
        p.kernel_tables.moe_same_kernel_scaled = v == "own table's ratio";
      }
    }
  }
  const JsonReader d = j.object("defaults");
  for (const auto& c : d.array("gpu_classes")) {
    GpuClassDefaults g;
    g.label = c.string_or("label", "");
    g.min_memory_gib = c.number("min_memory_gib");
    for (const auto& x : c.json().at("exclude_names")) g.exclude_names.push_back(text::lower(x.get<std::string>()));
    g.max_num_seqs = static_cast<int>(c.integer("max_num_seqs"));
    g.max_num_batched_tokens = c.integer("max_num_batched_tokens");
    if (c.has("cuda_graph_max_bs"))
      for (const auto& [k, v] : c.json().at("cuda_graph_max_bs").items()) g.cuda_graph_max_bs[std::stoi(k)] = v.get<std::int64_t>();
    p.gpu_classes.push_back(std::move(g));
  }
  if (p.gpu_classes.empty()) d.fail("gpu_classes", "needs at least one GPU class");
  p.gpu_memory_utilization = d.number("gpu_memory_utilization");
  if (!(p.gpu_memory_utilization > 0 && p.gpu_memory_utilization <= 1) &&
      !(p.kind == EngineKind::sglang && p.gpu_memory_utilization == 0))
    d.fail("gpu_memory_utilization", "must be in (0, 1] (0 = SGLang's mem_fraction_static heuristic, sglang profiles only)");
  p.block_size = static_cast<int>(d.integer("block_size"));
  if (d.has("block_size_by_compute_capability"))
    for (const auto& [cc, v] : d.json().at("block_size_by_compute_capability").items()) p.block_size_by_cc[cc] = v.get<int>();
  if (d.has("dsa_kv_cache_dtype_by_compute_capability"))
    for (const auto& [cc, v] : d.json().at("dsa_kv_cache_dtype_by_compute_capability").items()) {
      const std::string name = v.is_string() ? text::lower(v.get<std::string>()) : "";
      if (name != "bf16" && name != "fp8")
        d.fail("dsa_kv_cache_dtype_by_compute_capability", "compute capability " + cc + ": " + v.dump() +
                                                               " is no KV cache dtype; valid: \"bf16\", \"fp8\"");
      p.dsa_kv_dtype_by_cc[cc] = name == "fp8" ? hw::Precision::fp8 : hw::Precision::bf16;
    }
  p.enable_chunked_prefill = d.boolean_or("enable_chunked_prefill", true);
  const JsonReader pc = d.object("enable_prefix_caching");
  p.prefix_caching_decoder = pc.boolean_or("decoder", true);
  p.prefix_caching_hybrid = pc.boolean_or("hybrid", false);
  if (d.has("async_scheduling") && d.json().at("async_scheduling").is_object()) {
    const JsonReader as = d.object("async_scheduling");
    p.async_scheduling = as.boolean_or("decoder", false);
    p.async_scheduling_hybrid = as.boolean_or("hybrid", p.async_scheduling);
  } else {
    p.async_scheduling = p.async_scheduling_hybrid = d.boolean_or("async_scheduling", false);
  }
  p.batch_queue_depth = static_cast<int>(j.object("engine_core").integer_or("batch_queue_depth", 2));
  p.launches_on_scheduler_thread = j.object("engine_core").boolean_or("launches_on_scheduler_thread", false);
  if (j.has("closed_loop")) {
    const JsonReader cl = j.object("closed_loop");
    p.closed_loop_osl_spread_tokens = cl.number_or("osl_spread_tokens", 0);
    if (!(p.closed_loop_osl_spread_tokens >= 0 && p.closed_loop_osl_spread_tokens <= 1000))
      cl.fail("osl_spread_tokens", "must be between 0 and 1000 tokens");
    p.closed_loop_osl_spread_load_exponent = cl.number_in("osl_spread_load_exponent", 0, -2, 2);
    p.closed_loop_osl_spread_length_exponent = cl.number_in("osl_spread_length_exponent", 0, 0, 2);
  }
  if (j.has("scheduler")) {
    const JsonReader sc = j.object("scheduler");
    auto& x = p.sglang;
    x.max_prefill_tokens = sc.integer_or("max_prefill_tokens", x.max_prefill_tokens);
    x.init_new_token_ratio = sc.number_in("init_new_token_ratio", x.init_new_token_ratio, 0, 1);
    x.min_new_token_ratio_factor = sc.number_in("min_new_token_ratio_factor", x.min_new_token_ratio_factor, 0, 1);
    x.new_token_ratio_decay_steps = sc.number_in("new_token_ratio_decay_steps", x.new_token_ratio_decay_steps, 1, 1e9);
    x.clip_max_new_tokens = sc.integer_or("clip_max_new_tokens", x.clip_max_new_tokens);
    x.retract_decode_steps = sc.integer_or("retract_decode_steps", x.retract_decode_steps);
    x.num_reserved_decode_tokens = sc.integer_or("num_reserved_decode_tokens", x.num_reserved_decode_tokens);
  }
  const JsonReader g = j.object("cuda_graphs");
  p.graphs.mode = g.string("mode");
  p.graphs.padding = g.boolean_or("padding", true);
  if (p.graphs.mode != "FULL_AND_PIECEWISE" && p.graphs.mode != "PIECEWISE" && p.graphs.mode != "NONE" &&
      p.graphs.mode != "FULL_DECODE_ONLY")
    g.fail("mode", "unknown mode '" + p.graphs.mode + "'; known: FULL_AND_PIECEWISE, PIECEWISE, FULL_DECODE_ONLY, NONE");
  p.graphs.max_capture_tokens_per_seq = static_cast<int>(g.integer("max_capture_tokens_per_seq"));
  p.graphs.max_capture_size = g.integer("max_capture_size");
  p.graphs.small_sizes.clear();
  for (double x : g.numbers("small_sizes")) p.graphs.small_sizes.push_back(static_cast<std::int64_t>(x));
  p.graphs.step = g.integer("step");
  p.graphs.large_from = g.integer("large_from");
  p.graphs.large_step = g.integer("large_step");
  if (p.graphs.step < 0 || p.graphs.large_step < 0) g.fail("step", "capture-size steps must be >= 0 (0: no such range)");
  {
    const JsonReader adp = j.object("attention_dp");
    const std::string v = adp.string_or("prefill_moe_tokens", "padded");
    if (v == "padded") p.dp_prefill_moe = models::DpPrefillMoe::padded;
    else if (v == "gathered") p.dp_prefill_moe = models::DpPrefillMoe::gathered;
    else if (v == "summed") p.dp_prefill_moe = models::DpPrefillMoe::summed;
    else adp.fail("prefill_moe_tokens", "unknown '" + v + "'; known: padded, gathered, summed");
    p.wide_ep_all_to_all = adp.boolean_or("wide_ep_all_to_all", false);
  }
  if (j.has("layouts")) {
    const JsonReader l = j.object("layouts");
    p.moe_tp_x_ep = l.boolean_or("moe_tp_x_ep", false);
    p.attention_dp_with_tp = l.boolean_or("attention_dp_with_tp", true);
  }
  const JsonReader a = j.object("all_reduce");
  p.all_reduce.custom_world_sizes.clear();
  for (double x : a.numbers("custom_world_sizes")) p.all_reduce.custom_world_sizes.push_back(static_cast<int>(x));
  p.all_reduce.custom_max_bytes = a.number("custom_max_bytes");
  for (const auto& o : a.array("custom_one_stage"))
    p.all_reduce.custom_one_stage.push_back({static_cast<int>(o.integer("max_world_size")), o.number("below_bytes")});
  p.all_reduce.symm_mem = a.boolean_or("symm_mem", false);
  for (const auto& [cc, v] : a.json().at("custom_max_bytes_with_symm_mem").items())
    p.all_reduce.custom_max_with_symm[cc] = by_world_size(a.object("custom_max_bytes_with_symm_mem").object(cc));
  for (const auto& [cc, v] : a.json().at("symm_mem_max_bytes").items())
    p.all_reduce.symm_mem_max[cc] = by_world_size(a.object("symm_mem_max_bytes").object(cc));
  for (const auto& [cc, v] : a.json().at("symm_mem_multimem_world_sizes").items())
    for (const auto& x : v) p.all_reduce.multimem_world_sizes[cc].push_back(x.get<int>());
  const JsonReader h = j.object("host");
  p.host.step_cpu_s = h.number("step_cpu_ms") * 1e-3;
  p.host.step_cpu_per_seq_s = h.number("step_cpu_us_per_seq") * 1e-6;
  p.host.launch_per_kernel_s = h.number("launch_us_per_kernel") * 1e-6;
  p.host.launch_per_kernel_eager_s = h.number("launch_us_per_kernel_eager") * 1e-6;
  p.host.eager_kernels_per_attention_layer = static_cast<int>(h.integer("eager_kernels_per_attention_layer"));
  p.host.eager_kernels_per_mamba_layer = static_cast<int>(h.integer("eager_kernels_per_mamba_layer"));
  if (h.has("launch_us_per_fp8_block_linear")) {
    const JsonReader f = h.object("launch_us_per_fp8_block_linear");
    for (const auto& [gpu, v] : f.json().items()) {
      const double us = f.number_in(gpu, 0, 0, 1e4);
      p.host.launch_per_fp8_block_linear_s[text::lower(gpu)] = us * 1e-6;
    }
  }
  p.api_server = p.json.at("api_server");
  for (const auto& s : p.json.value("sources", nlohmann::json::array())) p.sources.push_back(s.get<std::string>());
  for (const auto& s : p.json.value("unverified", nlohmann::json::array())) p.unverified.push_back(s.get<std::string>());
  return p;
}

struct Registry {
  std::vector<EngineProfile> profiles;   // oldest first within an engine
};

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    for (auto path : data::list(kFolder)) {
      if (path.size() < 5 || path.substr(path.size() - 5) != ".json") continue;
      reg.profiles.push_back(parse_profile(data::get(path), std::string(path)));
    }
    std::sort(reg.profiles.begin(), reg.profiles.end(), [](const EngineProfile& a, const EngineProfile& b) {
      return a.engine != b.engine ? a.engine < b.engine : version_key(a.version) < version_key(b.version);
    });
    return reg;
  }();
  return r;
}

}  // namespace

const char* to_string(AllReduceImpl a) {
  switch (a) {
    case AllReduceImpl::custom_one_stage: return "custom all-reduce (one-stage)";
    case AllReduceImpl::custom_two_stage: return "custom all-reduce (two-stage)";
    case AllReduceImpl::symm_mem_multimem: return "torch symmetric memory (multimem)";
    case AllReduceImpl::symm_mem_two_shot: return "torch symmetric memory (two-shot)";
    case AllReduceImpl::nccl: return "NCCL";
  }
  return "?";
}

namespace {
bool refuses_moe_tp_x_ep(const EngineProfile& p, const models::Parallelism& par) { return par.hybrid_ep() && !p.moe_tp_x_ep; }
bool refuses_dp_with_tp(const EngineProfile& p, const models::Parallelism& par) {
  return par.dp > 1 && par.tp > 1 && !p.attention_dp_with_tp;
}
}  // namespace

bool launches_layout(const EngineProfile& p, const models::Parallelism& par) {
  return !refuses_moe_tp_x_ep(p, par) && !refuses_dp_with_tp(p, par);
}

void check_layout(const EngineProfile& p, const models::Parallelism& par, const std::string& where,
                  const std::string& ep_field, const std::string& dp_field) {
  const std::string engine = p.kind == EngineKind::trtllm ? "TensorRT-LLM" : p.kind == EngineKind::sglang ? "SGLang" : "vLLM";
  if (refuses_moe_tp_x_ep(p, par))
    throw Error(where, ep_field,
                std::to_string(par.ep) + " with tp x dp = " + std::to_string(par.moe_group()) + ": " + engine +
                    "'s expert parallelism spans the whole group (1 or " + std::to_string(par.moe_group()) +
                    "); MoE TP x EP (" + std::to_string(par.ep) + " expert groups, each expert sharded " +
                    std::to_string(par.moe_tp()) + " ways) is a TensorRT-LLM / SGLang layout (--engine trtllm, sglang)");
  if (refuses_dp_with_tp(p, par))
    throw Error(where, dp_field,
                std::to_string(par.dp) + " with tensor parallel size " + std::to_string(par.tp) + ": " + engine +
                    "'s attention DP runs each rank's attention on one GPU; give tp 1 and dp " + std::to_string(par.moe_group()));
}

std::vector<std::string> engine_profile_names() {
  std::vector<std::string> out;
  for (const auto& p : registry().profiles) out.push_back(p.name);
  return out;
}

const EngineProfile& engine_profile(const std::string& name, const std::string& where, const std::string& field) {
  const auto& all = registry().profiles;
  const std::string want = text::lower(name);
  for (const auto& p : all)
    if (p.name == want) return p;
  // "vllm" -> newest; "vllm-0.16" -> newest at or below 0.16.
  const auto dash = want.find('-');
  const std::string engine = dash == std::string::npos ? want : want.substr(0, dash);
  const EngineProfile* best = nullptr;
  if (dash == std::string::npos) {
    for (const auto& p : all)
      if (p.engine == engine) best = &p;
  } else {
    const auto key = version_key(want.substr(dash + 1));
    for (const auto& p : all)
      if (p.engine == engine && version_key(p.version) <= key) best = &p;
  }
  if (best) return *best;
  throw Error(where, field, "unknown engine \"" + name + "\" (known: " + text::join(engine_names()) + " (each its newest), " +
                                text::join(engine_profile_names()) + "; a version like vllm-0.16 picks the newest profile at or below it)");
}

std::vector<std::string> engine_names() {
  std::vector<std::string> out;
  for (const char* e : {"vllm", "sglang", "trtllm"})
    for (const auto& p : registry().profiles)
      if (p.engine == e) {
        out.push_back(e);
        break;
      }
  return out;
}

EngineKind engine_kind(const std::string& engine, const std::string& where, const std::string& field) {
  const std::string e = text::lower(engine);
  if (e == "vllm") return EngineKind::vllm;
  if (e == "sglang") return EngineKind::sglang;
  if (e == "trtllm") return EngineKind::trtllm;
  throw Error(where, field, "unknown engine '" + engine + "'; known: vllm, sglang, trtllm");
}

std::string scheduler_summary(EngineKind k) {
  switch (k) {
    case EngineKind::vllm: return "mixed chunked batches, preempt newest";
    case EngineKind::sglang: return "prefill first, no mixing, retract longest";
    case EngineKind::trtllm: return "in-flight, whole prompts, no-evict";
  }
  return "?";
}

std::string_view to_string(EngineKind k) {
  switch (k) {
    case EngineKind::vllm: return "vllm";
    case EngineKind::sglang: return "sglang";
    case EngineKind::trtllm: return "trtllm";
  }
  return "?";
}

std::int64_t GpuClassDefaults::graph_max_bs(int tp) const {
  std::int64_t out = 0;
  for (const auto& [min_tp, bs] : cuda_graph_max_bs)
    if (tp >= min_tp) out = bs;
  return out;
}

int node_gpus(const hw::GpuSpec& gpu) {
  for (const auto& inst : hw::Catalog::global().instances())
    if (text::iequals(inst.gpu, gpu.name)) return inst.gpus;
  // No instance in the catalogue: an NVL72 rack's compute tray holds 4 GPUs (GB300), an HGX board 8.
  return gpu.nvlink_domain > 8 ? 4 : 8;
}

int EngineProfile::block_size_for(const hw::GpuSpec& gpu) const {
  auto it = block_size_by_cc.find(compute_capability(gpu));
  return it == block_size_by_cc.end() ? block_size : it->second;
}

hw::Precision EngineProfile::auto_kv_cache_dtype(const models::ModelSpec& m, const hw::GpuSpec& gpu,
                                                  hw::Precision weights) const {
  if (m.index_topk > 0) {
    auto it = dsa_kv_dtype_by_cc.find(compute_capability(gpu));
    if (it != dsa_kv_dtype_by_cc.end()) return it->second;
  }
  return models::checkpoint_kv_dtype(weights);
}

std::string compute_capability(const hw::GpuSpec& gpu) {
  const std::string a = text::lower(gpu.arch);
  if (a == "hopper") return "9.0";
  if (a == "blackwell-ultra") return "10.3";
  if (a == "blackwell") return "10.0";
  if (a == "ampere") return "8.0";
  return a;
}

const GpuClassDefaults& EngineProfile::gpu_class(const hw::GpuSpec& gpu) const {
  const double gib = gpu.hbm_usable_bytes / double(1ULL << 30);
  const std::string n = text::lower(gpu.name);
  for (const auto& c : gpu_classes) {
    if (gib < c.min_memory_gib) continue;
    bool excluded = false;
    for (const auto& x : c.exclude_names) excluded = excluded || n.find(x) != std::string::npos;
    if (!excluded) return c;
  }
  return gpu_classes.back();
}

std::vector<std::int64_t> capture_size_list(const CudaGraphPolicy& g, std::int64_t mx) {
  std::vector<std::int64_t> out;
  for (auto s : g.small_sizes)
    if (s <= mx) out.push_back(s);
  if (g.step > 0)
    for (std::int64_t s = g.step; s < std::min(mx + 1, g.large_from); s += g.step) out.push_back(s);
  if (g.large_step > 0)
    for (std::int64_t s = g.large_from; s <= mx; s += g.large_step) out.push_back(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {
// SGLang / TRT-LLM: the decode batch sizes up to `max_bs`, the largest always included (both
// engines append it), as tokens (x (1 + K) with speculative decoding).
std::vector<std::int64_t> decode_graph_sizes(const CudaGraphPolicy& g, std::int64_t max_bs, int k) {
  if (max_bs < 1) return {};
  auto sizes = capture_size_list(g, max_bs);
  if (sizes.empty() || sizes.back() != max_bs) sizes.push_back(max_bs);
  for (auto& x : sizes) x *= 1 + k;
  return sizes;
}
}  // namespace

std::vector<std::int64_t> EngineProfile::capture_sizes(const hw::GpuSpec& gpu, int tp, int max_num_seqs, int k) const {
  if (graphs.mode != "FULL_DECODE_ONLY") return capture_sizes(max_num_seqs, k, gpu_class(gpu).max_num_batched_tokens, false);
  const std::int64_t by_class = gpu_class(gpu).graph_max_bs(tp);
  return decode_graph_sizes(graphs, std::min<std::int64_t>(by_class > 0 ? by_class : graphs.max_capture_size, max_num_seqs), k);
}

std::vector<std::int64_t> EngineProfile::capture_sizes(int max_num_seqs, int k, std::int64_t max_num_batched_tokens,
                                                       bool enforce_eager) const {
  if (enforce_eager || graphs.mode == "NONE") return {};
  if (graphs.mode == "FULL_DECODE_ONLY")
    return decode_graph_sizes(graphs, std::min<std::int64_t>(graphs.max_capture_size, max_num_seqs), k);
  std::int64_t mx = std::min<std::int64_t>(std::int64_t(max_num_seqs) * (1 + k) * graphs.max_capture_tokens_per_seq,
                                           graphs.max_capture_size);
  return capture_size_list(graphs, std::min(mx, max_num_batched_tokens));
}

AllReduceImpl EngineProfile::all_reduce_for(const hw::GpuSpec& gpu, int tp, double bytes, bool bf16) const {
  const auto& a = all_reduce;
  const std::string cc = compute_capability(gpu);
  auto lookup = [&](const std::map<std::string, std::map<int, double>>& t) -> double {
    auto it = t.find(cc);
    if (it == t.end()) return 0;
    auto jt = it->second.find(tp);
    return jt == it->second.end() ? 0 : jt->second;
  };
  const bool custom_ok = std::find(a.custom_world_sizes.begin(), a.custom_world_sizes.end(), tp) != a.custom_world_sizes.end() &&
                         tp <= gpu.nvlink_domain;
  double custom_max = a.custom_max_bytes;
  if (a.symm_mem) {
    const double capped = lookup(a.custom_max_with_symm);
    if (capped > 0) custom_max = std::min(custom_max, capped);
  }
  if (custom_ok && bytes < custom_max) {
    for (const auto& o : a.custom_one_stage)
      if (tp <= o.max_world_size) return o.below_bytes <= 0 || bytes < o.below_bytes ? AllReduceImpl::custom_one_stage
                                                                                        : AllReduceImpl::custom_two_stage;
    return AllReduceImpl::custom_two_stage;
  }
  if (a.symm_mem && bf16 && tp <= gpu.nvlink_domain) {
    const double smax = lookup(a.symm_mem_max);
    if (smax > 0 && bytes <= smax) {
      auto it = a.multimem_world_sizes.find(cc);
      const bool mm = it != a.multimem_world_sizes.end() && std::find(it->second.begin(), it->second.end(), tp) != it->second.end();
      return mm ? AllReduceImpl::symm_mem_multimem : AllReduceImpl::symm_mem_two_shot;
    }
  }
  return AllReduceImpl::nccl;
}

std::vector<std::pair<double, AllReduceImpl>> EngineProfile::all_reduce_switch_points(const hw::GpuSpec& gpu, int tp) const {
  // Walk powers of two and the table's own thresholds; report where the choice changes.
  std::vector<double> probes;
  for (double b = 16; b <= double(1ULL << 31); b *= 2) probes.push_back(b);
  std::vector<std::pair<double, AllReduceImpl>> out;
  AllReduceImpl cur = all_reduce_for(gpu, tp, 0);
  double lo = 0;
  for (double b : probes) {
    const AllReduceImpl x = all_reduce_for(gpu, tp, b);
    if (x == cur) continue;
    // Bisect the switch between lo and b to the byte.
    double l = lo, h = b;
    while (h - l > 1) {
      const double m = std::floor((l + h) / 2);
      (all_reduce_for(gpu, tp, m) == cur ? l : h) = m;
    }
    out.push_back({h, cur});
    cur = x;
    lo = b;
  }
  out.push_back({INFINITY, cur});
  return out;
}


nlohmann::json launch_knobs(const EngineConfig& e) {
  return {{"engine", e.engine_profile}, {"engine_kind", std::string(to_string(e.kind))}, {"max_model_len", e.max_model_len},
          {"max_num_seqs", e.max_num_seqs}, {"max_num_batched_tokens", e.max_num_batched_tokens},
          {"gpu_memory_utilization", e.gpu_memory_utilization},
          {"cuda_graph_max_bs", e.cudagraph_capture_sizes.empty() ? 0 : e.max_cudagraph_capture_size / (1 + e.num_speculative_tokens)},
          {"enable_chunked_prefill", e.enable_chunked_prefill}, {"enable_prefix_caching", e.enable_prefix_caching}};
}

void apply_profile(const EngineProfile& p, const models::ModelSpec& m, const hw::GpuSpec& gpu, const nlohmann::json& given,
                   EngineConfig& cfg, int tp) {
  auto unset = [&](const char* key) { return !given.is_object() || !given.contains(key); };
  const GpuClassDefaults& g = p.gpu_class(gpu);
  cfg.kind = p.kind;
  cfg.sglang = p.sglang;
  cfg.cudagraph_padding = p.graphs.padding;
  cfg.dp_prefill_moe = p.dp_prefill_moe;
  // A scenario that names engine.moe_all_to_all (true or false) decides the exchange itself.
  cfg.wide_ep_all_to_all = unset("moe_all_to_all") && p.wide_ep_all_to_all;
  cfg.engine_profile = p.name;
  cfg.kernel_tables = p.kernel_tables;
  if (unset("max_num_batched_tokens")) cfg.max_num_batched_tokens = g.max_num_batched_tokens;
  if (unset("max_num_seqs")) cfg.max_num_seqs = static_cast<int>(std::min<std::int64_t>(g.max_num_seqs, cfg.max_num_batched_tokens));
  if (unset("gpu_memory_utilization")) cfg.gpu_memory_utilization = p.gpu_memory_utilization;
  if (unset("block_size")) cfg.block_size = p.block_size_for(gpu);
  if (unset("enable_chunked_prefill")) cfg.enable_chunked_prefill = p.enable_chunked_prefill;
  // vLLM's hybrid models (is_prefix_caching_supported off by default): Mamba and Gated DeltaNet
  // state. Sliding-window models keep vLLM's decoder default in vLLM, but servesim's block pool
  // models prefix caching for one full-attention group only, so they run without it (no effect on
  // prompts without shared prefixes; asking for it explicitly is an error naming why).
  const bool hybrid = m.count(models::LayerKind::mamba) > 0 || m.count(models::LayerKind::linear_attention) > 0;
  const bool windows = m.count(models::LayerKind::sliding_attention) > 0;
  if (unset("enable_prefix_caching"))
    cfg.enable_prefix_caching = hybrid ? p.prefix_caching_hybrid : windows ? false : p.prefix_caching_decoder;
  if (unset("async_scheduling")) cfg.async_scheduling = hybrid ? p.async_scheduling_hybrid : p.async_scheduling;
  cfg.batch_queue_depth = p.batch_queue_depth;
  cfg.launches_on_scheduler_thread = p.launches_on_scheduler_thread;
  if (unset("closed_loop_osl_spread_tokens")) cfg.closed_loop_osl_spread_tokens = p.closed_loop_osl_spread_tokens;
  if (unset("closed_loop_osl_spread_load_exponent"))
    cfg.closed_loop_osl_spread_load_exponent = p.closed_loop_osl_spread_load_exponent;
  if (unset("closed_loop_osl_spread_length_exponent"))
    cfg.closed_loop_osl_spread_length_exponent = p.closed_loop_osl_spread_length_exponent;
  cfg.response_preamble_tokens = m.response.preamble_tokens;   // the model's, whatever the profile
  if (unset("step_overhead_ms")) cfg.step_overhead_s = p.host.step_cpu_s;
  if (unset("step_overhead_us_per_seq")) cfg.step_overhead_per_seq_s = p.host.step_cpu_per_seq_s;
  cfg.launch_per_kernel_s = p.host.launch_per_kernel_s;
  cfg.launch_per_kernel_eager_s = p.host.launch_per_kernel_eager_s;
  {
    const auto it = p.host.launch_per_fp8_block_linear_s.find(text::lower(gpu.name));
    cfg.launch_per_fp8_block_linear_s = it == p.host.launch_per_fp8_block_linear_s.end() ? 0.0 : it->second;
  }
  cfg.eager_kernels_per_attention_layer = p.host.eager_kernels_per_attention_layer;
  cfg.eager_kernels_per_mamba_layer = p.host.eager_kernels_per_mamba_layer;
  if (unset("cudagraph_mode")) cfg.cudagraph_mode = p.graphs.mode;
  if (!unset("cudagraph_capture_sizes")) {
    // An explicit list (parsed into cfg): exactly those sizes, none above the token budget
    // (a step never holds more tokens); decode-only graph engines take them as batch sizes.
    auto& sizes = cfg.cudagraph_capture_sizes;
    if (p.graphs.mode == "FULL_DECODE_ONLY")
      for (auto& x : sizes) x *= 1 + cfg.num_speculative_tokens;
    sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::int64_t x) { return x > cfg.max_num_batched_tokens; }),
                sizes.end());
    cfg.max_cudagraph_capture_size = sizes.empty() ? 0 : sizes.back();
    if (cfg.enforce_eager || cfg.cudagraph_mode == "NONE") sizes.clear();
    return;
  }
  if (p.graphs.mode == "FULL_DECODE_ONLY") {
    // Decode batch sizes: SGLang's cuda_graph_max_bs by GPU memory and TP, TRT-LLM's
    // cuda_graph_config.max_batch_size; never more than the running requests allowed.
    const int k = cfg.num_speculative_tokens;
    if (unset("max_cudagraph_capture_size")) {
      const std::int64_t by_class = g.graph_max_bs(tp);
      const std::int64_t bs = std::min<std::int64_t>(by_class > 0 ? by_class : p.graphs.max_capture_size, cfg.max_num_seqs);
      cfg.max_cudagraph_capture_size = bs * (1 + k);
    }
    if (cfg.enforce_eager || cfg.cudagraph_mode == "NONE") cfg.cudagraph_capture_sizes.clear();
    else cfg.cudagraph_capture_sizes = decode_graph_sizes(p.graphs, cfg.max_cudagraph_capture_size / (1 + k), k);
    return;
  }
  if (unset("max_cudagraph_capture_size")) {
    const auto sizes = p.capture_sizes(cfg.max_num_seqs, cfg.num_speculative_tokens, cfg.max_num_batched_tokens, false);
    cfg.max_cudagraph_capture_size = sizes.empty() ? 0 : sizes.back();
  }
  // The list itself: the profile's steps up to the (possibly user-set) largest size, which then
  // is the list's last (a user's 12 gives [1, 2, 4, 8]: the largest graph holds 8).
  if (cfg.enforce_eager || cfg.cudagraph_mode == "NONE") {
    cfg.cudagraph_capture_sizes.clear();
  } else {
    cfg.cudagraph_capture_sizes = capture_size_list(p.graphs, std::min(cfg.max_cudagraph_capture_size, cfg.max_num_batched_tokens));
    if (!cfg.cudagraph_capture_sizes.empty()) cfg.max_cudagraph_capture_size = cfg.cudagraph_capture_sizes.back();
  }
}

workloads::FrontendConfig profile_frontend(const EngineProfile& p) {
  workloads::FrontendConfig f;
  f.api = workloads::parse_api_server(JsonReader(p.api_server, p.name, "api_server"), f.api);
  if (p.json.contains("disaggregation"))
    f.disagg = workloads::parse_disagg_path(JsonReader(p.json.at("disaggregation"), p.name, "disaggregation"), f.disagg);
  return f;
}

double closed_loop_osl_sd(const EngineConfig& e, double concurrency, double osl) {
  if (!(e.closed_loop_osl_spread_tokens > 0) || !(concurrency > 0) || !(osl > 0)) return 0;
  return e.closed_loop_osl_spread_tokens * std::pow(concurrency / kSpreadReferenceConcurrency, e.closed_loop_osl_spread_load_exponent) *
         std::pow(osl / kSpreadReferenceOsl, e.closed_loop_osl_spread_length_exponent);
}

std::string closed_loop_osl_sd_formula(double tokens, double load_exponent, double length_exponent,
                                       const std::string& clients, const std::string& osl) {
  std::string s = compact(tokens);
  if (load_exponent != 0) s += " x (" + clients + "/" + compact(kSpreadReferenceConcurrency) + ")^" + compact(load_exponent);
  if (length_exponent > 0) s += " x (" + osl + "/" + compact(kSpreadReferenceOsl) + ")^" + compact(length_exponent);
  return s;
}

bool spreads_closed_loop(const workloads::WorkloadConfig& w, const EngineConfig& e) {
  if (w.arrival != workloads::Arrival::concurrency || w.concurrency < 2 || w.trace ||
      w.osl.kind != workloads::LengthDist::Kind::fixed || !(e.closed_loop_osl_spread_tokens > 0))
    return false;
  // A max_model_len that the fixed prompt + answer fill leaves the spread no room (6 sd).
  const bool room = e.max_model_len <= 0 || w.isl.kind != workloads::LengthDist::Kind::fixed ||
                    w.isl.mean + w.osl.mean + 6 * closed_loop_osl_sd(e, w.concurrency, w.osl.mean) <= double(e.max_model_len);
  return room;
}

workloads::WorkloadConfig closed_loop_lengths(const workloads::WorkloadConfig& w, const EngineConfig& e) {
  if (!spreads_closed_loop(w, e)) return w;
  workloads::WorkloadConfig x = w;
  x.osl = workloads::LengthDist::normal_of(w.osl.mean, closed_loop_osl_sd(e, w.concurrency, w.osl.mean));
  return x;
}

}  // namespace servesim::sim
