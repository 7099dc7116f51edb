#include "sim/scenario.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "sim/calibration.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "sim/engine/engine_profile.hpp"
#include "workloads/frontend.hpp"
#include "workloads/paths.hpp"

namespace servesim::sim {
namespace {

void check_keys(const JsonReader& j, const std::vector<std::string>& known) {
  for (auto it = j.json().begin(); it != j.json().end(); ++it)
    if (std::find(known.begin(), known.end(), it.key()) == known.end())
      j.fail(it.key(), "unknown field; known: " + text::join(known));
}

std::int64_t int_in(const JsonReader& j, std::string_view key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = j.integer_or(key, fallback);
  if (v < lo || v > hi)
    j.fail(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

// A field under its vLLM name or its short alias; both at once is ambiguous.
std::int64_t int_alias(const JsonReader& j, std::string_view name, std::string_view alias, std::int64_t fallback,
                       std::int64_t lo, std::int64_t hi) {
  if (j.has(name) && j.has(alias)) j.fail(alias, "given twice (also as " + std::string(name) + ")");
  return j.has(alias) ? int_in(j, alias, fallback, lo, hi) : int_in(j, name, fallback, lo, hi);
}

EngineConfig parse_engine(const JsonReader& e) {
  check_keys(e, engine_keys());
  EngineConfig c;
  c.max_num_seqs = static_cast<int>(int_in(e, "max_num_seqs", c.max_num_seqs, 1, 1 << 20));
  c.max_num_batched_tokens = int_in(e, "max_num_batched_tokens", c.max_num_batched_tokens, 1, 1LL << 30);
  c.gpu_memory_utilization = e.number_or("gpu_memory_utilization", c.gpu_memory_utilization);
  if (!(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1))
    e.fail("gpu_memory_utilization", "must be in (0, 1]");
  c.block_size = static_cast<int>(int_in(e, "block_size", c.block_size, 1, 4096));
  c.enable_prefix_caching = e.boolean_or("enable_prefix_caching", c.enable_prefix_caching);
  c.enable_chunked_prefill = e.boolean_or("enable_chunked_prefill", c.enable_chunked_prefill);
  c.long_prefill_token_threshold = int_in(e, "long_prefill_token_threshold", 0, 0, 1LL << 30);
  c.max_model_len = int_in(e, "max_model_len", 0, 0, 1LL << 31);
  c.enforce_eager = e.boolean_or("enforce_eager", c.enforce_eager);
  c.moe_all_to_all = e.boolean_or("moe_all_to_all", c.moe_all_to_all);
  c.max_cudagraph_capture_size = int_in(e, "max_cudagraph_capture_size", c.max_cudagraph_capture_size, 0, 1LL << 30);
  if (e.has("cudagraph_capture_sizes")) {
    // An explicit capture list (vLLM cudagraph_capture_sizes / --cuda-graph-sizes with several
    // values; SGLang --cuda-graph-bs; TRT-LLM cuda_graph_config.batch_sizes): exactly these sizes.
    const char* k = "cudagraph_capture_sizes";
    for (double x : e.numbers(k)) {
      if (!(x >= 1 && x <= double(1LL << 30) && x == std::floor(x))) e.fail(k, "each size must be a whole number >= 1");
      c.cudagraph_capture_sizes.push_back(static_cast<std::int64_t>(x));
    }
    if (c.cudagraph_capture_sizes.empty()) e.fail(k, "needs at least one size (graphs off: enforce_eager or cudagraph_mode NONE)");
    std::sort(c.cudagraph_capture_sizes.begin(), c.cudagraph_capture_sizes.end());
    c.cudagraph_capture_sizes.erase(std::unique(c.cudagraph_capture_sizes.begin(), c.cudagraph_capture_sizes.end()),
                                    c.cudagraph_capture_sizes.end());
    if (e.has("max_cudagraph_capture_size") && c.max_cudagraph_capture_size != c.cudagraph_capture_sizes.back())
      e.fail("max_cudagraph_capture_size", "is " + std::to_string(c.max_cudagraph_capture_size) +
                                               " but the largest of cudagraph_capture_sizes is " +
                                               std::to_string(c.cudagraph_capture_sizes.back()) + "; give one, or make them agree");
  }
  c.step_overhead_s = e.number_or("step_overhead_ms", c.step_overhead_s * 1e3) / 1e3;
  c.step_overhead_per_seq_s = e.number_or("step_overhead_us_per_seq", 0) * 1e-6;
  if (!(c.step_overhead_per_seq_s >= 0 && c.step_overhead_per_seq_s < 1e-2))
    e.fail("step_overhead_us_per_seq", "must be between 0 and 10000 us");
  c.async_scheduling = e.boolean_or("async_scheduling", c.async_scheduling);
  c.cudagraph_mode = e.string_or("cudagraph_mode", c.cudagraph_mode);
  for (char& ch : c.cudagraph_mode) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (c.cudagraph_mode != "FULL_AND_PIECEWISE" && c.cudagraph_mode != "PIECEWISE" && c.cudagraph_mode != "NONE")
    e.fail("cudagraph_mode", "unknown mode '" + c.cudagraph_mode + "'; known: FULL_AND_PIECEWISE, PIECEWISE, NONE");
  c.eager_overhead_s = e.number_or("eager_overhead_ms", c.eager_overhead_s * 1e3) / 1e3;
  if (!(c.step_overhead_s >= 0 && c.step_overhead_s < 10)) e.fail("step_overhead_ms", "must be between 0 and 10000 ms");
  if (!(c.eager_overhead_s >= 0 && c.eager_overhead_s < 10)) e.fail("eager_overhead_ms", "must be between 0 and 10000 ms");
  c.num_speculative_tokens = static_cast<int>(int_in(e, "num_speculative_tokens", 0, 0, 16));
  c.closed_loop_osl_spread_tokens = e.number_or("closed_loop_osl_spread_tokens", 0);
  if (!(c.closed_loop_osl_spread_tokens >= 0 && c.closed_loop_osl_spread_tokens <= 1000))
    e.fail("closed_loop_osl_spread_tokens", "must be between 0 and 1000 tokens");
  c.closed_loop_osl_spread_load_exponent = e.number_in("closed_loop_osl_spread_load_exponent", 0, -2, 2);
  c.closed_loop_osl_spread_length_exponent = e.number_in("closed_loop_osl_spread_length_exponent", 0, 0, 2);
  if (e.has("acceptance_rate")) {
    std::vector<double> a = e.numbers("acceptance_rate");
    for (double p : a)
      if (!(p >= 0 && p <= 1)) e.fail("acceptance_rate", "each acceptance probability must be in [0, 1]");
    if (static_cast<int>(a.size()) > c.num_speculative_tokens)
      e.fail("acceptance_rate", "more positions than num_speculative_tokens");
    c.acceptance_per_position = std::move(a);
  }
  if (c.max_num_batched_tokens < c.max_num_seqs)
    e.fail("max_num_batched_tokens", "must be >= max_num_seqs (" + std::to_string(c.max_num_seqs) + "), as vLLM requires");
  return c;
}

TopologySpec parse_topology(const JsonReader& t) {
  check_keys(t, topology_keys());
  TopologySpec x;
  x.present = true;
  const std::string kind = text::lower(t.string_or("kind", "agg"));
  if (kind == "disagg" || kind == "disaggregated") x.disaggregated = true;
  else if (kind != "agg" && kind != "aggregated") t.fail("kind", "unknown topology '" + kind + "'; known: agg, disagg");
  x.instance = t.string_or("instance", "");
  x.nodes = static_cast<int>(int_in(t, "nodes", 0, 0, 4096));
  x.replicas = static_cast<int>(int_in(t, "replicas", 0, 0, 1 << 16));
  x.prefill_workers = static_cast<int>(int_in(t, "prefill_workers", 1, 1, 4096));
  x.decode_workers = static_cast<int>(int_in(t, "decode_workers", 1, 1, 4096));
  x.encode_workers = static_cast<int>(int_in(t, "encode_workers", 0, 0, 4096));
  x.prefill_tp = static_cast<int>(int_in(t, "prefill_tp", 0, 0, 1024));
  x.decode_tp = static_cast<int>(int_in(t, "decode_tp", 0, 0, 1024));
  x.encode_tp = static_cast<int>(int_in(t, "encode_tp", 0, 0, 1024));
  x.prefill_dp = static_cast<int>(int_in(t, "prefill_dp", 0, 0, 1024));
  x.decode_dp = static_cast<int>(int_in(t, "decode_dp", 0, 0, 1024));
  x.prefill_ep = static_cast<int>(int_in(t, "prefill_ep", 0, 0, 1 << 16));
  x.decode_ep = static_cast<int>(int_in(t, "decode_ep", 0, 0, 1 << 16));
  x.prefill_instance = t.string_or("prefill_instance", "");
  x.decode_instance = t.string_or("decode_instance", "");
  x.prefill_gpu = t.string_or("prefill_gpu", "");
  x.decode_gpu = t.string_or("decode_gpu", "");
  x.prefill_nodes = static_cast<int>(int_in(t, "prefill_nodes", 0, 0, 4096));
  x.decode_nodes = static_cast<int>(int_in(t, "decode_nodes", 0, 0, 4096));
  if (!x.prefill_instance.empty() && !x.prefill_gpu.empty()) t.fail("prefill_gpu", "give prefill_instance or prefill_gpu, not both");
  if (!x.decode_instance.empty() && !x.decode_gpu.empty()) t.fail("decode_gpu", "give decode_instance or decode_gpu, not both");
  if (!x.disaggregated)
    for (const char* k : {"prefill_workers", "decode_workers", "encode_workers", "prefill_tp", "decode_tp", "encode_tp",
                          "prefill_dp", "decode_dp", "prefill_ep", "decode_ep", "prefill_instance", "decode_instance",
                          "prefill_gpu", "decode_gpu", "prefill_nodes", "decode_nodes"})
      if (t.has(k)) t.fail(k, "applies to \"kind\": \"disagg\" only");
  return x;
}

}  // namespace

void check_engine_knobs(const nlohmann::json& engine, const std::string& file) {
  parse_engine(JsonReader(nlohmann::json{{"engine", engine}}, file).object("engine"));
}

const std::vector<std::string>& topology_keys() {
  static const std::vector<std::string> k{"kind", "instance", "nodes", "replicas", "prefill_workers", "decode_workers",
                                          "encode_workers", "prefill_tp", "decode_tp", "encode_tp", "prefill_dp", "decode_dp",
                                          "prefill_ep", "decode_ep", "prefill_instance", "decode_instance", "prefill_gpu",
                                          "decode_gpu", "prefill_nodes", "decode_nodes"};
  return k;
}

const std::vector<std::string>& scenario_keys() {
  static const std::vector<std::string> k{"description", "model", "model_file", "gpu", "gpus", "tensor_parallel_size", "tp",
                                          "pipeline_parallel_size", "pp", "expert_parallel_size", "ep", "data_parallel_size", "dp", "precision",
                                          "kv_cache_dtype", "engine", "engine_profile", "frontend", "router", "seed",
                                          "workload", "topology", "calibration", "kv_offload"};
  return k;
}

const std::vector<std::string>& engine_keys() {
  static const std::vector<std::string> k{"max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                                          "block_size", "enable_prefix_caching", "enable_chunked_prefill",
                                          "long_prefill_token_threshold", "max_model_len", "enforce_eager", "moe_all_to_all", "max_cudagraph_capture_size",
                                          "cudagraph_capture_sizes", "step_overhead_ms", "step_overhead_us_per_seq", "eager_overhead_ms",
                                          "num_speculative_tokens", "acceptance_rate", "async_scheduling", "cudagraph_mode",
                                          "closed_loop_osl_spread_tokens", "closed_loop_osl_spread_load_exponent",
                                          "closed_loop_osl_spread_length_exponent"};
  return k;
}

const models::ModelSpec& scenario_model(const Scenario& s) {
  return s.model_file.empty() ? models::model(s.model) : models::load_model_file(s.model_file);
}

Scenario parse_scenario(std::string_view json_text, const std::string& file) {
  Scenario s;
  s.source = file;
  try {
    s.json = parse_json(json_text, file);
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw Error(file, "", std::string("invalid JSON: ") + e.what());
  }
  const JsonReader j(s.json, file);
  check_keys(j, scenario_keys());
  if (j.has("model") && j.has("model_file")) j.fail("model_file", "give model or model_file, not both");
  s.model = j.string_or("model", s.model);
  // A Hugging Face id names its catalogue entry (models::find_model), and a quantised repository's
  // id its checkpoint where "precision" is left to the checkpoint: Qwen/Qwen3-235B-A22B-FP8 runs
  // qwen3-235b-a22b in fp8_block.
  std::string id_precision;
  if (!j.has("model_file"))
    if (const models::ModelSpec* m = models::find_model(s.model)) {
      id_precision = models::id_checkpoint_precision(s.model, *m);
      s.model = m->name;
    }
  if (j.has("model_file")) {
    s.model_file = workloads::resolve_path(workloads::folder_of(file), j.string("model_file"));
    s.model = models::load_model_file(s.model_file).name;
  }
  s.gpu = j.string_or("gpu", s.gpu);
  s.gpus = static_cast<int>(int_in(j, "gpus", s.gpus, 1, 1 << 16));
  s.par.tp = static_cast<int>(int_alias(j, "tensor_parallel_size", "tp", 1, 1, 1024));
  s.par.pp = static_cast<int>(int_alias(j, "pipeline_parallel_size", "pp", 1, 1, 1024));
  s.par.ep = static_cast<int>(int_alias(j, "expert_parallel_size", "ep", 1, 1, 1 << 16));
  s.par.dp = static_cast<int>(int_alias(j, "data_parallel_size", "dp", 1, 1, 1024));
  // No precision (or "auto"): the checkpoint's, as every other subcommand. "fp8" on a 128x128
  // block-FP8 checkpoint is that checkpoint (models::checkpoint_format); an unknown model is
  // reported where it is resolved.
  std::string precision = j.string_or("precision", "auto");
  if (text::iequals(precision, "auto") && !id_precision.empty()) precision = id_precision;
  s.precision = text::iequals(precision, "auto") ? hw::Precision::bf16 : hw::parse_precision(precision, file + ": precision");
  try {
    const auto& spec = scenario_model(s);
    s.precision = models::resolve_weight_precision(spec, precision, file + ": precision");
  } catch (const Error&) {
  }
  const std::string kv = text::lower(j.string_or("kv_cache_dtype", "auto"));
  // One rule everywhere (models::resolve_kv_cache_dtype): "auto" is the checkpoint's KV dtype.
  try {
    s.kv_cache_dtype = models::resolve_kv_cache_dtype(kv, s.precision, "kv_cache_dtype");
    s.kv_cache_dtype_auto = kv == "auto";
  } catch (const Error& e) {
    j.fail("kv_cache_dtype", e.reason());
  }
  if (j.has("engine")) s.engine = parse_engine(j.object("engine"));
  if (j.has("engine_profile")) {
    s.engine_profile = j.string("engine_profile");
    engine_profile(s.engine_profile, file, "engine_profile");   // unknown names fail here
  }
  if (j.has("frontend")) {
    s.frontend_json = s.json.at("frontend");
    workloads::parse_frontend(j.object("frontend"), workloads::FrontendConfig{});   // validate the fields now
  }
  if (j.has("kv_offload")) s.kv_offload_json = s.json.at("kv_offload");
  if (j.has("router")) s.router = parse_router_json(j, s.kv_router);
  if (j.has("calibration")) {
    // A profile file (resolved against the scenario's folder) or the profile itself, inline.
    const auto& c = s.json.at("calibration");
    if (c.is_string() && c.get<std::string>().empty())
      j.fail("calibration", "empty file name; give a profile file (servesim calibrate e2e --output), relative to the scenario's folder");
    if (c.is_string()) {
      // A file it cannot read is this field's fault; what the file holds is the file's.
      const std::string path = workloads::resolve_path(workloads::folder_of(file), c.get<std::string>());
      std::string text;
      try {
        text = read_input_file(path, kMaxJsonFileBytes);
      } catch (const Error& e) {
        j.fail("calibration", "cannot read '" + path + "': " + e.reason() +
                                  "; give a profile file (servesim calibrate e2e --output), relative to the scenario's folder");
      }
      s.calibration = std::make_shared<const CalibrationProfile>(parse_calibration(parse_json(text, path), path));
    }
    else if (c.is_object())
      s.calibration = std::make_shared<const CalibrationProfile>(parse_calibration(c, file + ": calibration"));
    else
      j.fail("calibration", "expected a profile file (servesim calibrate e2e --output) or a profile object");
    // Without an engine profile of its own the run takes the calibration's engine build.
    if (!j.has("engine_profile") && !s.calibration->engine_profile.empty()) {
      try {
        s.engine_profile = engine_profile(s.calibration->engine_profile).name;
      } catch (const Error&) {   // a build this binary has no profile of: the default, and the calibration says it left out
      }
    }
  }
  if (j.has("seed")) {
    const std::int64_t seed = j.integer("seed");
    if (seed < 0) j.fail("seed", "must be >= 0");
    s.seed = static_cast<std::uint64_t>(seed);
  }
  if (!j.has("workload")) j.fail("workload", "missing required field");
  s.workload = workloads::parse_workload(j.object("workload"));
  if (j.has("seed")) s.workload.seed = s.seed;
  else s.seed = s.workload.seed;
  workloads::validate(s.workload, file + ": workload");
  if (s.workload.warmup_until_steady) {
    const nlohmann::json* f = s.frontend_json.is_object() ? &s.frontend_json : nullptr;
    const bool barrier = !(f && f->contains("client") && (*f)["client"].is_object() &&
                           (*f)["client"].value("warmup_barrier", true) == false);
    if (barrier)
      j.fail("workload", "warmup_until_steady needs frontend.client.warmup_barrier false (a steady warm-up has no phase barrier)");
  }

  if (j.has("topology")) s.topology = parse_topology(j.object("topology"));
  const int per_replica = s.gpus_per_replica();
  if (!s.topology.present && (s.gpus % per_replica != 0 || s.gpus < per_replica))
    j.fail("gpus", std::to_string(s.gpus) + " GPUs do not split into replicas of tensor_parallel_size x pipeline_parallel_size" +
                       (s.par.dp > 1 ? " x data_parallel_size" : "") + " = " + std::to_string(per_replica));
  if (s.par.ep != 1 && s.par.moe_group() % s.par.ep != 0)
    j.fail("expert_parallel_size", "must be 1 (experts sharded by TP), tensor_parallel_size" +
                                       std::string(s.par.dp > 1 ? " x data_parallel_size (" : " (") +
                                       std::to_string(s.par.moe_group()) + ") or, on TensorRT-LLM and SGLang, a divisor of it");
  check_layout(engine_profile(s.engine_profile, file, "engine_profile"), s.par, file);
  if (s.par.dp > 1 && s.par.pp > 1) j.fail("data_parallel_size", "attention data parallelism with pipeline stages is not modelled; use pipeline_parallel_size 1");
  if (s.topology.disaggregated) {
    const JsonReader t = j.object("topology");
    struct Role {
      const char* name;
      int tp, dp, ep;
    };
    for (const Role& r : {Role{"prefill", s.topology.prefill_tp, s.topology.prefill_dp, s.topology.prefill_ep},
                          Role{"decode", s.topology.decode_tp, s.topology.decode_dp, s.topology.decode_ep}}) {
      const models::Parallelism p = role_parallelism(s, r.tp, r.dp, r.ep);
      if (p.ep != 1 && p.moe_group() % p.ep != 0)
        t.fail(std::string(r.name) + "_ep", std::string("must be 1 (experts sharded by TP), the ") + r.name + " worker's TP x DP (" +
                                                std::to_string(p.tp) + " x " + std::to_string(p.dp) + " = " +
                                                std::to_string(p.moe_group()) + ") or, on TensorRT-LLM and SGLang, a divisor of it");
      check_layout(engine_profile(s.engine_profile, file, "engine_profile"), p, file, std::string("topology.") + r.name + "_ep",
                   std::string("topology.") + r.name + "_dp");
      if (p.dp > 1 && p.pp > 1)
        t.fail(std::string(r.name) + "_dp", "attention data parallelism with pipeline stages is not modelled; use pipeline_parallel_size 1");
    }
  }
  return s;
}

models::Parallelism role_parallelism(const Scenario& s, int tp, int dp, int ep) {
  models::Parallelism p = s.par;
  if (tp > 0) p.tp = tp;
  if (dp > 0) p.dp = dp;
  p.ep = ep > 0 ? ep : (s.par.ep > 1 ? p.moe_group() : 1);
  return p;
}

nlohmann::json read_scenario_file(const std::string& path) {
  try {
    return read_json_file(path);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, "", std::string("invalid JSON: ") + e.what());
  }
}

Scenario load_scenario(const std::string& path) { return parse_scenario(read_scenario_file(path).dump(), path); }

nlohmann::json default_scenario_json() {
  return parse_json(data::get("sim/data/default_scenario.json"), "sim/data/default_scenario.json");
}

}  // namespace servesim::sim
