#include <cstdlib>
#include "sim/validate/validate.hpp"
#include "sim/parallel.hpp"

#include "sim/engine/engine_profile.hpp"

#include <algorithm>
#include <new>
#include <numeric>
#include <filesystem>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/calibration.hpp"
#include "sim/metrics.hpp"
#include "sim/scenario.hpp"
#include "sim/simulate.hpp"

namespace servesim::sim::validate {
namespace {

[[noreturn]] void cannot(const std::string& reason) { throw Error("", "", reason); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A model for a Hugging Face id: a --model-file listing the id, else the catalogue's
// (models::find_model: a catalogue name, the ids the entries list, the id's name without its
// organisation, "Meta-" and checkpoint or release suffixes); a --model-file named so comes first.
const models::ModelSpec* resolve_model(const std::string& path, const std::vector<std::string>& model_files,
                                       std::string* model_file) {
  std::vector<const models::ModelSpec*> own;
  for (const auto& f : model_files) own.push_back(&models::load_model_file(f));
  auto own_by = [&](auto&& match) -> const models::ModelSpec* {
    for (std::size_t i = 0; i < own.size(); ++i)
      if (match(*own[i])) {
        if (model_file) *model_file = model_files[i];
        return own[i];
      }
    return nullptr;
  };
  const std::string id = text::lower(path);
  if (const auto* m = own_by([&](const models::ModelSpec& x) {
        return std::any_of(x.hf_ids.begin(), x.hf_ids.end(), [&](const std::string& h) { return text::lower(h) == id; });
      }))
    return m;
  if (!own.empty())
    for (const auto& n : models::model_name_candidates(path))
      if (const auto* m = own_by([&](const models::ModelSpec& x) { return text::iequals(x.name, n); })) return m;
  return models::find_model(path);
}

// The catalogue GPU of an AIC system name (h200_sxm -> H200, gb200 -> GB200).
std::string gpu_of(const std::string& system) {
  std::string g = text::lower(system);
  for (const char* suffix : {"_sxm", "-sxm", "_pcie", "-pcie", "_nvl", "-nvl"})
    if (ends_with(g, suffix)) g.resize(g.size() - std::string(suffix).size());
  return g;
}

// servesim's weight precision for a row's precision label and quantisation modes.
std::string precision_of(const MeasuredPoint& p) {
  auto map = [](const std::string& label) -> std::string {
    const std::string q = text::lower(label);
    if (q.empty()) return "";
    if (q == "fp8" || q == "w8a8_fp8") return "fp8";
    if (q == "fp8_block" || q == "fp8_blockwise") return "fp8_block";
    if (q == "fp4" || q == "nvfp4" || q == "w4a4_nvfp4") return "nvfp4";
    if (q == "mxfp4" || q == "w4a16_mxfp4") return "mxfp4";
    if (q == "bf16" || q == "fp16" || q == "float16" || q == "bfloat16") return "bf16";
    if (q == "int4" || q == "int4_wo" || q == "w4a16" || q == "awq" || q == "gptq") return "int4";
    cannot("precision '" + label + "' unknown (modelled: bf16, fp8, fp8_block, fp4/nvfp4, mxfp4, int4/int4_wo)");
  };
  // One element type on both sides (fp8 and fp8_block, nvfp4 and mxfp4 name the same storage).
  auto family = [](const std::string& q) { return q.empty() ? q : std::string(hw::to_string(hw::storage_family(hw::parse_precision(q)))); };
  const std::string gemm = map(p.gemm_quant), moe = map(p.moe_quant);
  std::string label = map(p.precision);
  if (!gemm.empty() && !moe.empty() && family(gemm) != family(moe))
    cannot("mixed quantization (GEMMs " + p.gemm_quant + ", MoE " + p.moe_quant + ") not modelled");
  if (label.empty()) label = !moe.empty() ? moe : gemm;
  // The quantisation modes refine an FP8 label's scaling: AIC's fp8_block is the 128x128 block format.
  if (label == "fp8" && (gemm == "fp8_block" || moe == "fp8_block")) label = "fp8_block";
  if (label.empty()) {   // nothing recorded: the checkpoint model_path names, else the model's own ("")
    const std::string m = text::lower(p.model_path);
    label = ends_with(m, "-fp8") ? "fp8" : (ends_with(m, "-nvfp4") || ends_with(m, "-fp4")) ? "nvfp4" : "";
  }
  return label;
}

// A row's label names the element type ("fp8", "fp4"); the checkpoint decides its scaling: an
// FP8 label on a 128x128 block checkpoint (MiniMax-M2.5) runs fp8_block, an FP4 label on an MXFP4
// checkpoint (gpt-oss) runs mxfp4. A label of another type (Kimi-K2.5's NVFP4 rows: NVIDIA's
// NVFP4 checkpoint of the INT4 model) runs as labelled.
// A model_path naming a published "-FP8" checkpoint (Qwen/Qwen3-235B-A22B-FP8) runs that checkpoint's
// format when the catalogue publishes only one FP8 format for the model (Qwen3's: 128x128 blocks).
std::string checkpoint_format(const std::string& label, const models::ModelSpec& m, const std::string& model_path) {
  const hw::Precision want = hw::parse_precision(label), ckpt = hw::parse_precision(m.checkpoint_precision);
  if (hw::storage_family(want) == hw::storage_family(ckpt)) return m.checkpoint_precision;
  if (label == "fp8" && models::id_checkpoint_precision(model_path, m) == "fp8_block") return "fp8_block";
  return label;
}

// Expert parallelism of a worker: 1 (experts sharded by TP x DP), TP x DP (whole experts per GPU)
// or a divisor of it (MoE TP x EP, which the scenario refuses on an engine that does not run it).
int ep_of(int moe_ep, int tp, const std::string& role, int dp = 1) {
  if (moe_ep <= 1) return 1;
  if ((tp * dp) % moe_ep == 0) return moe_ep;
  cannot(role + "MoE expert parallel size " + std::to_string(moe_ep) + " with TP " + std::to_string(tp) +
         (dp > 1 ? " x DP " + std::to_string(dp) : std::string()) +
         " not modelled (it does not divide the worker's TP x DP GPUs)");
}

double pick(const Stats& s, const std::string& stat) { return stat == "p50" ? s.p50 : s.avg; }

bool matches(const std::vector<std::string>& filter, std::initializer_list<std::string> values, bool substring) {
  if (filter.empty()) return true;
  for (const auto& f : filter)
    for (const auto& v : values)
      if (substring ? text::lower(v).find(text::lower(f)) != std::string::npos : text::iequals(f, v)) return true;
  return false;
}

}  // namespace

std::string load_regime(double clients_per_replica, int max_num_seqs) {
  if (max_num_seqs > 0 && clients_per_replica > max_num_seqs) return "saturated";
  if (clients_per_replica <= 16) return "light";
  if (clients_per_replica <= 128) return "medium";
  return "heavy";
}

double signed_error(double predicted, double measured) {
  if (!std::isfinite(predicted) || !std::isfinite(measured) || !(measured > 0)) return NAN;
  return (predicted - measured) / measured;
}

ErrorStats error_stats(std::vector<double> errors) {
  errors.erase(std::remove_if(errors.begin(), errors.end(), [](double e) { return !std::isfinite(e); }), errors.end());
  ErrorStats s;
  s.n = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::vector<double> abs;
  for (double e : errors) abs.push_back(std::fabs(e));
  std::sort(errors.begin(), errors.end());
  std::sort(abs.begin(), abs.end());
  s.median_signed = percentile_sorted(errors, 50);
  s.median_abs = percentile_sorted(abs, 50);
  s.p90_abs = percentile_sorted(abs, 90);
  return s;
}

std::string point_engine_profile(const MeasuredPoint& p, bool engine_any) {
  const std::string backend = text::lower(p.backend);
  const bool own = backend == "vllm" || (!engine_any && (backend == "sglang" || backend == "trtllm"));
  if (!own) return "";   // the newest vLLM profile
  // The measured release's profile (vllm-0.16 -> the newest at or below it); versions that are no
  // engine release (blank, nightlies, Dynamo image tags) or older than every profile of the engine
  // run its newest (vLLM) or its only profile.
  if (!p.backend_version.empty()) {
    try {
      const auto& prof = engine_profile(backend + "-" + p.backend_version);
      if (prof.engine == backend) return prof.name;
    } catch (const Error&) {
    }
  }
  return backend == "vllm" ? "" : engine_profile(backend).name;
}

void check_base_scenario(const Options& o, const std::string& file) {
  if (o.base.is_null()) return;
  if (!o.base.is_object()) throw Error(file, "", "expected a JSON object (a scenario file)");
  // The base over the embedded default scenario, parsed once: a bad knob, an unknown key or a bad
  // seed is one error before the run, not the same reason repeated for every point.
  nlohmann::json j = default_scenario_json();
  for (const auto& [k, v] : o.base.items()) {
    if (k == "workload" && v.is_object() && j[k].is_object())
      for (const auto& [wk, wv] : v.items()) j[k][wk] = wv;
    else
      j[k] = v;
  }
  j["seed"] = o.base.contains("seed") ? o.base["seed"] : nlohmann::json(o.seed);
  parse_scenario(j.dump(), file);
}

nlohmann::json point_scenario(const MeasuredPoint& p, const Options& o, std::string* resolved_model) {
  if (!p.unreadable.empty()) cannot(p.unreadable);
  if (!p.scenario.is_null()) return p.scenario;   // aiperf folder: the run's own setup
  if (p.concurrency < 1 && !(p.request_rate > 0))
    cannot("no concurrency recorded (neither silicon_concurrency= nor _c<N>_ in the id)");
  const std::string backend = text::lower(p.backend);
  if (backend != "vllm" && backend != "sglang" && backend != "trtllm" && !o.engine_any)
    cannot("engine " + (p.backend.empty() ? std::string("(blank)") : p.backend) +
           " not modelled (servesim models vllm, sglang, trtllm; --engine-any runs it with the vLLM engine)");
  std::string precision = precision_of(p);

  // The layout first (it needs no catalogue), then the model and the GPU.
  nlohmann::json s = nlohmann::json::object();
  for (const char* k : {"engine", "router", "kv_cache_dtype", "frontend", "seed", "calibration"})
    if (o.base.is_object() && o.base.contains(k)) s[k] = o.base[k];
  if (!s.contains("seed")) s["seed"] = o.seed;
  if (p.engine_knobs.is_object())   // the run's own recorded knobs over the options' base
    for (const auto& [k, v] : p.engine_knobs.items()) s["engine"][k] = v;
  if (!p.kv_cache_dtype.empty()) s["kv_cache_dtype"] = p.kv_cache_dtype;
  const std::string mode = text::lower(p.mode);
  int ep = 1;
  if (mode == "disagg") {
    if (p.prefill_workers < 1 || p.decode_workers < 1)
      cannot("disaggregated point without prefill/decode worker counts (prefill_num_workers, decode_num_workers blank)");
    // Each role: TP x attention-DP GPUs a worker, its MoE layers sharded over them by TP (EP 1) or
    // by expert (EP = TP x DP), as an aggregated replica's (ep_of).
    const int ptp = std::max(1, p.prefill_tp), dtp = std::max(1, p.decode_tp);
    const int pdp = std::max(1, p.prefill_dp), ddp = std::max(1, p.decode_dp);
    const int ppp = std::max(1, p.prefill_pp), dpp = std::max(1, p.decode_pp);
    if (ppp != dpp)
      cannot("prefill PP " + std::to_string(ppp) + " and decode PP " + std::to_string(dpp) + " differ (servesim: one PP for both roles)");
    if ((pdp > 1 || ddp > 1) && dpp > 1) cannot("attention data parallelism with PP " + std::to_string(dpp) + " not modelled");
    const int pep = ep_of(p.prefill_moe_ep, ptp, "prefill ", pdp), dep = ep_of(p.decode_moe_ep, dtp, "decode ", ddp);
    ep = 1;   // each role's own (topology prefill_ep / decode_ep)
    s["tensor_parallel_size"] = dtp;
    s["pipeline_parallel_size"] = dpp;
    s["topology"] = {{"kind", "disagg"}, {"prefill_workers", p.prefill_workers}, {"decode_workers", p.decode_workers},
                     {"prefill_tp", ptp}, {"decode_tp", dtp}, {"prefill_dp", pdp}, {"decode_dp", ddp},
                     {"prefill_ep", pep}, {"decode_ep", dep}};
  } else if (mode == "agg" || mode.empty()) {
    const int tp = std::max(1, p.tp), pp = std::max(1, p.pp), dp = std::max(1, p.attention_dp);
    // The harness's batch is its clients (batch_size = C) or their share of an attention-DP rank
    // (batch_size x DP = C): 2,936 of the calibration CSV's 2,965 aggregated rows with both. A batch
    // that is neither splits the clients a way the layout columns do not give (MeasuredPoint::batch_size).
    if (p.batch_size > 0 && p.concurrency > 0 && p.batch_size != p.concurrency &&
        std::int64_t(p.batch_size) * std::max(1, p.columns_dp) != p.concurrency)
      cannot("batch_size " + std::to_string(p.batch_size) + " for " + std::to_string(p.concurrency) + " clients on TP " +
             std::to_string(std::max(1, p.tp)) + (p.columns_dp > 1 ? " x DP " + std::to_string(p.columns_dp) : std::string()) +
             ": neither the clients nor their share of an attention-DP rank, so how the run split its clients over "
             "the GPUs is not recorded");
    if (dp > 1 && pp > 1) cannot("attention data parallelism with PP " + std::to_string(pp) + " not modelled");
    ep = ep_of(p.moe_ep, tp, "", dp);
    s["tensor_parallel_size"] = tp;
    s["pipeline_parallel_size"] = pp;
    if (dp > 1) s["data_parallel_size"] = dp;
    s["gpus"] = tp * pp * dp;
  } else {
    cannot("mode '" + p.mode + "' unknown (agg or disagg)");
  }
  std::string model_file;
  const models::ModelSpec* m = resolve_model(p.model_path, o.model_files, &model_file);
  if (!m)
    cannot("model " + p.model_path + " not in the catalogue (servesim list models): give its Hugging Face config.json with --model-file");
  if (resolved_model) *resolved_model = m->name;
  precision = precision.empty() ? m->checkpoint_precision : checkpoint_format(precision, *m, p.model_path);
  const std::string gpu = gpu_of(p.system);
  try {
    hw::Catalog::global().gpu(gpu);
  } catch (const Error&) {
    cannot("GPU '" + p.system + "' not in the catalogue (servesim list gpus)");
  }
  if (model_file.empty()) s["model"] = m->name;
  else s["model_file"] = std::filesystem::absolute(model_file).string();   // this run's file, never the catalogue
  const std::string profile = point_engine_profile(p, o.engine_any);
  if (!profile.empty()) s["engine_profile"] = profile;
  s["gpu"] = gpu;
  s["precision"] = precision;
  s["expert_parallel_size"] = m->experts > 0 ? ep : 1;
  // Data parallelism without MoE layers is vLLM's DP of independent engines behind one API
  // server: that many replicas (gpus already counts them).
  if (s.contains("data_parallel_size") && m->count(models::LayerKind::moe) == 0) s.erase("data_parallel_size");
  const std::int64_t c = p.concurrency;
  if (o.harness == "aic" && mode != "disagg" && !p.bench_result) {
    // The engine flags AIConfigurator's benchmark harness gives an aggregated vLLM worker
    // (its vllm.rule / benchmark rule): --max-num-batched-tokens = max_batch_size + ISL + 1500,
    // --max-model-len = ISL + OSL + 1500, CUDA graphs captured at every size 1...max_batch_size
    // (an explicit list, so 9 or 12 clients decode in a graph of their own size, where vLLM's
    // default list capped at 12 would be [1, 2, 4, 8]); max_batch_size is the per-attention-rank
    // share of the concurrency. The generator also switches prefix caching off, but the measured
    // vLLM runs that preempt recompute as vLLM's default cache does (a preempted request's blocks
    // stay hashed and come back as hits): MiniMax-M2.5 TP4 EP4 H100, 64 clients of 1,024 + 8,192
    // tokens, measures TTFT 20.0 s / TPOT 31.9 ms, predicted 20.5 s / 34.7 ms with the cache and
    // 28.8 s / 43.1 ms without (17,753 recomputes from scratch); vLLM points keep the profile's
    // cache (on for decoders; distinct prompts share nothing). Knobs the --scenario gives win (a scenario
    // naming either graph knob keeps its own). SGLang and TRT-LLM points get the token budget,
    // length and prefix-cache flags by those engines' names (--chunked-prefill-size /
    // max_num_tokens) and graphs up to max_batch_size by their own size rules (--cuda-graph-max-bs /
    // cuda_graph_config max_batch_size): the harness's rules for those engines are not in the
    // reference (docs/engines.md, "Validation"), and every size 1...batch moves their SGLang H200
    // TTFT median from 17.7 to 20.2 %.
    auto& e = s["engine"];
    if (!e.is_object()) e = nlohmann::json::object();
    const std::int64_t per = std::max<std::int64_t>(1, c / std::max(1, p.attention_dp));
    auto set = [&](const char* k, nlohmann::json v) {
      if (!e.contains(k)) e[k] = std::move(v);
    };
    set("max_num_batched_tokens", per + p.isl + 1500);
    set("max_model_len", p.isl + p.osl + 1500);
    const bool vllm = engine_profile(profile.empty() ? std::string(kNewestEngine) : profile).kind == EngineKind::vllm;
    if (!e.contains("max_cudagraph_capture_size") && !e.contains("cudagraph_capture_sizes")) {
      if (vllm) {
        std::vector<std::int64_t> every(static_cast<std::size_t>(per));
        std::iota(every.begin(), every.end(), std::int64_t{1});
        e["cudagraph_capture_sizes"] = every;
      } else {
        e["max_cudagraph_capture_size"] = per;
      }
    }
    if (!vllm) set("enable_prefix_caching", false);
  }
  // A disaggregated run whose prompts are longer than its engine's default token budget, on an engine
  // that runs a prompt whole (TensorRT-LLM: chunked prefill off, max_num_tokens 8,192): it served them,
  // so its workers ran with a budget that holds one (the Dynamo recipe's flags are not recorded).
  // The budget is raised to the prompt, no further.
  if (o.harness == "aic" && mode == "disagg" && !p.bench_result && p.isl > 0) {
    const EngineProfile& prof = engine_profile(profile.empty() ? std::string(kNewestEngine) : profile);
    const nlohmann::json e = s.contains("engine") && s["engine"].is_object() ? s["engine"] : nlohmann::json::object();
    const bool chunked = e.value("enable_chunked_prefill", prof.enable_chunked_prefill);
    const std::int64_t budget = e.value("max_num_batched_tokens", prof.gpu_class(hw::Catalog::global().gpu(gpu)).max_num_batched_tokens);
    if (!chunked && p.isl > budget) s["engine"]["max_num_batched_tokens"] = p.isl;
  }
  // The KV cache of an FP8 deployment on Blackwell under the measured harness: FP8. vLLM's "auto"
  // keeps BF16 for a block-FP8 checkpoint (MiniMax-M2.5's), which cannot hold what the measured
  // Blackwell FP8 runs served without queueing: on one B300 it holds 106k tokens, 16 clients of
  // 8192 + 1024 need 147k, and the run measured 524 ms (412 ms at 8 clients) where BF16 predicts
  // 8.8 s and FP8 0.76 s; 12 of the 14 Blackwell points whose prediction depends on it fit FP8.
  // The H100 runs queue as a BF16 cache does (TP4 EP4, 64 clients of 8192 + 1024: 30.6 s measured,
  // 34.0 s with BF16, 3.5 s with FP8; 6 of its 8 such points fit BF16), so Hopper keeps "auto".
  // FP8 and NVFP4 ModelOpt checkpoints have an FP8 cache either way.
  if (o.harness == "aic" && !p.bench_result && !s.contains("kv_cache_dtype") && (precision == "fp8" || precision == "fp8_block") &&
      hw::Catalog::global().gpu(gpu).arch.starts_with("blackwell"))
    s["kv_cache_dtype"] = "fp8";
  for (const auto& [knob, factor] : o.engine_scale) {
    auto& e = s["engine"];
    if (!e.is_object()) e = nlohmann::json::object();
    const EngineProfile& prof = engine_profile(s.value("engine_profile", std::string(kNewestEngine)));
    double v = 0;
    if (knob == "step_overhead_us_per_seq") v = e.value(knob, prof.host.step_cpu_per_seq_s * 1e6);
    else if (knob == "closed_loop_osl_spread_tokens") v = e.value(knob, prof.closed_loop_osl_spread_tokens);
    else throw Error("engine_scale", knob, "unknown knob; known: step_overhead_us_per_seq, closed_loop_osl_spread_tokens");
    e[knob] = v * factor;
  }
  if (c > 0) {
    std::int64_t requests = c * std::max(1, o.requests_per_client);
    if (o.max_requests > 0 && requests > o.max_requests) requests = std::max<std::int64_t>(2 * c, o.max_requests);
    s["workload"] = {{"concurrency", c}, {"isl", p.isl}, {"osl", p.osl},
                     {"requests", requests}, {"warmup_requests", c * std::max(0, o.warmup_per_client)}};
  }
  else   // an open-loop run: Poisson arrivals at its rate, a minute of them (at least 100 requests)
    s["workload"] = {{"request_rate", p.request_rate}, {"arrival", "poisson"}, {"isl", p.isl}, {"osl", p.osl},
                     {"requests", std::max<std::int64_t>(100, std::llround(p.request_rate * 60))},
                     {"warmup_requests", std::max<std::int64_t>(10, std::llround(p.request_rate * 6))}};
  // The client's dataset (aiperf --num-dataset-entries) is the harness's, as its engine flags are.
  if (o.base.is_object() && o.base.contains("workload") && o.base["workload"].is_object() && o.base["workload"].contains("dataset"))
    s["workload"]["dataset"] = o.base["workload"]["dataset"];
  // A run whose requests had lengths of their own (a bench result's per-request lengths or its dataset's
  // draw) runs them; --osl-spread-pct spreads only fixed answers.
  if (!p.isl_lengths.is_null()) s["workload"]["isl"] = p.isl_lengths;
  if (!p.osl_lengths.is_null()) s["workload"]["osl"] = p.osl_lengths;
  else if (o.osl_spread_pct > 0)
    s["workload"]["osl"] = {{"kind", "normal"}, {"mean", p.osl}, {"stddev", o.osl_spread_pct / 100 * double(p.osl)}};
  return s;
}

namespace {
// servesim's cheapest prefill cost per token on one aggregated replica: 64 prompts of 256 tokens
// in one step (16,384 tokens: GEMMs at their most efficient, attention negligible); pipeline
// stages overlap across batches, so a replica's throughput is one stage's. NaN for topologies.
double prefill_floor_per_token_s(const Prepared& p, const Scenario& s) {
  if (p.deployment || !p.cost) return NAN;
  models::StepBatch b;
  b.prefill_seqs = 64;
  b.prefill_tokens = 64 * 256;
  b.prefill_attention_pairs = 64 * (256.0 * 257.0 / 2);
  return p.cost->seconds(b) / double(b.prefill_tokens) / double(std::max(1, s.par.pp));
}

// The HBM time of one decode step of `seqs` sequences at `context` tokens on one aggregated
// replica (its rows' bytes at the datasheet bandwidth: no step moves them faster). NaN for
// topologies, pipeline stages and speculative decoding (several tokens a step).
double decode_floor_s(const Prepared& p, const Scenario& s, int seqs, std::int64_t context) {
  if (p.deployment || !p.cost || !p.gpu || s.par.pp > 1 || p.engine.num_speculative_tokens > 0 || seqs < 1) return NAN;
  models::StepBatch b;
  b.decode_seqs = seqs;
  b.decode_context_tokens = std::int64_t(seqs) * context;
  double bytes = 0;
  for (const auto& part : p.cost->breakdown(b).parts) bytes += part.hbm_bytes;
  return bytes / p.gpu->hbm_bw_bytes_per_s;
}

// The measurement's physical floors (PointResult::prefill_floor_s, decode_floor_s): they need the
// point's prepared deployment and its measured figures only, not its simulation.
void set_floors(PointResult& r, const Prepared& prep, double floor_per_token, const Scenario& s) {
  if (!std::isfinite(floor_per_token) || r.replica_concurrency <= 0 || r.measured.osl <= 0) return;
  r.prefill_floor_s = double(r.replica_concurrency) * double(r.measured.isl) * floor_per_token;
  r.measured_cycle_s = (r.measured.ttft_ms + double(r.measured.osl - 1) * r.measured.tpot_ms) / 1e3;
  const double decode_s = double(r.measured.osl - 1) * r.measured.tpot_ms / 1e3;
  if (r.measured.osl > 1 && r.measured_cycle_s > 0 && decode_s > 0) {
    const double in_decode = double(r.replica_concurrency) * decode_s / r.measured_cycle_s;
    r.in_flight = in_decode;
    if (!prep.deployment) r.runs_at_once = std::min(r.replica_concurrency, prep.plan.max_concurrent_seqs(r.measured.isl + r.measured.osl));
    r.decoding = std::min(std::max(1, int(std::floor(in_decode))), std::max(1, prep.engine.max_num_seqs));
    r.decode_floor_s = decode_floor_s(prep, s, r.decoding, std::max<std::int64_t>(1, r.measured.isl));
  }
}
}  // namespace

std::string run_set_of(const MeasuredPoint& p) {
  return p.source_file + " | " + text::lower(p.backend) + " " + p.backend_version + " | " + p.model_path + " | " + p.system;
}

bool resends_prompts(const PointResult& r) {
  return r.below_floor() && !r.below_decode_floor();
}

Report run(std::vector<MeasuredPoint> points, const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.statistic != "avg" && o.statistic != "p50")
    throw Error("--statistic", "", "unknown statistic '" + o.statistic + "'; known: avg, p50");
  Report rep;
  struct Job {
    Scenario scenario;
    std::string shape;     // scenario without workload/seed: points of one shape share prepare()
  };
  std::vector<std::optional<Job>> jobs;
  // A point's job under the options `opt` (its harness), or why it cannot be modelled.
  auto make_job = [](PointResult& r, const Options& opt) -> std::optional<Job> {
    try {
      std::string resolved;
      r.scenario = point_scenario(r.measured, opt, &resolved);
      if (!resolved.empty()) r.model = resolved;
      Job j{parse_scenario(r.scenario.dump(), r.measured.source), ""};
      if (resolved.empty()) r.model = j.scenario.model;   // a run's own scenario: the model its name resolves to
      nlohmann::json shape = r.scenario;
      shape.erase("workload");
      shape.erase("seed");
      j.shape = shape.dump();
      r.max_num_seqs = j.scenario.engine.max_num_seqs;
      r.engine_profile = j.scenario.engine_profile;
      try {   // the build a name like "vllm" runs (its newest), as the run resolves it
        r.engine_profile = engine_profile(j.scenario.engine_profile.empty() ? std::string(kNewestEngine) : j.scenario.engine_profile).name;
      } catch (const Error&) {   // a name without a profile: kept as named
      }
      r.precision = std::string(hw::to_string(j.scenario.precision));
      const int replicas = j.scenario.topology.present ? std::max(1, j.scenario.topology.decode_workers)
                                                       : std::max(1, j.scenario.replicas());
      r.replica_concurrency = j.scenario.workload.concurrency / replicas;
      r.regime = load_regime(double(j.scenario.workload.concurrency) / replicas, r.max_num_seqs);
      return j;
    } catch (const Error& e) {
      r.unmodellable = e.where().empty() && e.field().empty() ? e.reason() : e.what();
      r.scenario = nullptr;
      return std::nullopt;
    }
  };
  for (auto& mp : points) {
    PointResult r;
    r.measured = std::move(mp);
    const MeasuredPoint& p = r.measured;
    r.engine = text::lower(p.backend);
    r.mode = p.mode.empty() ? "agg" : text::lower(p.mode);
    r.gpu = p.scenario.is_null() ? gpu_of(p.system) : text::lower(p.system);
    r.model = p.model_path;
    if (!matches(o.backends, {p.backend}, false) || !matches(o.modes, {r.mode}, false) ||
        !matches(o.gpus, {r.gpu, p.system}, false) || !matches(o.models, {p.model_path}, true)) {
      ++rep.filtered_out;
      continue;
    }
    std::optional<Job> job = make_job(r, o);
    if (r.model.empty()) r.model = "(blank)";
    rep.points.push_back(std::move(r));
    jobs.push_back(std::move(job));
  }

  // A tp_size column that is not a TP. In a run set (one dump's rows of one engine release, model and
  // GPU) at least half of whose rows give a tp_size that cannot split the model's heads (DeepSeek-R1's 128 by 12,
  // 20, 24, 28, 36, ...), the column records something else (a deployment's GPU count), so the rows
  // whose figure happens to divide the heads (32, 64) are no more one replica's TP than the others:
  // they are not modelled either. A set with one stray figure among layouts that split keeps them.
  {
    struct SetTp {
      std::vector<std::size_t> takeable;
      std::map<int, std::string> untakeable;   // tp_size -> why it cannot split the model
      int n_untakeable = 0;
    };
    std::map<std::string, SetTp> sets;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const PointResult& r = rep.points[i];
      if (!jobs[i] || !r.measured.scenario.is_null() || r.measured.bench_result || r.mode != "agg") continue;
      const Scenario& s = jobs[i]->scenario;
      std::string why;
      try {
        why = tp_split_error(scenario_model(s), s.par.tp);
      } catch (const Error&) {   // prepare() names a model it cannot load
        continue;
      }
      SetTp& set = sets[run_set_of(r.measured)];
      if (why.empty()) {
        set.takeable.push_back(i);
      } else {
        set.untakeable.emplace(s.par.tp, why), ++set.n_untakeable;
      }
    }
    for (const auto& [name, set] : sets) {
      if (set.n_untakeable == 0 || set.n_untakeable < int(set.takeable.size())) continue;
      std::string figures;
      for (const auto& [t, why] : set.untakeable) figures += (figures.empty() ? "" : ", ") + std::to_string(t);
      for (const std::size_t i : set.takeable) {
        PointResult& r = rep.points[i];
        r.unmodellable = "tp_size " + std::to_string(r.measured.tp) + " is not this run's TP: " + std::to_string(set.n_untakeable) +
                         " of its run set's " + std::to_string(set.n_untakeable + int(set.takeable.size())) +
                         " points give a tp_size no layout of the model takes (" + figures + "; " + set.untakeable.begin()->second +
                         "), so the column records something else there (a deployment's GPU count)";
        r.scenario = nullptr;
        jobs[i].reset();
      }
    }
  }

  // Shapes: prepare each once (in parallel), then run every point (in parallel).
  std::map<std::string, std::size_t> shape_index;
  std::vector<std::size_t> first_of_shape;
  std::vector<std::size_t> shape_of(jobs.size(), 0);
  auto add_shape = [&](std::size_t i) {
    auto [it, fresh] = shape_index.emplace(jobs[i]->shape, first_of_shape.size());
    if (fresh) first_of_shape.push_back(i);
    shape_of[i] = it->second;
  };
  for (std::size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i]) add_shape(i);
  int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  rep.threads = threads;
  auto parallel = [threads](std::size_t n, const std::function<void(std::size_t)>& f) {
    // Boost.Asio workers (sim/parallel.hpp): a thread that cannot start is one error line.
    parallel_for(static_cast<int>(n), threads, [&](int i) { f(static_cast<std::size_t>(i)); }, "--threads");
  };
  std::vector<std::shared_ptr<const Prepared>> prepared;
  std::vector<std::string> prepare_error;
  std::vector<double> floor_per_token;
  auto prepare_new_shapes = [&] {
    const std::size_t from = prepared.size(), n = first_of_shape.size();
    prepared.resize(n);
    prepare_error.resize(n);
    floor_per_token.resize(n, NAN);
    parallel(n - from, [&](std::size_t q) {
      const std::size_t k = from + q;
      try {
        prepared[k] = std::make_shared<const Prepared>(prepare(jobs[first_of_shape[k]]->scenario));
        floor_per_token[k] = prefill_floor_per_token_s(*prepared[k], jobs[first_of_shape[k]]->scenario);
      } catch (const Error& e) {
        prepare_error[k] = e.reason();
      } catch (const std::exception& e) {
        prepare_error[k] = e.what();
      }
    });
  };
  prepare_new_shapes();
  auto floors_of = [&](std::size_t i) {
    const std::size_t k = shape_of[i];
    PointResult& r = rep.points[i];
    r.prefill_floor_s = r.measured_cycle_s = r.decode_floor_s = r.in_flight = NAN;
    r.decoding = r.runs_at_once = 0;
    if (jobs[i] && prepared[k]) set_floors(r, *prepared[k], floor_per_token[k], jobs[i]->scenario);
  };
  for (std::size_t i = 0; i < jobs.size(); ++i) floors_of(i);

  // Re-sent prompts. AIConfigurator's generated flags switch vLLM's prefix cache off; a run set
  // (one dump's rows of one engine release, model and GPU) with a point whose measured cycle is
  // shorter than prefilling its prompts can take, and whose TPOT is above its decode floor (so
  // its requests were not cut short), served prompts from a prefix cache, so it did not run those
  // flags. Its points run with `vllm serve`'s defaults (prefix caching on) and aiperf's default
  // dataset of 100 prompts, which a run of more requests re-sends. A --scenario that sets prefix
  // caching or a dataset keeps its own for every point.
  const bool base_sets_reuse =
      o.base.is_object() &&
      ((o.base.contains("engine") && o.base["engine"].is_object() && o.base["engine"].contains("enable_prefix_caching")) ||
       (o.base.contains("workload") && o.base["workload"].is_object() && o.base["workload"].contains("dataset")));
  if (o.harness == "aic" && o.infer_resent_prompts && !base_sets_reuse) {
    auto eligible = [&](std::size_t i) {
      const PointResult& r = rep.points[i];
      return jobs[i] && r.engine == "vllm" && r.mode == "agg" && r.measured.scenario.is_null() && !r.measured.bench_result &&
             r.measured.concurrency > 0;
    };
    std::map<std::string, int> evidence;   // run set -> points that prove re-sent prompts
    for (std::size_t i = 0; i < jobs.size(); ++i)
      if (eligible(i) && resends_prompts(rep.points[i])) ++evidence[run_set_of(rep.points[i].measured)];
    if (!evidence.empty()) {
      Options ro = o;
      ro.harness = "serve";
      if (!ro.base.is_object()) ro.base = nlohmann::json::object();
      ro.base["workload"]["dataset"] = {{"entries", kAiperfDatasetEntries}};
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (!eligible(i)) continue;
        const auto it = evidence.find(run_set_of(rep.points[i].measured));
        if (it == evidence.end()) continue;
        PointResult& r = rep.points[i];
        jobs[i] = make_job(r, ro);
        if (!jobs[i]) continue;
        r.harness_note = "prompts re-sent: " + std::to_string(it->second) +
                         " point(s) of its run set measured a cycle shorter than prefilling its prompts; run with vllm "
                         "serve's defaults (prefix caching on) and aiperf's " + std::to_string(kAiperfDatasetEntries) +
                         " dataset entries";
        add_shape(i);
      }
      prepare_new_shapes();
      for (std::size_t i = 0; i < jobs.size(); ++i)
        if (!rep.points[i].harness_note.empty()) floors_of(i);
    }
  }

  parallel(jobs.size(), [&](std::size_t i) {
    if (!jobs[i]) return;
    PointResult& r = rep.points[i];
    const std::size_t k = shape_of[i];
    if (!prepared[k]) {
      r.unmodellable = "cannot be set up: " + prepare_error[k];
      return;
    }
    const Scenario& s = jobs[i]->scenario;
    try {
      const SimResult res = simulate(*prepared[k], s, s.workload);
      r.wall_s = res.wall_s;
      r.behind_prefill = res.prompts > 0 ? res.behind_prefill_fraction() : NAN;
      const Summary& m = res.summary;
      r.ttft_ms = pick(m.ttft_ms, o.statistic);
      r.itl_ms = pick(m.itl_ms, o.statistic);
      if (r.measured.output_tps_derived) {   // like for like: Little's law on the predicted latencies
        const double osl = double(r.measured.osl);
        r.output_tps = double(s.workload.concurrency) * osl / ((r.ttft_ms + (osl - 1) * r.itl_ms) / 1e3);
      } else {
        r.output_tps = m.output_token_throughput_per_s;
      }
      r.ttft_err = signed_error(r.ttft_ms, r.measured.ttft_ms);
      r.itl_err = signed_error(r.itl_ms, r.measured.tpot_ms);
      r.tps_err = signed_error(r.output_tps, r.measured.output_tps);
      const bool closed_loop = !prepared[k]->deployment && s.workload.arrival == workloads::Arrival::concurrency &&
                               s.workload.concurrency > 1 && !s.workload.trace &&
                               s.workload.osl.kind == workloads::LengthDist::Kind::fixed;
      // The same point in both orbits: fixed answer lengths (the train) and a wide spread.
      auto orbit_ttft = [&](double sd) {
        Prepared q = *prepared[k];
        q.engine.closed_loop_osl_spread_tokens = sd;
        q.engine.closed_loop_osl_spread_load_exponent = q.engine.closed_loop_osl_spread_length_exponent = 0;
        return pick(simulate(q, s, s.workload).summary.ttft_ms, o.statistic);
      };
      if (closed_loop && prepared[k]->engine.kind == EngineKind::sglang &&
          r.measured.ttft_ms > kTtftCeilingFactor * r.ttft_ms) {
        // Above the closed loop's ceiling (PointResult::above_ttft_ceiling): only then is the train run.
        r.ttft_train_ms = orbit_ttft(0);
        const std::int64_t whole = r.measured.isl + r.measured.osl;
        r.pool_holds_clients = double(prepared[k]->plan.max_concurrent_seqs(whole)) / double(std::max(1, r.replica_concurrency));
        if (r.above_ttft_ceiling()) r.unmodellable = kAboveCeilingReason;
      }
      if (o.lock_fraction && closed_loop) {
        if (!std::isfinite(r.ttft_train_ms)) r.ttft_train_ms = orbit_ttft(0);
        r.ttft_spread_out_ms = orbit_ttft(kLockSpreadTokens);
        const double gap = r.ttft_train_ms - r.ttft_spread_out_ms;
        if (std::isfinite(gap) && gap > kLockMinGap * r.ttft_spread_out_ms) {
          r.lock_measured = (r.measured.ttft_ms - r.ttft_spread_out_ms) / gap;
          r.lock_predicted = (r.ttft_ms - r.ttft_spread_out_ms) / gap;
        }
      }
    } catch (const Error& e) {
      r.unmodellable = "simulation failed: " + e.reason();
    } catch (const std::bad_alloc&) {   // a layout of many workers (64P + 64D TP8): name what takes the memory
      const int workers = r.measured.prefill_workers + r.measured.decode_workers;
      r.unmodellable = "simulation failed: out of memory: each replica or worker keeps a KV block table of its GPUs' cache "
                       "(about 40 bytes a block, whatever the load), and this point's " +
                       (workers > 1 ? std::to_string(workers) + " workers need" : std::string("layout needs")) +
                       " more than this process may use";
    } catch (const std::exception& e) {
      r.unmodellable = std::string("simulation failed: ") + e.what();
    }
  });
  for (auto& r : rep.points)
    if (!r.unmodellable.empty()) {
      r.scenario = nullptr;
      r.prefill_floor_s = r.measured_cycle_s = r.decode_floor_s = r.in_flight = NAN;
      r.decoding = r.runs_at_once = 0;
    }
  rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

namespace {

nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }
nlohmann::json pct(double x) { return std::isfinite(x) ? nlohmann::json(100 * x) : nlohmann::json(nullptr); }

// Points of the run measured in 2+ runs with different figures: the spread between runs (the
// measurement's own repeatability) and servesim's error on the same points.
struct Reruns {
  int points = 0;
  ErrorStats ttft_spread, tpot_spread, ttft_err, tpot_err;
};
Reruns reruns_of(const Report& r) {
  Reruns x;
  std::vector<double> ts, ps, te, pe;
  for (const auto& p : r.points)
    if (p.unmodellable.empty() && p.measured.runs > 1) {
      ts.push_back(p.measured.ttft_rerun_spread);
      ps.push_back(p.measured.tpot_rerun_spread);
      te.push_back(p.ttft_err);
      pe.push_back(p.itl_err);
    }
  x.points = static_cast<int>(ts.size());
  x.ttft_spread = error_stats(ts);
  x.tpot_spread = error_stats(ps);
  x.ttft_err = error_stats(te);
  x.tpot_err = error_stats(pe);
  return x;
}

nlohmann::json stats_json(const ErrorStats& s) {
  return {{"n", s.n}, {"median_signed_pct", pct(s.median_signed)}, {"median_abs_pct", pct(s.median_abs)},
          {"p90_abs_pct", pct(s.p90_abs)}};
}

struct Group {
  std::vector<std::string> key;
  std::vector<const PointResult*> points;
};

// Ran points grouped by `key_of`, sorted by key.
std::vector<Group> groups_of(const Report& r, const std::function<std::vector<std::string>(const PointResult&)>& key_of) {
  std::map<std::vector<std::string>, Group> g;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty()) continue;
    auto k = key_of(p);
    auto& grp = g[k];
    grp.key = k;
    grp.points.push_back(&p);
  }
  std::vector<Group> out;
  for (auto& [k, v] : g) out.push_back(std::move(v));
  return out;
}

struct Triple { ErrorStats ttft, itl, tps; };
Triple triple(const Group& g) {
  std::vector<double> a, b, c;
  for (const auto* p : g.points) {
    a.push_back(p->ttft_err);
    b.push_back(p->itl_err);
    c.push_back(p->tps_err);
  }
  return {error_stats(a), error_stats(b), error_stats(c)};
}

std::vector<std::string> group_key(const PointResult& p) { return {p.engine, p.model, p.gpu, p.mode}; }
std::vector<std::string> gpu_key(const PointResult& p) { return {p.engine, p.gpu, p.mode}; }
// The engine release a row was measured on ("unlabelled" where the row names none).
std::string release_of(const PointResult& p) {
  return p.measured.backend_version.empty() ? "unlabelled" : p.measured.backend_version;
}
std::vector<std::string> release_key(const PointResult& p) { return {p.engine, release_of(p), p.model, p.gpu, p.mode}; }

std::string pct_text(double x, bool sign) {
  if (!std::isfinite(x)) return "-";
  std::string s = fixed(100 * x, 1) + "%";
  return sign && x > 0 ? "+" + s : s;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_num(double x) {
  if (!std::isfinite(x)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

nlohmann::json to_json(const Report& r, const Options& o) {
  nlohmann::json j;
  int ran = 0, unmod = 0;
  for (const auto& p : r.points) (p.unmodellable.empty() ? ran : unmod) += 1;
  j["statistic"] = o.statistic;
  j["requests_per_client"] = o.requests_per_client;
  j["warmup_per_client"] = o.warmup_per_client;
  j["osl_spread_pct"] = o.osl_spread_pct;
  // No wall time or thread count: the same inputs give the same bytes on any machine.
  j["counts"] = {{"points", r.points.size()}, {"ran", ran}, {"unmodellable", unmod}, {"filtered_out", r.filtered_out}};
  if (const auto uses = calibration_uses(r, o); !uses.empty()) {
    j["calibration"] = {{"profile", uses.front().head}, {"uses", nlohmann::json::array()}};
    for (const auto& u : uses)
      j["calibration"]["uses"].push_back({{"what", u.what}, {"applies", u.applies}, {"points", u.points}, {"kinds", u.kinds}});
  }
  if (const BandCover b = band_cover(r, o); b.checks > 0)
    j["band_cover"] = {{"checks", b.checks}, {"inside", b.inside}, {"profile_checks", b.profile_checks}, {"profile_inside", b.profile_inside}};
  if (r.csv.rows > 0)
    j["csv"] = {{"rows", r.csv.rows}, {"points", r.csv.points}, {"merged_points", r.csv.merged_points},
                {"merged_rows", r.csv.merged_rows}, {"layout_from_id", r.csv.layout_from_id},
                {"layout_from_pattern", r.csv.layout_from_pattern}, {"layout_from_moe_grid", r.csv.layout_from_moe_grid}};
  auto group_json = [](const Group& g, const std::vector<std::string>& names) {
    nlohmann::json x;
    for (std::size_t i = 0; i < names.size(); ++i) x[names[i]] = g.key[i];
    const Triple t = triple(g);
    x["points"] = g.points.size();
    x["below_prefill_floor"] = std::count_if(g.points.begin(), g.points.end(), [](const PointResult* p) { return p->below_floor(); });
    x["below_decode_floor"] = std::count_if(g.points.begin(), g.points.end(), [](const PointResult* p) { return p->below_decode_floor(); });
    x["few_in_flight"] = std::count_if(g.points.begin(), g.points.end(), [](const PointResult* p) { return p->few_in_flight(); });
    x["ttft"] = stats_json(t.ttft);
    x["itl"] = stats_json(t.itl);
    x["output_tps"] = stats_json(t.tps);
    return x;
  };
  j["groups"] = nlohmann::json::array();
  for (const auto& g : groups_of(r, group_key)) j["groups"].push_back(group_json(g, {"engine", "model", "gpu", "mode"}));
  j["by_gpu"] = nlohmann::json::array();
  for (const auto& g : groups_of(r, gpu_key)) j["by_gpu"].push_back(group_json(g, {"engine", "gpu", "mode"}));
  j["by_release"] = nlohmann::json::array();
  for (const auto& g : groups_of(r, release_key))
    j["by_release"].push_back(group_json(g, {"engine", "release", "model", "gpu", "mode"}));
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : r.points) {
    const MeasuredPoint& m = p.measured;
    nlohmann::json x = {{"id", m.id}, {"source", m.source}, {"merged", m.merged}, {"backend", m.backend},
                        {"backend_version", m.backend_version}, {"model_path", m.model_path}, {"model", p.model},
                        {"system", m.system}, {"gpu", p.gpu}, {"precision", m.precision}, {"mode", p.mode},
                        {"isl", m.isl}, {"osl", m.osl}, {"concurrency", m.concurrency}, {"tp", m.tp}, {"pp", m.pp},
                        {"attention_dp", m.attention_dp}, {"moe_tp", m.moe_tp}, {"moe_ep", m.moe_ep},
                        {"measured", {{"ttft_ms", num(m.ttft_ms)}, {"tpot_ms", num(m.tpot_ms)}, {"output_tps", num(m.output_tps)},
                                      {"output_tps_derived", m.output_tps_derived}}}};
    if (!m.layout_note.empty()) x["layout_note"] = m.layout_note;
    if (m.request_rate > 0) x["request_rate"] = m.request_rate;
    if (m.requests > 0) x["requests"] = m.requests;
    if (m.warmup_requests >= 0 && !m.scenario.is_null()) x["warmup_requests"] = m.warmup_requests;
    if (!m.stream_note.empty()) x["stream_note"] = m.stream_note;
    if (!m.lengths_note.empty()) x["lengths_note"] = m.lengths_note;
    if (!p.harness_note.empty()) x["harness_note"] = p.harness_note;
    if (m.runs > 1)
      x["reruns"] = {{"runs", m.runs}, {"ttft_spread_pct", pct(m.ttft_rerun_spread)}, {"tpot_spread_pct", pct(m.tpot_rerun_spread)}};
    if (m.mode == "disagg")
      x["disagg"] = {{"prefill_workers", m.prefill_workers}, {"prefill_tp", m.prefill_tp},
                     {"decode_workers", m.decode_workers}, {"decode_tp", m.decode_tp}};
    if (p.unmodellable.empty()) {
      x["predicted"] = {{"ttft_ms", num(p.ttft_ms)}, {"itl_ms", num(p.itl_ms)}, {"output_tps", num(p.output_tps)}};
      x["error_pct"] = {{"ttft", pct(p.ttft_err)}, {"itl", pct(p.itl_err)}, {"output_tps", pct(p.tps_err)}};
      x["regime"] = p.regime;
      x["prefill_floor_s"] = num(p.prefill_floor_s);
      x["measured_cycle_s"] = num(p.measured_cycle_s);
      x["below_prefill_floor"] = p.below_floor();
      x["decode_floor_ms"] = num(p.decode_floor_s * 1e3);
      x["decoding_sequences"] = p.decoding;
      x["below_decode_floor"] = p.below_decode_floor();
      x["in_flight_sequences"] = num(p.in_flight);
      x["runs_at_once"] = p.runs_at_once;
      x["few_in_flight"] = p.few_in_flight();
      x["behind_prefill_fraction"] = num(p.behind_prefill);
      if (std::isfinite(p.ttft_train_ms))
        x["lock_fraction"] = {{"ttft_train_ms", num(p.ttft_train_ms)}, {"ttft_spread_out_ms", num(p.ttft_spread_out_ms)},
                              {"measured", num(p.lock_measured)}, {"predicted", num(p.lock_predicted)}};
      x["replica_concurrency"] = p.replica_concurrency;
      x["max_num_seqs"] = p.max_num_seqs;
      x["scenario"] = p.scenario;
    } else {
      x["unmodellable"] = p.unmodellable;
    }
    pts.push_back(std::move(x));
  }
  j["points"] = std::move(pts);
  if (const Reruns rr = reruns_of(r); rr.points > 0)
    j["reruns"] = {{"points", rr.points},
                   {"ttft_spread", {{"median_pct", pct(rr.ttft_spread.median_abs)}, {"p90_pct", pct(rr.ttft_spread.p90_abs)}}},
                   {"tpot_spread", {{"median_pct", pct(rr.tpot_spread.median_abs)}, {"p90_pct", pct(rr.tpot_spread.p90_abs)}}},
                   {"ttft_error", stats_json(rr.ttft_err)}, {"tpot_error", stats_json(rr.tpot_err)}};
  return j;
}

std::string to_csv(const Report& r) {
  std::string out =
      "id,source,merged,backend,backend_version,model_path,model,system,gpu,precision,mode,isl,osl,concurrency,tp,pp,"
      "attention_dp,moe_ep,prefill_workers,prefill_tp,decode_workers,decode_tp,regime,measured_ttft_ms,measured_tpot_ms,"
      "measured_output_tps,output_tps_derived,predicted_ttft_ms,predicted_itl_ms,predicted_output_tps,ttft_err_pct,"
      "itl_err_pct,output_tps_err_pct,prefill_floor_s,measured_cycle_s,below_prefill_floor,decode_floor_ms,"
      "decoding_sequences,below_decode_floor,in_flight_sequences,runs_at_once,few_in_flight,behind_prefill_fraction,ttft_train_ms,ttft_spread_out_ms,lock_measured,"
      "lock_predicted,unmodellable,layout_note,harness_note\n";
  for (const auto& p : r.points) {
    const MeasuredPoint& m = p.measured;
    std::vector<std::string> f{m.id, m.source, std::to_string(m.merged), m.backend, m.backend_version, m.model_path,
                               p.model, m.system, p.gpu, m.precision, p.mode, std::to_string(m.isl), std::to_string(m.osl),
                               std::to_string(m.concurrency), std::to_string(m.tp), std::to_string(m.pp),
                               std::to_string(m.attention_dp), std::to_string(m.moe_ep), std::to_string(m.prefill_workers),
                               std::to_string(m.prefill_tp), std::to_string(m.decode_workers), std::to_string(m.decode_tp),
                               p.regime, csv_num(m.ttft_ms), csv_num(m.tpot_ms), csv_num(m.output_tps),
                               m.output_tps_derived ? "1" : "0", csv_num(p.ttft_ms), csv_num(p.itl_ms),
                               csv_num(p.output_tps), csv_num(100 * p.ttft_err), csv_num(100 * p.itl_err),
                               csv_num(100 * p.tps_err), csv_num(p.prefill_floor_s), csv_num(p.measured_cycle_s),
                               p.below_floor() ? "1" : "0", csv_num(p.decode_floor_s * 1e3), std::to_string(p.decoding),
                               p.below_decode_floor() ? "1" : "0", csv_num(p.in_flight), std::to_string(p.runs_at_once),
                               p.few_in_flight() ? "1" : "0", csv_num(p.behind_prefill), csv_num(p.ttft_train_ms),
                               csv_num(p.ttft_spread_out_ms), csv_num(p.lock_measured), csv_num(p.lock_predicted),
                               p.unmodellable, m.layout_note, p.harness_note};
    for (std::size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + csv_field(f[i]);
    out += "\n";
  }
  return out;
}

void add_band_checks(const BandTable& t, const PointResult& p, int& checks, int& hits) {
  const std::pair<const char*, std::pair<double, double>> metrics[] = {
      {"ttft", {p.measured.ttft_ms, p.ttft_ms}}, {"itl", {p.measured.tpot_ms, p.itl_ms}},
      {"output_tps", {p.measured.output_tps, p.output_tps}}};
  for (const auto& [metric, mp] : metrics) {
    const auto [measured, predicted] = mp;
    if (!std::isfinite(measured) || !std::isfinite(predicted)) continue;
    ++checks;
    const Band b = band_for(t, p.gpu, p.engine, p.mode, metric, p.regime, predicted);
    if (b.present && measured >= b.lo && measured <= b.hi) ++hits;
  }
}

namespace {
// The calibration profile every point runs with (validate --calibration), if any.
std::optional<CalibrationProfile> profile_of(const Options& o) {
  if (!o.base.is_object() || !o.base.contains("calibration")) return std::nullopt;
  const auto& c = o.base["calibration"];
  return c.is_string() ? load_calibration(c.get<std::string>()) : parse_calibration(c, "calibration");
}
}  // namespace

std::vector<CalibrationUse> calibration_uses(const Report& r, const Options& o) {
  const std::optional<CalibrationProfile> prof = profile_of(o);
  std::vector<CalibrationUse> uses;
  if (!prof) return uses;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty()) continue;
    const AppliedCalibration a = applicable(*prof, p.gpu, p.engine_profile, p.model, p.precision);
    auto u = std::find_if(uses.begin(), uses.end(), [&](const CalibrationUse& x) { return x.what == a.what; });
    if (u == uses.end()) u = uses.insert(uses.end(), CalibrationUse{a.head, a.what, a.any, 0, {}});
    ++u->points;
    const std::string kind = p.model + " " + p.gpu + " " + p.engine_profile + " " + p.precision;
    if (std::find(u->kinds.begin(), u->kinds.end(), kind) == u->kinds.end()) u->kinds.push_back(kind);
  }
  // What applies first, then the most points.
  std::stable_sort(uses.begin(), uses.end(), [](const CalibrationUse& x, const CalibrationUse& y) {
    return x.applies != y.applies ? x.applies : x.points > y.points;
  });
  return uses;
}

BandCover band_cover(const Report& r, const Options& o) {
  const std::optional<CalibrationProfile> prof = profile_of(o);
  BandCover b;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty() || p.excluded()) continue;
    const bool own = prof && applicable(*prof, p.gpu, p.engine_profile, p.model, p.precision).bands;
    int c = 0, h = 0;
    add_band_checks(own ? prof->bands : embedded_bands(), p, c, h);
    b.checks += c, b.inside += h;
    if (own) b.profile_checks += c, b.profile_inside += h;
  }
  return b;
}

BandTable bands_of(const Report& r, int min_points, nlohmann::json meta) {
  std::vector<Residual> res;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty() || p.excluded()) continue;
    res.push_back({p.gpu, p.engine, p.mode, "ttft", p.regime, p.measured.ttft_ms, p.ttft_ms});
    res.push_back({p.gpu, p.engine, p.mode, "itl", p.regime, p.measured.tpot_ms, p.itl_ms});
    res.push_back({p.gpu, p.engine, p.mode, "output_tps", p.regime, p.measured.output_tps, p.output_tps});
  }
  return make_bands(res, min_points, std::move(meta));
}

namespace {
// Adds one seed's by_gpu medians to the across-seeds summary.
void add_seed(nlohmann::json& a, std::uint64_t seed, const nlohmann::json& by_gpu) {
  const size_t before = a["seeds"].size();
  a["seeds"].push_back(seed);
  for (const auto& g : by_gpu) {
    nlohmann::json* row = nullptr;
    for (auto& r : a["by_gpu"])
      if (r["engine"] == g["engine"] && r["gpu"] == g["gpu"] && r["mode"] == g["mode"]) row = &r;
    if (!row) {
      a["by_gpu"].push_back({{"engine", g["engine"]}, {"gpu", g["gpu"]}, {"mode", g["mode"]}});
      row = &a["by_gpu"].back();
      for (const char* m : {"ttft", "itl", "output_tps"})   // absent at the earlier seeds
        (*row)[m] = nlohmann::json(std::vector<nlohmann::json>(before, nullptr));
    }
    for (const char* m : {"ttft", "itl", "output_tps"}) {
      const auto& v = g[m]["median_abs_pct"];
      (*row)[m].push_back(v.is_number() ? v : nlohmann::json());
    }
  }
  for (auto& r : a["by_gpu"])   // a group absent at this seed
    for (const char* m : {"ttft", "itl", "output_tps"})
      while (r[m].size() < a["seeds"].size()) r[m].push_back(nullptr);
}
}  // namespace

nlohmann::json across_seeds(const std::vector<MeasuredPoint>& points, const Options& o, int seeds,
                            const nlohmann::json& first_by_gpu) {
  if (seeds < 1 || seeds > 100) throw Error("validate", "seeds", "must be 1..100 runs");
  nlohmann::json a = {{"seeds", nlohmann::json::array()}, {"by_gpu", nlohmann::json::array()}};
  add_seed(a, o.seed, first_by_gpu);
  for (int k = 1; k < seeds; ++k) {
    Options ok = o;
    ok.seed = o.seed + std::uint64_t(k);
    add_seed(a, ok.seed, to_json(run(points, ok), ok)["by_gpu"]);
  }
  return a;
}

std::string across_seeds_text(const nlohmann::json& a) {
  std::vector<std::string> head{"engine", "GPU", "mode", "metric"};
  for (const auto& sd : a["seeds"]) head.push_back("seed " + std::to_string(sd.get<std::uint64_t>()));
  head.insert(head.end(), {"min", "median", "max"});
  Table t(head);
  for (const auto& r : a["by_gpu"])
    for (const auto& [m, label] : {std::pair<const char*, const char*>{"ttft", "TTFT |med|"}, {"itl", "TPOT |med|"},
                                   {"output_tps", "tok/s |med|"}}) {
      std::vector<std::string> row{r["engine"].get<std::string>(), r["gpu"].get<std::string>(), r["mode"].get<std::string>(), label};
      std::vector<double> v;
      for (const auto& x : r[m]) {
        row.push_back(x.is_number() ? fixed(x.get<double>(), 1) + "%" : "-");
        if (x.is_number()) v.push_back(x.get<double>());
      }
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      const double med = n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      for (double x : {n ? v.front() : NAN, med, n ? v.back() : NAN}) row.push_back(std::isfinite(x) ? fixed(x, 1) + "%" : "-");
      t.add_row(row);
    }
  return "\nAcross seeds (median |error| per engine x GPU x mode at each seed; the tables above are seed " +
         std::to_string(a["seeds"].front().get<std::uint64_t>()) + "'s)\n" + t.render();
}

namespace {
// Options::lock_fraction: per GPU and clients per replica, the points whose orbits differ, the
// measured lock fraction's median and quartiles, and the predicted one's median.
std::string lock_text(const Report& r) {
  using Fractions = std::pair<std::vector<double>, std::vector<double>>;   // measured, predicted
  std::map<std::pair<std::string, int>, Fractions> cells;
  std::map<std::vector<std::string>, Fractions> builds;   // GPU, model, engine release
  int ran = 0;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty() || !std::isfinite(p.ttft_spread_out_ms)) continue;
    ++ran;
    if (!std::isfinite(p.lock_measured)) continue;
    for (auto* c : {&cells[{p.gpu, p.replica_concurrency}], &builds[{p.gpu, p.model, release_of(p)}]}) {
      c->first.push_back(p.lock_measured);
      c->second.push_back(p.lock_predicted);
    }
  }
  if (ran == 0) return "";
  auto q = [](std::vector<double> v, double f) {
    std::sort(v.begin(), v.end());
    const double x = f * double(v.size() - 1);
    const auto i = std::size_t(x);
    return i + 1 < v.size() ? v[i] + (v[i + 1] - v[i]) * (x - double(i)) : v.back();
  };
  auto spread = [&q](const std::vector<double>& v) {
    return fixed(q(v, 0.5), 2) + " (" + fixed(q(v, 0.25), 2) + " to " + fixed(q(v, 0.75), 2) + ")";
  };
  Table t({"GPU", "clients", "points", "measured f: median (quartiles)", "predicted f: median"});
  int n = 0;
  for (const auto& [k, c] : cells) {
    n += int(c.first.size());
    t.add_row({k.first, std::to_string(k.second), std::to_string(c.first.size()), spread(c.first), fixed(q(c.second, 0.5), 2)});
  }
  Table b({"GPU", "model", "release", "points", "measured f: median (quartiles)", "predicted f: median"});
  for (const auto& [k, c] : builds)
    b.add_row({k[0], k[1], k[2], std::to_string(c.first.size()), spread(c.first), fixed(q(c.second, 0.5), 2)});
  return "Lock fraction (--lock-fraction): each closed-loop point also run with fixed answer lengths (the clients' train, "
         "f = 1) and with a " + fixed(kLockSpreadTokens, 0) + "-token spread (spread out, f = 0); f = (TTFT - spread out) / "
         "(train - spread out) for the " + std::to_string(n) + " of " + std::to_string(ran) +
         " points whose orbits differ by more than " + fixed(100 * kLockMinGap, 0) + " % (fields lock_fraction)\n" +
         (n > 0 ? t.render() + "\nPer GPU x model x engine release (f above 1: slower than even the train)\n" + b.render()
                : std::string("(none)\n")) + "\n";
}

// The points that ran fewer than kFewInFlight of what their deployment runs at once
// (PointResult::few_in_flight), one line each, with the ratio's spread over every aggregated point
// that has one, which is what the threshold was chosen from.
std::string few_in_flight_text(const Report& r) {
  std::vector<double> ratio;
  std::vector<const PointResult*> few;
  for (const auto& p : r.points) {
    if (!p.unmodellable.empty() || p.runs_at_once <= 0 || !std::isfinite(p.in_flight)) continue;
    ratio.push_back(p.in_flight / p.runs_at_once);
    if (p.few_in_flight()) few.push_back(&p);
  }
  if (few.empty()) return "";
  std::sort(ratio.begin(), ratio.end());
  const std::size_t n = ratio.size();
  const double med = n % 2 ? ratio[n / 2] : 0.5 * (ratio[n / 2 - 1] + ratio[n / 2]);
  const auto above = std::lower_bound(ratio.begin(), ratio.end(), kFewInFlight);
  Table t({"engine", "release", "model", "GPU", "TP", "ISL/OSL", "clients/replica", "TTFT s", "TPOT ms", "in flight",
           "runs at once"});
  for (const auto* p : few) {
    const MeasuredPoint& m = p->measured;
    t.add_row({p->engine, release_of(*p), p->model, p->gpu, std::to_string(m.tp),
               std::to_string(m.isl) + "/" + std::to_string(m.osl), std::to_string(p->replica_concurrency),
               fixed(m.ttft_ms / 1e3, 1), fixed(m.tpot_ms, 2), fixed(p->in_flight, 1), std::to_string(p->runs_at_once)});
  }
  return "<half: " + std::to_string(few.size()) + " measured points had fewer than " + fixed(kFewInFlight, 2) +
         " x the sequences their deployment runs at once in flight: Little's law puts C/R x (OSL-1) x TPOT / (TTFT + "
         "(OSL-1) x TPOT) of a replica's clients in decode, and servesim's memory plan runs min(C/R, max_num_seqs, whole "
         "requests of ISL + OSL the KV pool holds) at once. Their clients waited outside the engine (the harness's), or "
         "the engine admitted fewer than its memory plan holds; either way the run is not its clients on that deployment. "
         "In flight / runs at once over the " + std::to_string(n) + " aggregated points: median " + fixed(med, 2) +
         ", the flagged " + fixed(ratio.front(), 2) + " to " + fixed(*(above - 1), 2) + ", the next " +
         (above != ratio.end() ? fixed(*above, 2) : std::string("-")) +
         " (fields in_flight_sequences, runs_at_once, few_in_flight)\n" + t.render();
}
}  // namespace

std::string to_text(const Report& r, const Options& o) {
  std::string out;
  int ran = 0, unmod = 0;
  for (const auto& p : r.points) (p.unmodellable.empty() ? ran : unmod) += 1;
  if (r.csv.rows > 0)
    out += std::to_string(r.csv.rows) + " rows -> " + std::to_string(r.csv.points) + " distinct points (" +
           std::to_string(r.csv.merged_points) + " of them merged from repeats, " + std::to_string(r.csv.merged_rows) +
           " repeated rows folded in; each metric is the median of its repeats)\n";
  if (r.csv.layout_from_id > 0)
    out += std::to_string(r.csv.layout_from_id) +
           " points run the TP x EP layout their id names (_tp<N>_ep<M>_) instead of their columns' attention-DP one: "
           "those rows measure the same TPOT, to 1 %, as the same model's TP x EP rows (field layout_note)\n";
  if (r.csv.layout_from_pattern > 0)
    out += std::to_string(r.csv.layout_from_pattern) +
           " points without a layout in their id, whose columns have the same pattern (TP t, DP t, EP t x t), run TP t EP t "
           "too: their measurements are TP t EP t's, not those of t times the GPUs (field layout_note)\n";
  if (r.csv.layout_from_moe_grid > 0)
    out += std::to_string(r.csv.layout_from_moe_grid) +
           " points whose columns give TP e x e (or attention DP e x e) with MoE TP e x EP e run TP e EP e (DP e EP e): rows "
           "of that pattern with a twin measure exactly that layout's TTFT and TPOT, and merge with it; field layout_note\n";
  out += std::to_string(r.points.size()) + " points: " + std::to_string(ran) + " simulated, " + std::to_string(unmod) +
         " not modellable (listed below)" +
         (r.filtered_out ? ", " + std::to_string(r.filtered_out) + " left out by the filters" : std::string()) + "\n";
  if (const auto uses = calibration_uses(r, o); !uses.empty()) {   // which points the profile changed, and how
    out += uses.front().head + ":\n";
    for (const auto& u : uses) {
      std::vector<std::string> shown(u.kinds.begin(), u.kinds.begin() + std::min<std::size_t>(u.kinds.size(), 3));
      out += "  " + std::to_string(u.points) + (u.points == 1 ? " point (" : " points (") + text::join(shown) +
             (u.kinds.size() > 3 ? " and " + std::to_string(u.kinds.size() - 3) + " more" : std::string()) + "): " + u.what + "\n";
    }
  }
  if (r.csv.rows > 0 && o.harness == "aic")
    out += "Engine flags (--harness aic): AIConfigurator's generated vllm serve flags (max_num_batched_tokens = batch + ISL "
           "+ 1500, max_model_len = ISL + OSL + 1500, CUDA graphs at every batch size 1...batch; vLLM's default prefix cache, "
           "which distinct prompts only use to recompute a preempted request's blocks), and an FP8 KV cache "
           "for FP8 deployments on Blackwell\n";
  if (r.csv.rows > 0 && o.harness == "aic") {
    std::map<std::string, int> sets;
    for (const auto& p : r.points)
      if (!p.harness_note.empty()) ++sets[run_set_of(p.measured)];
    for (const auto& [set, n] : sets)
      out += std::to_string(n) + " points run with re-sent prompts (vllm serve's defaults, prefix caching on, aiperf's " +
             std::to_string(kAiperfDatasetEntries) + " dataset entries): their run set (" + set +
             ") measured cycles shorter than prefilling its prompts can take (field harness_note; --no-resent-prompts keeps the "
             "generated flags)\n";
  }
  std::string lengths = o.osl_spread_pct > 0 ? "fixed ISL, OSL with a normal spread of " + fixed(o.osl_spread_pct, 2) + " %"
                                             : std::string("fixed ISL/OSL (OSL with the closed-loop spread of the "
                                                           "point's engine profile, if any: sim/README.md)");
  // Runs whose requests had lengths of their own run them (MeasuredPoint::isl_lengths).
  int drawn = 0;
  for (const auto& p : r.points) drawn += runs_drawn_lengths(p.scenario);
  if (drawn > 0)
    lengths = (drawn == int(r.points.size()) ? std::string("ISL/OSL") : "ISL/OSL of " + std::to_string(drawn) + " points") +
              " as the run's requests had them (their lengths or its dataset's draw)" +
              (drawn == int(r.points.size()) ? std::string() : ", the others' " + lengths);
  // CSV points run C x --requests-per-client after C x --warmup-per-client; an aiperf folder its
  // own recorded counts.
  bool csv_points = false, folder_points = false;
  for (const auto& p : r.points) (p.measured.scenario.is_null() ? csv_points : folder_points) = true;
  const std::string counts =
      (csv_points ? "C x " + std::to_string(o.requests_per_client) + " measured requests after C x " +
                        std::to_string(o.warmup_per_client) + " warm-up" : std::string()) +
      (csv_points && folder_points ? " (CSV rows), " : "") +
      (!folder_points ? std::string()
       : r.points.size() == 1 && r.points[0].measured.requests > 0
           ? std::to_string(r.points[0].measured.requests) + " measured requests after " +
                 std::to_string(std::max<std::int64_t>(0, r.points[0].measured.warmup_requests)) + " warm-up (the folder's own)"
           : std::string("the measured and warm-up requests each aiperf folder recorded"));
  bool open_points = false, closed_points = false;
  for (const auto& p : r.points) (p.measured.request_rate > 0 ? open_points : closed_points) = true;
  const std::string load = open_points && !closed_points ? "open loop at its request rate (Poisson arrivals, as aiperf sends them)"
                           : open_points ? "closed loop at its concurrency C or open loop at its request rate (Poisson arrivals)"
                                         : "closed loop at its concurrency C";
  out += "Each point: " + load + ", " + lengths + ", " + counts + "; compared: simulated " +
         o.statistic + " TTFT, ITL (aiperf's inter_token_latency: TPOT without the first token) and output tok/s.\n" +
         (std::any_of(r.points.begin(), r.points.end(), [](const PointResult& p) { return p.measured.output_tps_derived; })
              ? "Output tok/s of CSV rows (no throughput recorded): Little's law on both sides, C x OSL / (TTFT + (OSL-1) x TPOT).\n"
              : "") +
         "Errors: signed % = (predicted - measured) / measured; med = median, |med| = median of |%|, p90 = 90th percentile of |%|.\n\n";
  for (const auto& p : r.points)
    if (!p.measured.stream_note.empty()) out += p.measured.id + ": " + p.measured.stream_note + " (field stream_note)\n";
  for (const auto& p : r.points)
    if (!p.measured.lengths_note.empty()) out += p.measured.id + ": " + p.measured.lengths_note + " (field lengths_note)\n";
  auto table = [&](const std::vector<Group>& groups, std::vector<std::string> head) {
    const std::size_t keys = head.size();
    for (const char* m : {"TTFT", "TPOT", "tok/s"})
      for (const char* s : {" med", " |med|", " p90"}) head.push_back(std::string(m) + s);
    head.insert(head.begin() + static_cast<long>(keys), "points");
    head.insert(head.begin() + static_cast<long>(keys) + 1, "<floor");
    head.insert(head.begin() + static_cast<long>(keys) + 2, "<half");
    Table t(head);
    for (const auto& g : groups) {
      std::vector<std::string> row = g.key;
      row.push_back(std::to_string(g.points.size()));
      row.push_back(std::to_string(std::count_if(g.points.begin(), g.points.end(), [](const PointResult* p) { return p->inconsistent(); })));
      row.push_back(std::to_string(std::count_if(g.points.begin(), g.points.end(), [](const PointResult* p) { return p->few_in_flight(); })));
      const Triple tr = triple(g);
      for (const ErrorStats* s : {&tr.ttft, &tr.itl, &tr.tps}) {
        row.push_back(pct_text(s->median_signed, true));
        row.push_back(pct_text(s->median_abs, false));
        row.push_back(pct_text(s->p90_abs, false));
      }
      t.add_row(row);
    }
    return t.render();
  };
  const auto groups = groups_of(r, group_key);
  if (!groups.empty()) {
    out += "Per engine x model x GPU x mode\n" + table(groups, {"engine", "model", "GPU", "mode"}) + "\n";
    out += "Per engine release x model x GPU x mode (the release the rows name)\n" +
           table(groups_of(r, release_key), {"engine", "release", "model", "GPU", "mode"}) + "\n";
    out += "Per engine x GPU x mode (all models)\n" + table(groups_of(r, gpu_key), {"engine", "GPU", "mode"}) + "\n";
    const auto count = [&r](bool (PointResult::*f)() const) {
      return std::count_if(r.points.begin(), r.points.end(), [f](const PointResult& p) { return p.unmodellable.empty() && (p.*f)(); });
    };
    const auto below = count(&PointResult::inconsistent), pre = count(&PointResult::below_floor),
               dec = count(&PointResult::below_decode_floor), few = count(&PointResult::few_in_flight),
               excluded = count(&PointResult::excluded);
    if (below > 0)
      out += "<floor: " + std::to_string(below) + " measured points cannot be what their rows say. " + std::to_string(pre) +
             " finished their closed-loop cycles (TTFT + (OSL-1) x TPOT) faster than the GPU can prefill every prompt of the "
             "cycle at servesim's cheapest measured prefill cost per token (C x ISL x floor): they cannot have prefilled every "
             "prompt token (prefix-cache hits or shorter prompts). " + std::to_string(dec) +
             " measured a TPOT under the HBM time of one decode step of the sequences Little's law puts in decode "
             "(C x (OSL-1) x TPOT / cycle, at the prompt's context, weights and KV at the datasheet bandwidth): they cannot "
             "have decoded that many a step (failed or shortened requests). Fields below_prefill_floor, below_decode_floor.\n";
    out += few_in_flight_text(r);
    if (excluded > 0) {
      Report kept;
      for (const auto& p : r.points)
        if (p.unmodellable.empty() && !p.excluded()) kept.points.push_back(p);
      out += "The " + std::to_string(excluded) + " <floor and <half points stay in the tables above and are left out of "
             "--write-bands and the leave-one-out fits. Without them (" + std::to_string(below) + " <floor, " +
             std::to_string(few) + " <half, " + std::to_string(below + few - excluded) + " both):\n" +
             table(groups_of(kept, gpu_key), {"engine", "GPU", "mode"}) + "\n";
    }
  }
  if (const BandCover b = band_cover(r, o); b.checks > 0) {
    auto share = [](int in, int n) { return std::to_string(in) + " of " + std::to_string(n) + " (" + fixed(100.0 * in / n, 1) + " %)"; };
    const BandTable& shipped = embedded_bands();
    out += "Bands: " + share(b.inside, b.checks) + " measured TTFT, TPOT and tok/s figures fell inside the band their prediction "
           "carries (a band spans measured / predicted percentiles " + compact(shipped.lo_pct) + "-" + compact(shipped.hi_pct) +
           ": it promises " + compact(shipped.hi_pct - shipped.lo_pct) + " %)" +
           (b.profile_checks > 0 ? "; of those whose band is the calibration profile's own (its cross-validated residuals) " +
                                       share(b.profile_inside, b.profile_checks)
                                 : std::string()) +
           "; <floor and <half points left out (field band_cover)\n\n";
  }
  out += lock_text(r);
  if (const Reruns rr = reruns_of(r); rr.points > 0) {
    auto pc = [](double f) { return fixed(100 * f, 1) + " %"; };
    out += "Reruns: " + std::to_string(rr.points) + (rr.points == 1 ? " simulated point was" : " simulated points were") +
           " measured in 2+ runs with different figures (same engine version, layout and load). "
           "Between runs, TTFT differs by a median " + pc(rr.ttft_spread.median_abs) + " of the point (p90 " +
           pc(rr.ttft_spread.p90_abs) + "), TPOT by " + pc(rr.tpot_spread.median_abs) + " (p90 " + pc(rr.tpot_spread.p90_abs) +
           "): the measurement's repeatability. servesim's error on those points: TTFT median |" +
           pc(rr.ttft_err.median_abs) + "|, TPOT |" + pc(rr.tpot_err.median_abs) + "| (field reruns)\n\n";
  }
  if (unmod > 0) {
    std::map<std::vector<std::string>, int> why;
    std::vector<std::vector<std::string>> order;
    for (const auto& p : r.points) {
      if (p.unmodellable.empty()) continue;
      std::vector<std::string> k{p.engine.empty() ? "(blank)" : p.engine, p.measured.model_path, p.measured.system, p.mode,
                                 p.unmodellable};
      if (why[k]++ == 0) order.push_back(k);
    }
    out += "Not modellable (" + std::to_string(unmod) + " points; every one is in --output/--format json with its reason)\n";
    Table t({"engine", "model_path", "system", "mode", "points", "reason"});
    std::sort(order.begin(), order.end());
    for (const auto& k : order) t.add_row({k[0], k[1], k[2], k[3], std::to_string(why[k]), k[4]});
    out += t.render();
  }
  return out;
}

}  // namespace servesim::sim::validate
