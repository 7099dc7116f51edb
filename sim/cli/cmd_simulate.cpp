// `servesim simulate` (one scenario: readable summary, aiperf JSON, aiperf export folder) and
// `servesim sweep` (the scenario over a list of concurrencies or request rates, in parallel).
// Flags build the scenario JSON on top of --scenario FILE or the embedded default, so flags and
// files share one validation path.
#include <unistd.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/plot_runner.hpp"
#include "sim/studies/plan.hpp"
#include "sim/parallel.hpp"
#include "sim/api/api.hpp"
#include "sim/resolve.hpp"
#include "sim/calibration.hpp"
#include "workloads/multimodal.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/simulate.hpp"
#include "sim/kv_offload_setup.hpp"
#include "sim/topology/deployment.hpp"
#include "sim/validate/run_bands.hpp"

namespace servesim::cli {
namespace {

struct SimOpts {
  std::string scenario, model, model_file, gpu, precision, kv_cache_dtype, router, concurrency, request_rate, arrival;
  std::string images;                       // --images WxH[:N],... (workload.multimodal.images)
  std::optional<double> image_fraction;     // --image-fraction (workload.multimodal.fraction)
  std::string calibration;
  std::optional<int> gpus, tp, pp, ep, dp, max_num_seqs, block_size;
  std::optional<std::int64_t> dataset_entries;
  std::string dataset_sampling;
  std::optional<std::int64_t> isl, osl, requests, warmup, max_num_batched_tokens, long_prefill, max_model_len, seed;
  std::optional<double> isl_stddev, osl_stddev, util, overhead_ms, burstiness, closed_loop_spread;
  bool prefix_caching = false, no_chunked = false, eager = false, moe_all_to_all = false, no_frontend = false, no_warmup_barrier = false, warmup_until_steady = false,
       measure_until_precise = false;
  std::string engine, async_scheduling;
  std::optional<double> overhead_us_per_seq;
  std::optional<int> api_server_count, seeds;
  // topology on instances (scenario "topology" object)
  std::string topology, instance, prefill_instance, decode_instance, prefill_gpu, decode_gpu, mtp_acceptance;
  std::optional<int> nodes, replicas, prefill_workers, decode_workers, encode_workers, prefill_tp, decode_tp, encode_tp,
      prefill_dp, decode_dp, prefill_ep, decode_ep, prefill_nodes, decode_nodes, num_speculative_tokens;
  // simulate
  std::string export_dir;
  Format format = Format::table;
  // sweep
  std::string output, sweep_format;  // format "" = by --output extension (.csv, .json), else table
  std::vector<std::string> vs;       // --vs "FLAGS": variants of the swept scenario (the what-if)
  std::string plot;                  // --plot FILE: the sweep's charts
  int threads = 0;
  bool quiet = false;
  // multi-turn sessions and the KV router
  std::optional<int> sessions, turns;
  std::optional<double> think_time_s, start_spread_s, overlap_score_weight, router_temperature, kv_event_delay_ms;
  std::optional<std::int64_t> turn_isl, shared_prefix_tokens, session_block_tokens;
  std::string session_trace;
  std::string kv_offload;
  bool kv_offload_overlap = false;
};

void add_scenario_options(CLI::App& c, SimOpts& o, bool sweep) {
  c.add_option("--scenario", o.scenario, "Scenario JSON file (flags override its fields)")->check(CLI::ExistingFile);
  c.add_option("--model", o.model, "Model name (servesim list models) or its Hugging Face id");
  c.add_option("--model-file", o.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  c.add_option("--gpu", o.gpu, "GPU name (servesim list gpus)");
  c.add_option("--gpus", o.gpus, "GPUs in total; replicas = gpus / (tp x pp)");
  c.add_option("--tp,--tensor-parallel-size", o.tp, "Tensor parallel size");
  c.add_option("--pp,--pipeline-parallel-size", o.pp, "Pipeline parallel size");
  c.add_option("--ep,--expert-parallel-size", o.ep, "Expert parallel size (1, or tp x dp; on --engine trtllm / sglang a divisor of it: MoE TP x EP)");
  c.add_option("--dp,--data-parallel-size", o.dp,
               "Attention data-parallel ranks per replica (MoE models; replica GPUs = tp x pp x dp)");
  c.add_option("--precision", o.precision, "Weight precision: bf16, fp8, nvfp4, int8");
  c.add_option("--kv-cache-dtype", o.kv_cache_dtype, "KV cache dtype: auto (the checkpoint's: fp8 for fp8/nvfp4 weights, bf16 for bf16; on SGLang a DSA model's bf16 on Hopper, fp8 on Blackwell), bf16, fp8");
  c.add_option("--isl", o.isl, "Input tokens per request (mean when --isl-stddev is given)");
  c.add_option("--osl", o.osl, "Output tokens per request (mean when --osl-stddev is given)");
  c.add_option("--isl-stddev", o.isl_stddev, "Standard deviation of the input length (normal, as aiperf)");
  c.add_option("--osl-stddev", o.osl_stddev, "Standard deviation of the output length (normal, as aiperf)");
  c.add_option("--concurrency", o.concurrency, sweep ? "Closed-loop clients, a list: 1,2,4,8" : "Closed-loop clients (aiperf --concurrency)");
  c.add_option("--images", o.images, "Images per request that carries them: WIDTHxHEIGHT[:COUNT],... (vision models; "
                                     "a scenario's workload.multimodal.images)");
  c.add_option("--image-fraction", o.image_fraction,
               "Share of requests that carry --images (default 1: every request), chosen per request from the seed "
               "(workload.multimodal.fraction)");
  c.add_option("--request-rate", o.request_rate, sweep ? "Open-loop request rates per second, a list" : "Open-loop request rate per second");
  c.add_option("--arrival", o.arrival, "Open-loop arrivals: poisson, gamma, constant");
  c.add_option("--burstiness", o.burstiness, "Gamma arrivals' shape (1 = Poisson)");
  c.add_option("--requests", o.requests, "Measured requests (per point)");
  c.add_option("--warmup-requests", o.warmup, "Requests sent first and left out of the metrics");
  c.add_option("--dataset-entries", o.dataset_entries,
               "Distinct prompts the client cycles through (aiperf --num-dataset-entries, 100 there); repeats hit the "
               "prefix cache when it is on. Default 0: every request a distinct prompt");
  c.add_option("--dataset-sampling", o.dataset_sampling, "Order of the dataset entries: sequential (default), random, shuffle");
  c.add_option("--seed", o.seed, "Random seed")->check(int64_range());
  c.add_option("--router", o.router, "round_robin, least_outstanding, least_kv_load or kv (Dynamo's KV-aware router)");
  auto* ds = "Multi-turn sessions and KV-aware routing (docs/dynamo.md)";
  c.add_option("--overlap-score-weight", o.overlap_score_weight, "kv router: weight of prefill blocks against active blocks (Dynamo's, default 1)")->group(ds);
  c.add_option("--router-temperature", o.router_temperature, "kv router: softmax temperature (0: the cheapest replica)")->group(ds);
  c.add_option("--kv-event-delay-ms", o.kv_event_delay_ms, "kv router: staleness of its view of each replica's cache (default 0)")->group(ds);
  c.add_option("--sessions", o.sessions, "Multi-turn sessions running at once (each prompt: the session's history + new tokens)")->group(ds);
  c.add_option("--turns", o.turns, "Turns per session (default 1)")->group(ds);
  c.add_option("--think-time-s", o.think_time_s, "Delay between an answer and the session's next turn (default 0)")->group(ds);
  c.add_option("--start-spread-s", o.start_spread_s, "Sessions start uniformly within this many seconds (default 0)")->group(ds);
  c.add_option("--turn-isl", o.turn_isl, "New tokens of each later turn (default --isl)")->group(ds);
  c.add_option("--shared-prefix-tokens", o.shared_prefix_tokens, "A prefix every prompt shares (system prompt, tools): with --sessions, every session's first turn")->group(ds);
  c.add_option("--session-block-tokens", o.session_block_tokens, "Content granularity of session prefix hashes (default 64; a trace's 512)")->group(ds);
  c.add_option("--kv-offload", o.kv_offload, "KV offload tiers per replica: cpu:GIB[,disk:GIB] (evicted prefix-cache blocks move there; hits onboard them)")->group(ds);
  c.add_flag("--kv-offload-overlap", o.kv_offload_overlap, "Onboarding overlaps the step's compute (default: adds to it)")->group(ds);
  c.add_option("--session-trace", o.session_trace, "Session trace JSONL: session_id, input_length (new), output_length, delay_ms, hash_ids")->group(ds);
  c.add_option("--max-num-seqs", o.max_num_seqs, "vLLM max_num_seqs");
  c.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "vLLM max_num_batched_tokens");
  c.add_option("--gpu-memory-utilization", o.util, "vLLM gpu_memory_utilization");
  c.add_option("--block-size", o.block_size, "vLLM block_size (tokens per KV block)");
  c.add_flag("--enable-prefix-caching", o.prefix_caching, "vLLM enable_prefix_caching");
  c.add_flag("--no-enable-chunked-prefill", o.no_chunked, "Turn chunked prefill off");
  c.add_option("--long-prefill-token-threshold", o.long_prefill, "vLLM long_prefill_token_threshold");
  c.add_option("--max-model-len", o.max_model_len, "vLLM max_model_len");
  c.add_flag("--enforce-eager", o.eager, "vLLM enforce_eager (no CUDA graphs)");
  c.add_flag("--moe-all-to-all", o.moe_all_to_all,
             "MoE under attention DP (--dp) exchanges tokens by all-to-all dispatch / combine (DeepEP-style: vLLM "
             "--all2all-backend deepep_*, SGLang --moe-a2a-backend deepep, TensorRT-LLM WIDEEP) instead of all-gather + "
             "reduce-scatter, on every layout (engine.moe_all_to_all; default: the engine's rule, all-to-all on SGLang and "
             "TensorRT-LLM once an EP group spans more than one node)");
  c.add_option("--step-overhead-ms", o.overhead_ms, "Engine-core CPU time per step (default: the engine profile's)");
  c.add_option("--closed-loop-osl-spread", o.closed_loop_spread,
               "Closed loops of a fixed OSL: sd in tokens of each answer's length at 16 clients and 1024-token answers, "
               "scaled by the profile's (C/16) and (OSL/1024) exponents (default: the engine profile's, 6 x (C/16)^0.25 x "
               "(OSL/1024)^0.25 on vLLM >= 0.14, where measured clients fall out of lockstep; 0 keeps lengths fixed)");
  c.add_option("--step-overhead-us-per-seq", o.overhead_us_per_seq, "... plus this per scheduled request (default: the profile's)");
  c.add_option("--engine", o.engine, "Engine profile: vllm (the newest), vllm-0.12, ... (servesim list engines; default: the newest, or with --calibration "
               "the build the profile was fitted on)");
  c.add_option("--calibration", o.calibration,
               "A calibration profile (servesim calibrate e2e --output): its kernel factors apply on the GPU and engine it was "
               "fitted on, its host costs on that engine; the output says what applied")
      ->check(profile_file());
  c.add_option("--async-scheduling", o.async_scheduling, "vLLM async scheduling: on or off (default: the profile's)");
  c.add_option("--api-server-count", o.api_server_count, "vLLM --api-server-count (API-server processes per replica)");
  c.add_flag("--no-frontend", o.no_frontend, "Requests reach the engine the instant they are sent (no API server, no network)");
  c.add_flag("--no-warmup-barrier", o.no_warmup_barrier, "Measured requests follow warm-up ones without aiperf's phase barrier");
  c.add_flag("--warmup-until-steady", o.warmup_until_steady,
             "Closed loop: clients start at spread phases and the warm-up ends when the loop is steady, --warmup-requests at most "
             "(default 32 per client), without the phase barrier (the capacity rule of plan, search and recommend)");
  c.add_flag("--measure-until-precise", o.measure_until_precise,
             "Closed loop: measuring ends once the 95 % intervals of mean and p90 TTFT are within 2 % and of ITL within 1 %, "
             "--requests at most (the capacity rule of plan, search and recommend)");
  c.add_option("--num-speculative-tokens", o.num_speculative_tokens, "MTP draft tokens per step (0: off)");
  c.add_option("--mtp-acceptance", o.mtp_acceptance, "MTP acceptance: one rate or one per draft position (default 0.7)");
  auto* g = "Topology on instances (scenario \"topology\")";
  c.add_option("--topology", o.topology, "agg or disagg: run as a deployment on --instance nodes")->group(g);
  c.add_option("--instance", o.instance, "Instance type (servesim list instances); default: the first with --gpu")->group(g);
  c.add_option("--nodes", o.nodes, "Instances the topology is placed on (default: the fewest that hold it)")->group(g);
  c.add_option("--replicas", o.replicas, "Aggregated replicas (default: as many as the nodes hold)")->group(g);
  c.add_option("--prefill-workers", o.prefill_workers, "Disaggregated prefill workers")->group(g);
  c.add_option("--decode-workers", o.decode_workers, "Disaggregated decode workers")->group(g);
  c.add_option("--encode-workers", o.encode_workers, "Vision encode workers (0: prefill runs the encoder)")->group(g);
  c.add_option("--prefill-tp", o.prefill_tp, "TP of prefill workers (default --tp)")->group(g);
  c.add_option("--decode-tp", o.decode_tp, "TP of decode workers (default --tp)")->group(g);
  c.add_option("--encode-tp", o.encode_tp, "TP of encode workers (default --tp)")->group(g);
  c.add_option("--prefill-dp", o.prefill_dp, "Attention data-parallel ranks of a prefill worker (MoE models; default --dp)")->group(g);
  c.add_option("--decode-dp", o.decode_dp, "Attention data-parallel ranks of a decode worker (MoE models; default --dp)")->group(g);
  c.add_option("--prefill-ep", o.prefill_ep, "Expert parallelism of a prefill worker: 1 or its TP x DP (default: as --ep)")->group(g);
  c.add_option("--decode-ep", o.decode_ep, "Expert parallelism of a decode worker: 1 or its TP x DP (default: as --ep)")->group(g);
  c.add_option("--prefill-instance", o.prefill_instance, "Instance type of prefill (and encode) workers")->group(g);
  c.add_option("--decode-instance", o.decode_instance, "Instance type of decode workers")->group(g);
  c.add_option("--prefill-gpu", o.prefill_gpu, "GPU of prefill workers (its first catalogue instance)")->group(g);
  c.add_option("--decode-gpu", o.decode_gpu, "GPU of decode workers (its first catalogue instance)")->group(g);
  c.add_option("--prefill-nodes", o.prefill_nodes, "Nodes for prefill when roles use different instances")->group(g);
  c.add_option("--decode-nodes", o.decode_nodes, "Nodes for decode when roles use different instances")->group(g);
}

// The "topology" object from the flags (on top of the scenario's, if any).
void apply_topology(const SimOpts& o, nlohmann::json& j) {
  const bool any = !o.topology.empty() || !o.instance.empty() || o.nodes || o.replicas || o.prefill_workers ||
                   o.decode_workers || o.encode_workers || o.prefill_tp || o.decode_tp || o.encode_tp || o.prefill_dp ||
                   o.decode_dp || o.prefill_ep || o.decode_ep || !o.prefill_instance.empty() || !o.decode_instance.empty() || !o.prefill_gpu.empty() ||
                   !o.decode_gpu.empty() || o.prefill_nodes || o.decode_nodes;
  if (!any) return;
  if (!j.contains("topology") || j["topology"].is_null()) j["topology"] = nlohmann::json::object();
  if (!j["topology"].is_object()) throw Error(o.scenario.empty() ? "--topology" : o.scenario, "topology", "expected a JSON object, got " + brief(j["topology"]));
  nlohmann::json& t = j["topology"];
  if (!o.topology.empty()) t["kind"] = o.topology;
  const bool disagg = text::lower(t.value("kind", std::string("agg"))).rfind("disagg", 0) == 0;
  const bool role_flags = o.prefill_workers || o.decode_workers || o.encode_workers || o.prefill_tp || o.decode_tp ||
                          o.encode_tp || o.prefill_dp || o.decode_dp || o.prefill_ep || o.decode_ep || !o.prefill_instance.empty() || !o.decode_instance.empty() ||
                          !o.prefill_gpu.empty() || !o.decode_gpu.empty() || o.prefill_nodes || o.decode_nodes;
  if (role_flags && !disagg) throw Error("--topology", "", "prefill/decode/encode flags need --topology disagg");
  auto set = [&](const char* key, const auto& v) {
    if (v) t[key] = *v;
  };
  auto set_s = [&](const char* key, const std::string& v) {
    if (!v.empty()) t[key] = v;
  };
  set_s("instance", o.instance);
  set("nodes", o.nodes);
  set("replicas", o.replicas);
  set("prefill_workers", o.prefill_workers);
  set("decode_workers", o.decode_workers);
  set("encode_workers", o.encode_workers);
  set("prefill_tp", o.prefill_tp);
  set("decode_tp", o.decode_tp);
  set("encode_tp", o.encode_tp);
  set("prefill_dp", o.prefill_dp);
  set("decode_dp", o.decode_dp);
  set("prefill_ep", o.prefill_ep);
  set("decode_ep", o.decode_ep);
  set_s("prefill_instance", o.prefill_instance);
  set_s("decode_instance", o.decode_instance);
  set_s("prefill_gpu", o.prefill_gpu);
  set_s("decode_gpu", o.decode_gpu);
  set("prefill_nodes", o.prefill_nodes);
  set("decode_nodes", o.decode_nodes);
}

// The scenario JSON: the file or the embedded default, with every given flag applied.
// What build_scenario chose for flags left open ("" when nothing was), for the header.
std::string defaults_note;

sim::Scenario build_scenario(const SimOpts& o, bool sweep) {
  // NaN or inf would become JSON null on the way to the parser, i.e. silently the default.
  auto finite = [](const std::optional<double>& v, const char* flag, bool non_negative) {
    if (v && !std::isfinite(*v)) throw Error(flag, "", "expected a finite number, got " + std::to_string(*v));
    if (v && non_negative && *v < 0) throw Error(flag, "", "must be >= 0, got " + fixed(*v, 3));
  };
  finite(o.isl_stddev, "--isl-stddev", true);
  finite(o.osl_stddev, "--osl-stddev", true);
  finite(o.util, "--gpu-memory-utilization", false);
  finite(o.overhead_ms, "--step-overhead-ms", false);
  finite(o.closed_loop_spread, "--closed-loop-osl-spread", true);
  finite(o.burstiness, "--burstiness", false);
  nlohmann::json j = o.scenario.empty() ? sim::default_scenario_json() : sim::read_scenario_file(o.scenario);
  if (!j.is_object()) throw Error(o.scenario, "", "expected a JSON object");
  // --gpu and --instance must name the same GPU.
  if (!o.instance.empty()) (void)sim::resolve_gpu(o.gpu, o.instance, "");
  // A model named on the command line without a scenario file: the embedded scenario's model
  // fields (its FP8 / TP8 / 8 GPUs belong to its own model) give way to the one rule of
  // sim/resolve.hpp; the workload and engine knobs stay. The header says what was chosen.
  // A parallel size below 1 is the flag's fault (--tp 0 had been reported as "gpus: must be between 1 and 65536").
  for (const auto& [flag, v] : {std::pair{"--gpus", o.gpus}, {"--tp", o.tp}, {"--pp", o.pp}, {"--ep", o.ep}, {"--dp", o.dp}})
    if (v && *v < 1) throw Error(flag, "", "must be a whole number >= 1, got " + std::to_string(*v));
  if (o.scenario.empty() && (!o.model.empty() || !o.model_file.empty()) && o.topology.empty() && o.instance.empty()) {
    sim::ResolveInput in{o.model, o.gpu, "", o.precision, o.tp, o.pp, o.gpus};
    in.dp = o.dp.value_or(1);
    const sim::Resolved r = sim::resolve(api::resolve_model(o.model, o.model_file), in);
    for (const char* k : {"tp", "pp", "ep", "dp", "tensor_parallel_size", "pipeline_parallel_size", "expert_parallel_size",
                          "data_parallel_size", "kv_cache_dtype"})
      j.erase(k);
    j["gpu"] = r.gpu;
    j["precision"] = std::string(hw::to_string(r.precision));
    j["tensor_parallel_size"] = r.tp;
    j["pipeline_parallel_size"] = r.pp;
    j["gpus"] = r.gpus;
    defaults_note = r.describe();
  }
  auto set = [&](const char* key, const auto& v) {
    if (v) j[key] = *v;
  };
  if (!o.model.empty() && !o.model_file.empty()) throw Error("--model-file", "", "give --model or --model-file, not both");
  if (!o.model.empty()) {
    j.erase("model_file");
    j["model"] = o.model;
  }
  if (!o.model_file.empty()) {
    j.erase("model");
    j["model_file"] = std::filesystem::absolute(o.model_file).string();  // flags resolve against the working folder
  }
  if (!o.gpu.empty()) j["gpu"] = o.gpu;
  set("gpus", o.gpus);
  if (o.tp) { j.erase("tp"); j["tensor_parallel_size"] = *o.tp; }
  if (o.pp) { j.erase("pp"); j["pipeline_parallel_size"] = *o.pp; }
  if (o.ep) { j.erase("ep"); j["expert_parallel_size"] = *o.ep; }
  if (o.dp) { j.erase("dp"); j["data_parallel_size"] = *o.dp; }
  if (!o.precision.empty()) j["precision"] = o.precision;
  if (!o.kv_cache_dtype.empty()) j["kv_cache_dtype"] = o.kv_cache_dtype;
  if (!o.router.empty()) j["router"] = o.router;
  if (!o.kv_offload.empty()) j["kv_offload"] = sim::parse_offload_flag(o.kv_offload);
  if (o.kv_offload_overlap) {
    if (!j.contains("kv_offload") || !j["kv_offload"].is_object()) throw Error("--kv-offload-overlap", "", "needs --kv-offload");
    j["kv_offload"]["overlap"] = true;
  }
  if (o.overlap_score_weight || o.router_temperature || o.kv_event_delay_ms) {
    if (j.contains("router") && j["router"].is_string()) j["router"] = {{"kind", j["router"]}};
    if (!j.contains("router")) throw Error("--overlap-score-weight", "", "the KV router's knobs need --router kv");
    if (o.overlap_score_weight) j["router"]["overlap_score_weight"] = *o.overlap_score_weight;
    if (o.router_temperature) j["router"]["router_temperature"] = *o.router_temperature;
    if (o.kv_event_delay_ms) j["router"]["kv_event_delay_ms"] = *o.kv_event_delay_ms;
  } else if (!o.router.empty() && j.contains("router") && j["router"].is_object()) {
    j["router"] = o.router;
  }
  set("seed", o.seed);
  // A field of the wrong shape is reported by the parser, never replaced.
  auto object_at = [&](nlohmann::json& parent, const char* key) -> nlohmann::json& {
    if (!parent.contains(key) || parent[key].is_null()) parent[key] = nlohmann::json::object();
    if (!parent[key].is_object()) throw Error(o.scenario, key, "expected a JSON object, got " + brief(parent[key]));
    return parent[key];
  };
  object_at(j, "engine");
  nlohmann::json& e = j["engine"];
  if (o.max_num_seqs) e["max_num_seqs"] = *o.max_num_seqs;
  if (o.max_num_batched_tokens) e["max_num_batched_tokens"] = *o.max_num_batched_tokens;
  if (o.util) e["gpu_memory_utilization"] = *o.util;
  if (o.block_size) e["block_size"] = *o.block_size;
  if (o.prefix_caching) e["enable_prefix_caching"] = true;
  if (o.no_chunked) e["enable_chunked_prefill"] = false;
  if (o.long_prefill) e["long_prefill_token_threshold"] = *o.long_prefill;
  if (o.max_model_len) e["max_model_len"] = *o.max_model_len;
  if (o.eager) e["enforce_eager"] = true;
  if (o.moe_all_to_all) e["moe_all_to_all"] = true;
  if (o.overhead_ms) e["step_overhead_ms"] = *o.overhead_ms;
  if (o.closed_loop_spread) e["closed_loop_osl_spread_tokens"] = *o.closed_loop_spread;
  if (o.overhead_us_per_seq) e["step_overhead_us_per_seq"] = *o.overhead_us_per_seq;
  if (!o.async_scheduling.empty()) {
    const std::string a = text::lower(o.async_scheduling);
    if (a != "on" && a != "off" && a != "true" && a != "false")
      throw Error("--async-scheduling", "", "expected on or off, got '" + o.async_scheduling + "'");
    e["async_scheduling"] = a == "on" || a == "true";
  }
  if (!o.engine.empty()) j["engine_profile"] = o.engine;
  if (!o.calibration.empty()) {
    j["calibration"] = std::filesystem::absolute(o.calibration).string();
    try {   // a file it cannot read is the flag's fault (the scenario reader would blame a scenario's folder)
      read_input_file(j["calibration"].get<std::string>(), kMaxJsonFileBytes);
    } catch (const Error& e) {
      throw Error("--calibration", "", o.calibration + ": " + e.reason() + "; give a profile file (servesim calibrate e2e --output)");
    }
  }
  const bool no_barrier = o.no_warmup_barrier || o.warmup_until_steady;
  if (o.api_server_count || o.no_frontend || no_barrier) {
    if (!j.contains("frontend") || !j["frontend"].is_object()) j["frontend"] = nlohmann::json::object();
    nlohmann::json& f = j["frontend"];
    if (o.no_frontend) f["enabled"] = false;
    if (o.api_server_count) {
      if (!f.contains("api_server") || !f["api_server"].is_object()) f["api_server"] = nlohmann::json::object();
      f["api_server"]["api_server_count"] = *o.api_server_count;
    }
    if (no_barrier) {
      if (!f.contains("client") || !f["client"].is_object()) f["client"] = nlohmann::json::object();
      f["client"]["warmup_barrier"] = false;
    }
  }
  if (o.num_speculative_tokens) {
    e["num_speculative_tokens"] = *o.num_speculative_tokens;
    if (o.mtp_acceptance.empty() && *o.num_speculative_tokens > 0 && !e.contains("acceptance_rate"))
      e["acceptance_rate"] = std::vector<double>(static_cast<std::size_t>(std::max(0, *o.num_speculative_tokens)), 0.7);
  }
  if (!o.mtp_acceptance.empty()) {
    if (!o.num_speculative_tokens && !e.contains("num_speculative_tokens"))
      throw Error("--mtp-acceptance", "", "needs --num-speculative-tokens");
    std::vector<double> a;
    for (const auto& v : api::option_list(o.mtp_acceptance, "--mtp-acceptance")) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || !end || *end) throw Error("--mtp-acceptance", "", "'" + v + "' is not a number");
      a.push_back(x);
    }
    const int k = e.value("num_speculative_tokens", 0);
    if (a.size() == 1 && k > 1) a.assign(static_cast<std::size_t>(k), a[0]);   // one rate for every position
    e["acceptance_rate"] = a;
  }
  apply_topology(o, j);

  nlohmann::json& w = object_at(j, "workload");
  auto length = [&](const char* key, const std::optional<std::int64_t>& mean, const std::optional<double>& sd, const char* flag) {
    if (sd && !mean) throw Error(flag, "", "needs --" + std::string(key) + " for the mean");
    if (!mean) return;
    if (sd && *sd > 0) w[key] = {{"kind", "normal"}, {"mean", *mean}, {"stddev", *sd}};
    else w[key] = *mean;
  };
  length("isl", o.isl, o.isl_stddev, "--isl-stddev");
  length("osl", o.osl, o.osl_stddev, "--osl-stddev");
  if (!o.concurrency.empty() && !o.request_rate.empty())
    throw Error("--concurrency", "", "give --concurrency or --request-rate, not both");
  // A sweep list replaces the axis at run time; the scenario keeps its first value.
  auto first = [](const std::string& list) { return text::split_csv(list).empty() ? list : text::split_csv(list)[0]; };
  auto number = [](const std::string& s, const char* flag) {
    try {
      std::size_t used = 0;
      double v = std::stod(s, &used);
      if (used != s.size() || !std::isfinite(v)) throw std::invalid_argument(s);
      return v;
    } catch (const std::exception&) {
      throw Error(flag, "", "expected a finite number, got '" + s + "'");
    }
  };
  if (!o.concurrency.empty()) {
    for (const char* k : {"request_rate", "fixed_schedule", "schedule_file", "arrival", "burstiness"}) w.erase(k);
    const double c = number(first(o.concurrency), "--concurrency");
    if (c != std::floor(c)) throw Error("--concurrency", "", "expected whole clients, got " + first(o.concurrency));
    w["concurrency"] = static_cast<std::int64_t>(c);
  }
  if (!o.request_rate.empty()) {
    for (const char* k : {"concurrency", "fixed_schedule", "schedule_file"}) w.erase(k);
    w["request_rate"] = number(first(o.request_rate), "--request-rate");
  }
  if ((!o.arrival.empty() || o.burstiness) && !w.contains("request_rate"))
    throw Error(!o.arrival.empty() ? "--arrival" : "--burstiness", "",
                "applies to open-loop arrivals only: give --request-rate (the run is a closed loop of --concurrency clients)");
  if (!o.arrival.empty()) w["arrival"] = o.arrival;
  if (o.burstiness) w["burstiness"] = *o.burstiness;
  set("requests", o.requests);
  if (o.requests) w["requests"] = *o.requests;
  j.erase("requests");
  if (o.warmup) w["warmup_requests"] = *o.warmup;
  if (o.warmup_until_steady) {
    w["warmup_until_steady"] = true;
    // Without --warmup-requests the capacity rule's longest warm-up: 32 requests per client.
    if (!o.warmup && w.value("warmup_requests", std::int64_t{0}) == 0 && w.contains("concurrency") &&
        w["concurrency"].is_number_integer() && w["concurrency"].get<std::int64_t>() >= 1) {
      w["warmup_requests"] = std::int64_t{sim::kWarmupRoundsPerClient} * w["concurrency"].get<std::int64_t>();
      const std::string note = "warm-up until steady, at most " + std::to_string(sim::kWarmupRoundsPerClient) +
                               " requests per client (" + std::to_string(w["warmup_requests"].get<std::int64_t>()) + ")";
      defaults_note = defaults_note.empty() ? "defaults: " + note : defaults_note + "; " + note;
    }
  }
  if (o.measure_until_precise) w["measure_until_precise"] = true;
  if (!o.images.empty()) {
    nlohmann::json im = nlohmann::json::array();
    for (const auto& x : api::images_option(o.images).images)
      im.push_back({{"width", x.width_px}, {"height", x.height_px}, {"count", x.count}});
    w["multimodal"]["images"] = im;
  }
  if (o.image_fraction) {
    workloads::check_fraction(*o.image_fraction);
    if (!w.contains("multimodal") || !w["multimodal"].contains("images"))
      throw Error("--image-fraction", "", "needs --images (or a scenario workload.multimodal.images): the images that share of requests carries");
    w["multimodal"]["fraction"] = *o.image_fraction;
  }
  if (o.dataset_entries) w["dataset"]["entries"] = *o.dataset_entries;
  if (!o.dataset_sampling.empty()) {
    if (!w.contains("dataset") || !w["dataset"].contains("entries"))
      throw Error("--dataset-sampling", "", "needs --dataset-entries N (or a scenario workload.dataset): without a dataset every prompt is distinct");
    w["dataset"]["sampling"] = o.dataset_sampling;
  }
  // The embedded scenario's 32 clients with a smaller --requests: fewer clients, and the header
  // says so (a --concurrency the user gave is checked by the parser instead).
  if (o.scenario.empty() && o.concurrency.empty() && o.request_rate.empty() && o.requests && *o.requests >= 1 &&
      w.contains("concurrency") && w["concurrency"].is_number_integer()) {   // below 1: --requests is refused below
    const std::int64_t warm = w.value("warmup_requests", std::int64_t{0});
    if (w["concurrency"].get<std::int64_t>() > *o.requests + warm) {
      w["concurrency"] = *o.requests + warm;
      const std::string note = "concurrency " + std::to_string(*o.requests + warm) +
                               " (the embedded scenario's clients, capped at the requests)";
      defaults_note = defaults_note.empty() ? "defaults: " + note : defaults_note + "; " + note;
    }
  }
  const bool session_flags = o.turns || o.think_time_s || o.start_spread_s || o.turn_isl || o.session_block_tokens;
  if (o.sessions || !o.session_trace.empty()) {   // the workload becomes {"sessions": {...}, "seed"}
    if (!o.concurrency.empty() || !o.request_rate.empty() || o.requests || o.warmup || o.dataset_entries)
      throw Error("--sessions", "", "sessions are their own closed loops: leave out --concurrency, --request-rate, --requests, "
                                    "--warmup-requests and --dataset-entries");
    nlohmann::json ss = nlohmann::json::object();
    if (!o.session_trace.empty()) {
      if (o.sessions || o.turns || o.think_time_s || o.turn_isl || o.shared_prefix_tokens || o.isl || o.osl)
        throw Error("--session-trace", "", "the trace gives every turn: leave out --sessions, --turns, --think-time-s, --isl, --osl");
      ss["file"] = std::filesystem::absolute(o.session_trace).string();
    } else {
      ss["count"] = *o.sessions;
      ss["isl"] = w.contains("isl") ? w["isl"] : nlohmann::json(1024);
      ss["osl"] = w.contains("osl") ? w["osl"] : nlohmann::json(256);
      if (o.turns) ss["turns"] = *o.turns;
      if (o.think_time_s) ss["think_time_s"] = *o.think_time_s;
      if (o.start_spread_s) ss["start_spread_s"] = *o.start_spread_s;
      if (o.turn_isl) ss["turn_isl"] = *o.turn_isl;
      if (o.shared_prefix_tokens) ss["shared_prefix_tokens"] = *o.shared_prefix_tokens;
    }
    if (o.session_block_tokens) ss["block_tokens"] = *o.session_block_tokens;
    nlohmann::json nw = {{"sessions", ss}};
    if (w.contains("seed")) nw["seed"] = w["seed"];
    w = nw;
  } else if (session_flags) {
    throw Error("--turns", "", "session flags need --sessions N (or --session-trace FILE)");
  } else if (o.shared_prefix_tokens) {
    w["shared_prefix_tokens"] = *o.shared_prefix_tokens;   // every synthetic prompt starts with it
  }
  (void)sweep;
  // The embedded scenario's description names its own model and layout: once flags override
  // them, the run's record (input_config, --export) describes what actually ran.
  if (o.scenario.empty() && j.value("description", std::string()).rfind("Default servesim", 0) == 0) {
    auto val = [&](const nlohmann::json& x, const char* k) {
      // A length distribution stands for its mean.
      const nlohmann::json v = !x.contains(k) ? nlohmann::json("?") : x[k].is_object() ? x[k].value("mean", nlohmann::json("?")) : x[k];
      return v.is_string() ? v.get<std::string>() : v.is_number_float() ? compact(v.get<double>()) : v.dump();
    };
    const nlohmann::json wl = j.value("workload", nlohmann::json::object());
    j["description"] = "Default servesim scenario with command-line flags applied: " + val(j, "model") + " on " + val(j, "gpus") +
                       " x " + val(j, "gpu") + ", " +
                       (wl.contains("request_rate") ? val(wl, "request_rate") + " requests/s open loop"
                                                    : val(wl, "concurrency") + " closed-loop clients") +
                       ", ISL " + val(wl, "isl") + ", OSL " + val(wl, "osl");
  }
  const std::string source = o.scenario.empty() ? "command line" : o.scenario;
  try {
    return sim::parse_scenario(j.dump(), source);
  } catch (const Error& e) {
    // A field the user gave as a flag is named as that flag ("--requests: must be >= 1", not
    // "command line: workload.requests: ..."), whether or not a scenario file is the base.
    static const std::pair<const char*, const char*> flags[] = {
        {"workload.isl", "--isl"}, {"workload.osl", "--osl"}, {"workload.concurrency", "--concurrency"},
        {"workload.request_rate", "--request-rate"}, {"workload.requests", "--requests"},
        {"workload.warmup_requests", "--warmup-requests"}, {"workload.burstiness", "--burstiness"}, {"seed", "--seed"},
        {"workload.warmup_until_steady", "--warmup-until-steady"}};
    const bool given[] = {bool(o.isl), bool(o.osl), !o.concurrency.empty(), !o.request_rate.empty(), bool(o.requests),
                          bool(o.warmup), bool(o.burstiness), bool(o.seed), o.warmup_until_steady};
    const std::string field = e.where() == source ? e.field() : "";
    for (std::size_t i = 0; i < std::size(flags); ++i)
      if (given[i] && (field == flags[i].first || field.rfind(std::string(flags[i].first) + ".", 0) == 0))
        throw Error(flags[i].second, "", e.reason());
    throw;
  }
}

std::string ms(double v) { return std::isfinite(v) ? fixed(v, 2) : "-"; }

// The prediction bands of a run's TTFT, ITL and output throughput, one line each.
std::string band_lines(const sim::Scenario& s, const sim::SimResult& r) {
  namespace v = sim::validate;
  const v::RunKind k = v::run_kind(s, r);
  const sim::Summary& m = r.summary;
  const std::string kind = k.gpu + " " + k.engine + (k.mode == "disagg" ? " disaggregated" : "");
  const v::BandTable& table = v::run_band_table(s, r, k);   // a calibrated run's own, as its JSON carries
  const v::Band any = v::band_for(table, k.gpu, k.engine, k.mode, "ttft", k.regime, m.ttft_ms.avg);
  if (!any.present && !v::band_for(table, k.gpu, k.engine, k.mode, "itl", k.regime, m.itl_ms.avg).present)
    return "prediction bands: none for " + kind + " at " + k.regime + " load (" + any.note + ")\n";
  std::string out = "prediction bands: " + kind + ", " + k.regime + " load (" + fixed(k.clients_per_replica, 1) +
                    (k.mode == "disagg" ? " clients per decode worker" : " clients per replica") +
                    "); " + v::run_band_legend(s, r) + "\n";
  auto line = [&](const char* label, const char* metric, const char* unit, std::initializer_list<std::pair<const char*, double>> vals) {
    std::string l = std::string("  ") + label;
    for (const auto& [stat, value] : vals) {
      const v::Band b = v::band_for(table, k.gpu, k.engine, k.mode, metric, k.regime, value);
      if (!b.present) return out += l + ": " + b.note + "\n", void();
      l += (*stat ? std::string(" ") + stat : std::string()) + " " + fixed(value, 2) + " " + unit + " " + v::band_text(b, 2);
      if (std::string(stat) != "avg" || vals.size() == 1)
        l += ", " + std::to_string(b.n) + " runs" + (b.all_gpus ? " of all loads and GPUs" : b.regime == "all" ? " of all loads" : "");
    }
    out += l + "\n";
  };
  line("time_to_first_token", "ttft", "ms", {{"avg", m.ttft_ms.avg}, {"p50", m.ttft_ms.p50}});
  line("inter_token_latency", "itl", "ms", {{"avg", m.itl_ms.avg}, {"p50", m.itl_ms.p50}});
  line("output_token_throughput", "output_tps", "tokens/sec", {{"", m.output_token_throughput_per_s}});
  return out;
}

// The prefix cache's hit rate overall and per replica, what the KV router expected, and what a
// hybrid model's large block means for hits.
std::string prefix_cache_lines(const sim::Scenario& s, const sim::SimResult& r) {
  std::string out = std::string("prefix cache             ") + fixed(100 * r.prefix_hit_fraction(), 1) +
                    "% of admitted prompt tokens were served from the prefix cache";
  if (r.workers.size() > 1) {
    out += " (per replica:";
    for (const auto& w : r.workers)
      out += " " + fixed(w.prompt_tokens > 0 ? 100.0 * double(w.prompt_tokens_cached) / double(w.prompt_tokens) : 0.0, 1) + "%";
    out += ")";
  }
  out += "\n";
  if (!r.engine.enable_prefix_caching)
    out += "  prefix caching is off (vLLM's default for hybrid models): no prompt can hit; --enable-prefix-caching turns it on\n";
  else if (r.plan.block_size > 16)
    out += "  hits come in whole " + std::to_string(r.plan.block_size) +
           "-token blocks (the hybrid model's block, sized to hold a Mamba state page): a shared prefix shorter than that never hits\n";
  if (r.offload.enabled()) {
    std::int64_t tier_hits = 0;
    for (std::size_t t = 0; t < r.offload.tiers.size(); ++t) {
      const auto& c = r.offload.tiers[t];
      const sim::OffloadTierStats x = t < r.offload_stats.size() ? r.offload_stats[t] : sim::OffloadTierStats{};
      tier_hits += x.hit_tokens;
      out += "  offload " + c.name + ": " + fixed(c.capacity_bytes / (1024.0 * 1024 * 1024), 0) + " GiB per replica (" +
             std::to_string(x.capacity_blocks) + " blocks in all), " + fixed(c.bytes_per_s / 1e9, 1) + " GB/s + " +
             fixed(1e6 * c.latency_s, 1) + " us per transfer per GPU; " + std::to_string(x.stored_blocks) + " blocks stored, " +
             fixed(r.prompt_tokens > 0 ? 100.0 * double(x.hit_tokens) / double(r.prompt_tokens) : 0.0, 1) +
             "% of prompt tokens onboarded from it (" + human_bytes(x.bytes_onboarded) + " per GPU, " + fixed(x.seconds, 3) + " s" +
             (r.offload.overlap ? ", overlapped with compute)" : ", added to the steps)") + "\n";
    }
    out += "  GPU prefix cache: " + fixed(r.prompt_tokens > 0 ? 100.0 * double(r.prompt_tokens_cached - tier_hits) / double(r.prompt_tokens) : 0.0, 1) +
           "% of prompt tokens\n";
  }
  if (s.router == sim::RouterPolicy::kv && r.routed_blocks > 0)
    out += "  kv router: expected " + fixed(100.0 * double(r.routed_overlap_blocks) / double(r.routed_blocks), 1) +
           "% of routed prompt blocks cached where it sent them (overlap_score_weight " + compact(s.kv_router.overlap_score_weight) +
           ", router_temperature " + compact(s.kv_router.router_temperature) + ", KV events " +
           compact(1e3 * s.kv_router.kv_event_delay_s) + " ms late)" +
           (r.offload.enabled() ? ", and " + fixed(100.0 * double(r.routed_offload_blocks) / double(r.routed_blocks), 1) +
                                      "% in its offload tiers" + (s.kv_router.offload_aware ? "" : " (unseen: offload_aware false)")
                                : std::string()) +
           "\n";
  return out;
}

std::string turn_table(const sim::SimResult& r) {
  Table t({"turn", "requests", "prompt tokens", "prefix hit", "TTFT p50 ms", "TTFT p90 ms", "ITL p50 ms"});
  for (const auto& x : r.turns)
    t.add_row({std::to_string(x.turn + 1), std::to_string(x.requests), fixed(x.prompt_tokens_avg, 0),
               fixed(100 * x.hit_fraction(), 1) + "%", ms(x.ttft_ms.p50), ms(x.ttft_ms.p90), ms(x.itl_ms.p50)});
  return "per turn of the sessions:\n" + t.render();
}

// A closed loop with more clients a replica (its attention-DP ranks together) than the KV cache or max_num_seqs
// holds whole requests of the workload's mean length: who waits, what TTFT then measures, and the
// levers. TensorRT-LLM reserves each request's whole sequence, so the rest always queue; vLLM and
// SGLang admit on the prompt and preempt (retract) when decodes fill the cache, said when they did.
// `ran`: what_ran_json's document (its memory figures and KV dtype). Empty when every client's request fits.
std::string capacity_line(const sim::Scenario& s, const sim::SimResult& r, const nlohmann::json& ran) {
  if (r.disaggregated || !r.deployment.empty() || s.workload.arrival != workloads::Arrival::concurrency ||
      s.workload.concurrency <= 0 || !ran.contains("memory"))
    return {};
  const nlohmann::json& memory = ran["memory"];
  const int held = memory["max_concurrent_seqs"].get<int>();
  const int replicas = std::max(1, s.replicas());   // the plan's whole requests count every attention-DP rank of a replica
  const std::int64_t per = (s.workload.concurrency + replicas - 1) / replicas;
  if (held <= 0 || per <= held) return {};
  std::int64_t preempted = 0;
  for (const auto& w : r.workers) preempted += w.preemptions;
  const std::string where = std::to_string(per) + " clients per replica";
  const std::string waits = std::to_string(per - held);
  if (memory.value("bound", std::string()) == "max_num_seqs")
    return "capacity                 " + where + ", max_num_seqs " + std::to_string(held) + ": the other " + waits +
           " queue for a seat until a request finishes, and TTFT holds that wait (raise max_num_seqs, or more replicas)\n";
  std::string how;
  switch (r.engine.kind) {
    case sim::EngineKind::trtllm:
      how = "TensorRT-LLM reserves a request's whole sequence, so the other " + waits + " queue until one finishes";
      break;
    case sim::EngineKind::vllm:
    case sim::EngineKind::sglang:
      if (preempted == 0) return {};
      how = std::string(r.engine.kind == sim::EngineKind::vllm ? "vLLM preempted" : "SGLang retracted") + " running requests " +
            std::to_string(preempted) + " times when decodes filled the cache (their prompts computed again)";
      break;
  }
  return "capacity                 " + where + ", where the KV cache holds " + std::to_string(held) + " whole requests of " +
         std::to_string(memory["context_tokens"].get<std::int64_t>()) + " tokens: " + how +
         ", and TTFT holds that wait. More room: more GPUs per replica (--tp), " +
         (ran.value("kv_cache_dtype", std::string()).find("fp") != std::string::npos ? std::string() : "an FP8 KV cache (--kv-cache-dtype fp8), ") +
         "or fewer clients per replica\n";
}

std::string summary_text(const sim::Scenario& s, const sim::SimResult& r) {
  const sim::Summary& m = r.summary;
  std::string out;
  if (!r.deployment.empty())
    out = "servesim simulate: " + s.model + " (" + std::string(hw::to_string(s.precision)) + "), " + r.deployment +
          ", router " + std::string(sim::to_string(s.router)) + "\n";
  else
    out = "servesim simulate: " + s.model + " on " + std::to_string(s.gpus) + " x " + s.gpu + " (" +
          std::to_string(s.replicas()) + " replica(s) of " + s.par.label() +
          ", " + std::string(hw::to_string(s.precision)) + "), router " + std::string(sim::to_string(s.router)) + "\n";
  if (!defaults_note.empty()) out += "(" + defaults_note + ")\n";
  else if (s.source == "command line" && s.json.value("description", std::string()).rfind("Default servesim", 0) == 0)
    out += "(the embedded default scenario, flags applied; --model picks the rest for your model)\n";
  // What of a user calibration applies to this run (its header line; the disaggregated path's factor).
  std::optional<sim::AppliedCalibration> applied;
  if (s.calibration) applied = sim::applicable(*s.calibration, sim::validate::run_kind(s, r).gpu, r.engine.engine_profile, s.model,
                                                  std::string(hw::to_string(s.precision)));
  if (r.disaggregated) {
    const auto& t = r.transfers;
    out += "KV + state handoffs: " + std::to_string(t.handoffs) + ", " + human_bytes(t.bytes) + " in all, " +
           (t.handoffs > 0 ? fixed(1e3 * t.seconds / double(t.handoffs), 3) : std::string("-")) + " ms mean, " +
           fixed(1e3 * t.max_seconds, 3) + " ms max, " + std::to_string(t.max_in_flight) + " in flight at most\n";
    const workloads::FrontendConfig f = sim::resolved_frontend(s);
    const double scale = applied ? applied->handoff_scale : 1;   // a user calibration's factor on the profile's path
    if (f.enabled && (f.disagg.handoff.mean_s > 0 || f.disagg.pull_s_per_token > 0))
      out += "prefill -> decode path: " + fixed(1e3 * f.disagg.handoff.mean_s, 1) + " ms (cv " + compact(f.disagg.handoff.cv) +
             ") per request from the prefill's end to its decode worker, and " + compact(1e6 * f.disagg.pull_s_per_token) +
             " us per prompt token on the KV pull (in the handoffs above): fitted to measured disaggregated runs "
             "(frontend.disaggregation; README, Validation)" +
             (scale != 1 ? ", x" + compact(scale) + " by the calibration's handoff_scale" : std::string()) + "\n";
    out += sim::ttft_parts_text(t.ttft);
  }
  if (applied) out += applied->summary + "\n";
  const nlohmann::json ran = sim::what_ran_json(s, r);
  out += sim::what_ran_text(ran);
  {
    const sim::EngineConfig& e = r.engine;
    if (e.response_preamble_tokens > 0)
      out += "answers stream " + std::to_string(e.response_preamble_tokens) +
             " format tokens before any text (gpt-oss harmony: <|channel|>analysis<|message|>): TTFT is the first "
             "visible token's, output lengths count visible tokens\n";
    if (sim::spreads_closed_loop(s.workload, e))
      out += "closed loop: fixed answer lengths spread by " +
             fixed(sim::closed_loop_osl_sd(e, s.workload.concurrency, s.workload.osl.mean), 1) + " tokens (sd" +
             (e.closed_loop_osl_spread_load_exponent != 0 || e.closed_loop_osl_spread_length_exponent > 0
                  ? " = " + sim::closed_loop_osl_sd_formula(e.closed_loop_osl_spread_tokens, e.closed_loop_osl_spread_load_exponent,
                                                            e.closed_loop_osl_spread_length_exponent,
                                                            std::to_string(s.workload.concurrency), compact(s.workload.osl.mean))
                  : std::string()) +
             "), the " + e.engine_profile +
             " profile's stand-in for what keeps measured clients out of lockstep (engine.closed_loop_osl_spread_tokens 0: "
             "fixed)\n";
  }
  out += std::string(r.disaggregated ? "KV blocks per decode worker: " : "KV blocks per replica: ") + std::to_string(r.kv_blocks) + " x " + std::to_string(r.plan.block_size) +
         " tokens" + sim::hybrid_block_note(r.plan.kv.requested_block_size, r.plan.block_size) + "; requests measured: " + std::to_string(m.request_count) + " (warm-up " +
         std::to_string(m.warmup_request_count) + "); " + fixed(m.duration_s, 2) + " s of simulated serving\n\n";
  Table t({"metric", "unit", "avg", "min", "p50", "p90", "p99", "max"});
  auto row = [&](const char* name, const char* unit, const sim::Stats& x) {
    t.add_row({name, unit, ms(x.avg), ms(x.min), ms(x.p50), ms(x.p90), ms(x.p99), ms(x.max)});
  };
  row("time_to_first_token", "ms", m.ttft_ms);
  row("time_to_second_token", "ms", m.ttst_ms);
  row("inter_token_latency", "ms", m.itl_ms);
  row("token_gap", "ms", m.token_gap_ms);
  row("request_latency", "ms", m.request_latency_ms);
  row("output_token_throughput_per_user", "tokens/sec/user", m.output_token_throughput_per_user);
  row("input_sequence_length", "tokens", m.input_sequence_length);
  row("output_sequence_length", "tokens", m.output_sequence_length);
  out += t.render();
  // The stalls the per-request mean hides: said when the gaps' tail is well above their median (a
  // plain decode step; with MTP a step's chunk of tokens), where ITL averages it away.
  if (m.token_gap_ms.count > 0 && m.token_gap_ms.p99 > 2 * m.token_gap_ms.p50)
    out += "token_gap p99 " + fixed(m.token_gap_ms.p99, 1) + " ms is " + fixed(m.token_gap_ms.p99 / m.token_gap_ms.p50, 1) +
           "x its median: prompts' prefill steps stall the decodes that share or wait out their steps (a reader of the "
           "stream sees the pause; ITL, each request's mean gap, hides it). Prefill on workers of its own or smaller "
           "chunks (--max-num-batched-tokens) shorten it; plan, search and recommend take --gap-ms as an SLO\n";
  // A request's vision tokens enter the model with its prompt: input_sequence_length counts both (as
  // aiperf counts what the server reports), so it reads above --isl on requests with images.
  if (!s.workload.multimodal.empty())
    if (const std::int64_t v = workloads::vision_work(s.workload.multimodal).tokens; v > 0)
      out += "input_sequence_length: the prompt's text tokens + " + std::to_string(v) + " vision tokens on a request with images" +
             (s.workload.multimodal.fraction < 1 ? " (" + fixed(100 * s.workload.multimodal.fraction, 0) + " % of requests)" : std::string()) +
             "\n";
  out += "\n";
  out += "request_throughput       " + fixed(m.request_throughput_per_s, 3) + " requests/sec\n";
  if (s.workload.arrival != workloads::Arrival::concurrency && s.workload.rate_per_s > 0 && m.load_window_s > 0)
    out += "  open loop: offered " + compact(s.workload.rate_per_s) + " requests/sec; request_throughput (aiperf's: requests / "
           "(last answer - first send)) counts the ramp-up and the drain; served in the later half of the sends (" +
           fixed(m.load_window_s, 1) + " s from " + fixed(m.load_from_s, 1) + " s after the first): " + fixed(sim::served_rps(m), 3) +
           " requests/sec, " + fixed(double(m.load_answered_tokens) / m.load_window_s, 1) + " tokens/sec\n";
  if (s.workload.arrival != workloads::Arrival::concurrency && s.workload.rate_per_s > 0)
    if (const std::string l = sim::overload_line(m, s.workload.rate_per_s); !l.empty()) out += l + "\n";
  out += "output_token_throughput  " + fixed(m.output_token_throughput_per_s, 1) + " tokens/sec (" +
         fixed(m.output_token_throughput_per_s / std::max(1, r.gpus), 1) + " per GPU)\n";
  // Past a warm-up that runs on into the measured requests every measured send answers a finished
  // request, so the sends' rate is the loop's; without a warm-up, or behind aiperf's phase barrier,
  // the first round's sends all start at once and the rate reads low.
  if (s.workload.arrival == workloads::Arrival::concurrency && m.steady_output_tps > 0 && m.warmup_request_count > 0 &&
      !sim::resolved_frontend(s).client.warmup_barrier)
    out += "  closed loop: aiperf's window (first send to last answer) holds the warm-up's requests in flight and the drain; "
           "steady (measured sends' rate x mean answer), the figure plan, search and recommend read: " +
           fixed(m.steady_output_tps, 1) + " tokens/sec (" + fixed(m.steady_output_tps / std::max(1, r.gpus), 1) + " per GPU)\n";
  // Little's law: requests in flight on average; a closed loop keeps at most its clients in flight.
  out += "little's law check       request_throughput x mean request_latency = " +
         fixed(m.request_throughput_per_s * m.request_latency_ms.avg / 1e3, 2) + " requests in flight on average" +
         (s.workload.arrival == workloads::Arrival::concurrency && s.workload.concurrency > 0 ? " (closed loop: at most its " + std::to_string(s.workload.concurrency) + " clients)"
                                                                : std::string()) + "\n";
  if (r.prefill_tokens > 0)
    out += std::string("cohorts                  ") + fixed(100 * r.cohort_fraction(), 1) +
           "% of prefill tokens shared a step with requests released together" +
           (r.cohort_locked() ? ": COHORT-LOCKED (clients move in lockstep; TTFT is one shared prefill, see sim/README.md)" : "") + "\n";
  const std::string capacity = capacity_line(s, r, ran);
  if (r.prompts > 0)
    out += std::string("prefill queue            ") + fixed(100 * r.behind_prefill_fraction(), 1) +
           "% of prompts waited while another prompt's prefill ran (steps with prefill: " +
           fixed(100 * r.prefill_duty(), 1) + "% of the time)" +
           (r.prefill_train() && !r.cohort_locked() && capacity.empty() ? ": PREFILL TRAIN (each round's prompts queue behind each other's prefill; measured "
                                "closed loops at light load often wait less, see README)"
                              : "") + "\n";
  out += capacity;
  if (r.prompt_tokens_cached > 0 || s.router == sim::RouterPolicy::kv || !r.turns.empty() || r.offload.enabled())
    out += prefix_cache_lines(s, r);
  out += band_lines(s, r) + "\n";
  Table reps({"replica", "steps", "busy", "mean batch", "max batch", "mean KV", "max KV", "preemptions"});
  for (std::size_t i = 0; i < m.replicas.size(); ++i) {
    const auto& x = m.replicas[i];
    const std::int64_t pre = i < r.workers.size() ? r.workers[i].preemptions : 0;
    reps.add_row({x.name, std::to_string(x.steps), fixed(100 * x.busy_fraction, 1) + "%", fixed(x.mean_batch_size, 1),
                  std::to_string(x.max_batch_size), fixed(100 * x.mean_kv_utilization, 1) + "%",
                  fixed(100 * x.max_kv_utilization, 1) + "%", std::to_string(pre)});
  }
  out += reps.render();
  if (!r.turns.empty()) out += "\n" + turn_table(r);
  return out;
}

// --seeds N: the scenario under seeds s, s+1, ..., s+N-1 (in parallel); the spread of the
// headline figures across seeds says whether a result hinges on the seed.
void run_seeds(const SimOpts& o, const sim::Scenario& s) {
  const int n = *o.seeds;
  if (n < 1 || n > 10000) throw Error("--seeds", "", "must be 1..10000 runs");
  const sim::Prepared p = sim::prepare(s);
  std::vector<std::optional<sim::SimResult>> out(static_cast<std::size_t>(n));
  // Boost.Asio workers (sim/parallel.hpp): a thread that cannot start is one error line.
  sim::parallel_for(n, 0, [&](int i) {
    workloads::WorkloadConfig w = s.workload;
    w.seed = s.workload.seed + std::uint64_t(i);
    out[static_cast<std::size_t>(i)].emplace(sim::simulate(p, s, w));
  }, "--seeds");
  struct Col { const char* name; std::function<double(const sim::SimResult&)> get; };
  const std::vector<Col> cols{
      {"time_to_first_token_ms_p50", [](const sim::SimResult& r) { return r.summary.ttft_ms.p50; }},
      {"time_to_first_token_ms_p90", [](const sim::SimResult& r) { return r.summary.ttft_ms.p90; }},
      {"inter_token_latency_ms_p50", [](const sim::SimResult& r) { return r.summary.itl_ms.p50; }},
      {"output_token_throughput", [](const sim::SimResult& r) { return r.summary.output_token_throughput_per_s; }},
      {"cohort_fraction", [](const sim::SimResult& r) { return r.cohort_fraction(); }},
      {"behind_prefill_fraction", [](const sim::SimResult& r) { return r.behind_prefill_fraction(); }}};
  nlohmann::json j;
  j["seeds"] = {{"first", s.workload.seed}, {"count", n}};
  Table t({"metric (across seeds)", "min", "p10", "p50", "p90", "max"});
  for (const auto& c : cols) {
    std::vector<double> v;
    for (const auto& r : out) v.push_back(c.get(*r));
    nlohmann::json per = v;
    const sim::Stats st = sim::compute_stats(v);
    j["metrics"][c.name] = {{"per_seed", per}, {"min", st.min}, {"p10", st.p10}, {"p50", st.p50}, {"p90", st.p90}, {"max", st.max}};
    const int d = std::string(c.name).ends_with("_fraction") ? 3 : 2;
    t.add_row({c.name, fixed(st.min, d), fixed(st.p10, d), fixed(st.p50, d), fixed(st.p90, d), fixed(st.max, d)});
  }
  int locked = 0, trains = 0;
  for (const auto& r : out) {
    locked += r->cohort_locked() ? 1 : 0;
    trains += r->prefill_train() ? 1 : 0;
  }
  j["cohort_locked_runs"] = locked;
  j["prefill_train_runs"] = trains;
  std::string text = "servesim simulate: " + s.model + " on " + s.gpu + ", " + std::to_string(n) + " seeds from " +
                     std::to_string(s.workload.seed) + " (engine " + out[0]->engine.engine_profile + ")\n\n" + t.render() +
                     "\ncohort-locked runs: " + std::to_string(locked) + " of " + std::to_string(n) +
                     "; prefill-train runs: " + std::to_string(trains) + " of " + std::to_string(n) + "\n";
  emit(o.format, j, text);
}

// Memory the run's KV block tables take before any request: with prefix caching every replica
// or worker keeps about 40 bytes per block of its GPUs' cache (block identities, the free list,
// the hash index), whatever the load. Refused up front when that passes half of what this
// process may use (the address-space limit or the machine's memory), naming what drives it.
void check_block_memory(const sim::Scenario& s) {
  const sim::Prepared p = sim::prepare(s);
  if (!p.engine.enable_prefix_caching) return;
  const int per_worker = std::max(1, s.par.tp * s.par.pp * s.par.dp);
  const double workers = p.deployment ? std::max(1.0, double(p.deployment->gpus()) / per_worker) : double(std::max(1, p.replicas));
  const double blocks_each =
      p.deployment ? double(p.deployment->kv_blocks()) : double(p.plan.num_kv_blocks) * p.plan.dp;
  const double need = workers * blocks_each * 40.0;
  double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) have = std::min(have, double(lim.rlim_cur));
  if (have > 0 && need > 0.5 * have)
    throw Error(p.deployment ? "--replicas" : "--gpus", "",
                "the KV block tables of " + fixed(workers, 0) + " replicas or workers (" + fixed(blocks_each, 0) +
                    " blocks each, about 40 bytes a block) need about " + fixed(need / 1e9, 1) + " GB, more than half of the " +
                    fixed(have / 1e9, 1) + " GB this process may use; give fewer replicas, a smaller "
                    "--gpu-memory-utilization, or engine.enable_prefix_caching false");
}

void run_simulate(const SimOpts& o) {
  if (o.concurrency.find(',') != std::string::npos || o.request_rate.find(',') != std::string::npos)
    throw Error(o.concurrency.find(',') != std::string::npos ? "--concurrency" : "--request-rate", "",
                "simulate takes one value; use `servesim sweep` for a list");
  memory_hint = "--requests, and the replicas or workers (each holds a KV block table of its GPUs' cache); give fewer";
  const sim::Scenario s = build_scenario(o, false);
  check_block_memory(s);
  if (o.seeds) {
    if (!o.export_dir.empty()) throw Error("--seeds", "", "cannot be combined with --export");
    run_seeds(o, s);
    return;
  }
  // The bar appears only for runs long enough to finish 16384 requests.
  sim::SimResult r = sim::simulate(s, !o.export_dir.empty(), progress_bar(o.quiet, "requests"));
  if (!o.export_dir.empty()) r.metrics.export_dir(o.export_dir);
  emit(o.format, sim::aiperf_json(s, r), summary_text(s, r));
}

// What the sweep table's less obvious columns hold (a user could not tell busy, batch and KV apart
// from a mean, a peak or a whole-fleet figure).
std::string sweep_columns_legend(bool disagg) {
  return std::string("tok/s/user: mean over requests of 1 / ITL, (OSL - 1) / (latency - TTFT) (aiperf's); gap p99: the 99th "
                     "percentile of the gaps between a request's streamed tokens from its second on, over every request (ITL is "
                     "each request's mean gap: a prompt's prefill stalls the decodes that share or wait out its step, which the "
                     "mean hides); busy: share of the run a "
                     "replica was running steps; batch: sequences in a step, KV: share of the replica's KV cache in use, both "
                     "time-weighted over its running steps; busy, batch and KV are means over the replicas") +
         (disagg ? " (decode and prefill workers alike); xfer avg / max ms: a request's KV handoff from its prefill to its decode "
                   "worker; TTFT avg parts ms: the mean TTFT as queue + prefill + handoff (the framework's way from the "
                   "prefill's end to the decode worker) + wait for decode KV room + KV transfer + first decode step "
                   "(ttft_*_ms_avg in --format csv/json)\n"
                 : "\n");
}

// The flags given to `app` as tokens ("--isl", "4000", "--no-frontend", ...), in declaration order,
// leaving out the options in `skip`.
std::vector<std::string> given_tokens(const CLI::App& app, const std::vector<const CLI::Option*>& skip) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || std::find(skip.begin(), skip.end(), opt) != skip.end()) continue;
    const std::string name = !opt->get_lnames().empty() ? "--" + opt->get_lnames().front() : "-" + opt->get_snames().front();
    if (opt->get_expected_min() == 0) {
      for (std::size_t i = 0; i < opt->count(); ++i) out.push_back(name);
    } else {
      for (const auto& v : opt->results()) out.insert(out.end(), {name, v});
    }
  }
  return out;
}

// A --vs value as tokens: blanks split them, double quotes hold a value with blanks.
std::vector<std::string> vs_tokens(const std::string& flags) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (char ch : flags) {
    if (ch == '"') quoted = !quoted, any = true;
    else if (!quoted && std::isspace(static_cast<unsigned char>(ch))) {
      if (any) out.push_back(cur);
      cur.clear(), any = false;
    } else {
      cur += ch, any = true;
    }
  }
  if (quoted) throw Error("--vs", "", "'" + flags + "': a double quote is not closed");
  if (any) out.push_back(cur);
  if (out.empty()) throw Error("--vs", "", "is empty; give the flags the variant changes, e.g. --vs \"--precision nvfp4 --gpus 4\"");
  return out;
}

// The sweep's own options, not a scenario's: its output (left out of a variant's flags) and the
// swept list (kept: every scenario runs over the base's). A --vs may name none of them.
constexpr const char* kSweepOutput[] = {"--vs", "--plot", "--output", "--format", "--threads", "--quiet", "--help"};
constexpr const char* kSweepList[] = {"--concurrency", "--request-rate"};

// The variant a --vs gives: the sweep's own flags (`app`), those the variant names replaced by its
// values, parsed as a sweep is and built into a scenario. The swept list and the sweep's output
// options stay the base's.
sim::Scenario variant_scenario(const CLI::App& app, const std::string& flags) {
  const std::vector<std::string> mine = vs_tokens(flags);
  std::vector<const CLI::Option*> replaced;
  for (const auto& t0 : mine) {
    if (t0.size() < 2 || t0[0] != '-' || std::isdigit(static_cast<unsigned char>(t0[1])) || t0[1] == '.') continue;   // a value
    const std::string t = t0.substr(0, t0.find('='));
    const CLI::Option* opt = app.get_option_no_throw(t);
    if (!opt) throw Error("--vs", "", "'" + flags + "': " + t + " is not a flag of servesim sweep (servesim sweep --help)");
    const auto own = [&](const char* name) { return opt == app.get_option_no_throw(name); };
    if (std::any_of(std::begin(kSweepOutput), std::end(kSweepOutput), own) || std::any_of(std::begin(kSweepList), std::end(kSweepList), own))
      throw Error("--vs", "", "'" + flags + "': " + t + " is the sweep's own, shared by every scenario; give it outside --vs");
    replaced.push_back(opt);
  }
  for (const char* own : kSweepOutput)
    if (const CLI::Option* opt = app.get_option_no_throw(own)) replaced.push_back(opt);
  std::vector<std::string> tokens = given_tokens(app, replaced);
  tokens.insert(tokens.end(), mine.begin(), mine.end());
  CLI::App va("variant");
  SimOpts vo;
  add_scenario_options(va, vo, true);
  std::vector<std::string> reversed(tokens.rbegin(), tokens.rend());   // CLI11 takes the arguments last first
  try {
    va.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw Error("--vs", "", "'" + flags + "': " + std::string(e.what()));
  }
  try {
    return build_scenario(vo, true);
  } catch (const Error& e) {
    throw Error("--vs", "", "'" + flags + "': " + e.where() + (e.field().empty() ? "" : "." + e.field()) + ": " + e.reason());
  }
}

void run_sweep(const SimOpts& o, const CLI::App& app) {
  const sim::Scenario s = build_scenario(o, true);
  sim::SweepSpec spec;
  const std::string& list = !o.request_rate.empty() ? o.request_rate : o.concurrency;
  const char* flag = !o.request_rate.empty() ? "--request-rate" : "--concurrency";
  if (list.empty()) throw Error("--concurrency", "", "sweep needs --concurrency LIST or --request-rate LIST");
  spec.axis = !o.request_rate.empty() ? sim::SweepSpec::Axis::request_rate : sim::SweepSpec::Axis::concurrency;
  for (const auto& v : api::option_list(list, flag)) {
    try {
      std::size_t used = 0;
      spec.values.push_back(std::stod(v, &used));
      if (used != v.size() || !std::isfinite(spec.values.back())) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      throw Error(flag, "", "expected a comma-separated list of finite numbers, got '" + v + "'");
    }
  }
  if (spec.values.empty()) throw Error(flag, "", "empty list");
  std::string fmt = text::lower(o.sweep_format);
  if (fmt.empty()) {
    const std::string out = text::lower(o.output);
    auto ends = [&](const char* ext) { return out.size() > std::strlen(ext) && out.compare(out.size() - std::strlen(ext), std::string::npos, ext) == 0; };
    fmt = ends(".csv") ? "csv" : ends(".json") ? "json" : "table";
  }
  if (fmt != "table" && fmt != "csv" && fmt != "json") throw Error("--format", "", "unknown format '" + fmt + "'; known: table, csv, json");
  if (!o.vs.empty()) {   // the what-if: every variant built (and refused) before anything runs
    std::vector<WhatIf> runs{{"base", "", s}};
    for (std::size_t k = 0; k < o.vs.size(); ++k)   // labelled A, B, ..., Z, then v27, ...
      runs.push_back({k < 26 ? std::string(1, char('A' + k)) : "v" + std::to_string(k + 1), o.vs[k], variant_scenario(app, o.vs[k])});
    run_what_if(runs, spec, fmt, o.output, o.plot, o.threads, o.quiet);
    return;
  }
  const PlotPaths charts = plot_paths(o.plot);
  if (!o.plot.empty())   // before the run, so a bad path does not waste it
    for (const auto& f : {charts.chart, charts.base + "-throughput.png", charts.base + "-sweep.json"}) check_writable_target(f, "--plot");
  const auto bar = progress_bar(o.quiet, "points");
  std::function<void(int, int)> progress;
  if (bar) progress = [bar](int done, int total) { bar(done, total); };
  const auto results = sim::sweep(s, spec, o.threads, progress);
  const sim::Columns cols = sim::sweep_columns(spec, results, s.gpus, &s);
  const nlohmann::json ran = sim::what_ran_json(s, results.front());
  const bool disagg = std::find(cols.names.begin(), cols.names.end(), "kv_transfers") != cols.names.end();
  std::string text, table;
  if (fmt == "csv") {
    text = sim::to_csv(cols);
  } else if (fmt == "json") {
    nlohmann::json j = sim::to_json(cols);
    j["what_ran"] = ran;
    j["input_config"] = s.json;   // the scenario as given (flags applied), and the sweep over it
    j["input_config"]["sweep"] = {{"axis", spec.axis == sim::SweepSpec::Axis::concurrency ? "concurrency" : "request_rate"},
                                  {"values", spec.values}};
    text = j.dump(2) + "\n";
  }
  if (fmt == "table" || !o.output.empty()) {   // the terminal gets the table whenever stdout is not the file
    // A rate sweep shows the rate served over the load window, the figure its OVERLOADED lines
    // quote; a concurrency sweep aiperf's request_throughput (a closed loop has no offered rate).
    const bool rate = spec.axis == sim::SweepSpec::Axis::request_rate;
    std::vector<std::string> head{cols.names[0], rate ? "served req/s" : "req/s", "out tok/s", "tok/s/GPU", "tok/s/user", "TTFT p50 ms", "TTFT p90 ms",
                                  "TTFT p99 ms", "ITL p50 ms", "ITL p90 ms", "ITL p99 ms", "gap p99 ms", "busy", "batch", "KV"};
    if (disagg) head.insert(head.end(), {"xfer avg ms", "xfer max ms", "TTFT avg parts ms"});
    Table t(head);
    for (std::size_t i = 0; i < cols.data[0].size(); ++i) {
      // A value with its prediction band, "120.30 (95.10-160.20)", when one exists.
      auto banded = [&](const std::string& name, int digits) {
        const double v = cols[name][i], lo = cols[name + "_band_lo"][i], hi = cols[name + "_band_hi"][i];
        std::string t = std::isfinite(v) ? fixed(v, digits) : "-";
        if (std::isfinite(lo) && std::isfinite(hi)) t += " (" + fixed(lo, digits) + "-" + fixed(hi, digits) + ")";
        return t;
      };
      std::vector<std::string> row{fixed(cols.data[0][i], cols.names[0] == "concurrency" ? 0 : 2), fixed(cols[rate ? "served_requests_per_s" : "request_throughput"][i], 3),
                 banded("output_token_throughput", 1), fixed(cols["output_token_throughput_per_gpu"][i], 1),
                 ms(cols["output_token_throughput_per_user_avg"][i]), banded("time_to_first_token_ms_p50", 2),
                 ms(cols["time_to_first_token_ms_p90"][i]), ms(cols["time_to_first_token_ms_p99"][i]),
                 banded("inter_token_latency_ms_p50", 2), ms(cols["inter_token_latency_ms_p90"][i]),
                 ms(cols["inter_token_latency_ms_p99"][i]), ms(cols["token_gap_ms_p99"][i]), fixed(100 * cols["busy_fraction"][i], 0) + "%",
                 fixed(cols["mean_batch_size"][i], 1), fixed(100 * cols["mean_kv_utilization"][i], 1) + "%"};
      if (disagg) {
        std::string parts;
        for (const char* p : {"queue", "prefill", "handoff", "reserve_wait", "transfer", "first_decode_step"})
          parts += (parts.empty() ? "" : "+") + fixed(cols[std::string("ttft_") + p + "_ms_avg"][i], 1);
        row.insert(row.end(), {ms(cols["kv_transfer_ms_avg"][i]), ms(cols["kv_transfer_ms_max"][i]), parts});
      }
      t.add_row(row);
    }
    table = sim::what_ran_text(ran) + t.render() + "(a-b): prediction band, " + sim::validate::run_band_legend(s, results.front()) +
                        "; none shown: no measured runs of this kind\n" + sweep_columns_legend(disagg);
    if (rate)
      table += "served req/s: answers per second over the later half of the sends (first send + span / 2 to the last send), the "
              "window the OVERLOADED lines use (aiperf's request_throughput, with the ramp-up and the drain: --output CSV); "
              "out tok/s, tok/s/GPU and tok/s/user are aiperf's, over the whole run: an overloaded rate drains its backlog "
              "after the last send, so its out tok/s can read above served req/s x OSL\n";
    if (rate)
      for (std::size_t i = 0; i < results.size(); ++i)
        if (const std::string l = sim::overload_line(results[i].summary, spec.values[i]); !l.empty()) table += l + "\n";
    if (fmt == "table") text = table;
  }
  if (!o.plot.empty()) {
    const std::string data = charts.base + "-sweep.json";
    write_file_atomic(data, nlohmann::json{{"columns", sim::to_json(cols)}}.dump());
    run_plotter({data, "-o", charts.chart});
    const std::string line = "Charts: " + charts.chart + " (TTFT and ITL), " + charts.base + "-throughput.png; data: " + data + "\n";
    table += line;
    if (fmt == "table") text += line;
  }
  if (o.output.empty()) {
    std::cout << text;
  } else {
    write_file_atomic(o.output, text);
    std::cout << table << "Wrote " << o.output << " (" << fmt << ")\n";
  }
}

}  // namespace

// simulate's scenario flags for other subcommands (cmd_planner.cpp).
struct ScenarioFlags {
  SimOpts o;
};
std::shared_ptr<ScenarioFlags> add_scenario_flags(CLI::App& cmd) {
  auto f = std::make_shared<ScenarioFlags>();
  add_scenario_options(cmd, f->o, false);
  return f;
}
sim::Scenario scenario_from_flags(const ScenarioFlags& f) { return build_scenario(f.o, false); }

void add_simulate_commands(CLI::App& app) {
  auto so = std::make_shared<SimOpts>();
  CLI::App* sim = app.add_subcommand("simulate", "Simulate one serving scenario (aiperf-style report)");
  add_scenario_options(*sim, *so, false);
  add_format_option(*sim, so->format);
  add_quiet_flag(*sim, so->quiet);
  sim->add_option("--export", so->export_dir, "Write profile_export.jsonl, profile_export_aiperf.json and .csv to DIR");
  sim->add_option("--seeds", so->seeds, "Run N seeds (--seed, --seed + 1, ...) and report the spread of TTFT, ITL and throughput");
  sim->callback([so] { run_simulate(*so); });

  auto wo = std::make_shared<SimOpts>();
  CLI::App* sw = app.add_subcommand("sweep", "Run a scenario over a list of concurrencies or request rates in parallel (--vs \"FLAGS\": what if, against variants of it)");
  add_scenario_options(*sw, *wo, true);
  sw->add_option("--format", wo->sweep_format, "Output format: table, csv or json (default: from --output's extension, else table)");
  sw->add_option("--output", wo->output, "Write the results to FILE (.csv or .json: every column; the extension or --format picks the format); the terminal still gets the table");
  sw->add_option("--vs", wo->vs,
                 "What if: a variant of the scenario, the flags it changes in one string (e.g. --vs \"--precision nvfp4 --gpus 4\"; "
                 "repeatable): each runs over the same list, and the table gives its change against the base at every point");
  sw->add_option("--plot", wo->plot, "Write the charts to FILE.png (TTFT and ITL, one curve per scenario) and FILE-throughput.png")
      ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("give a file name") : ""; }, "PATH"));
  add_threads_option(*sw, wo->threads);
  add_quiet_flag(*sw, wo->quiet);
  sw->callback([wo, sw] { run_sweep(*wo, *sw); });
}

}  // namespace servesim::cli
