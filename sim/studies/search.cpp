#include "sim/studies/search.hpp"

#include "sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <numeric>

#include "common/error.hpp"
#include "common/text.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "sim/engine/engine_profile.hpp"

namespace servesim::sim {
namespace {

// Every GPU time inside a bound is the cost model's figure times this margin: the simulator's
// pure-decode steps use a line fitted through the model (checked at a third point), so a bound
// stays a little below anything the simulator can produce.
constexpr double kBoundMargin = 0.9;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Tokens a chat template adds to a prompt, room the emitted engine keeps beyond the simulated
// context (AIConfigurator's benchmark harness gives vLLM ISL + OSL + 1500 for the same reason).
constexpr std::int64_t kChatTemplateMargin = 1500;

std::string shape(const models::Parallelism& p) { return p.label(); }

// `moe_gpus`: the GPUs an MoE layer spans (tp x dp).
std::vector<int> ep_options(const models::ModelSpec& m, int moe_gpus, bool expert_parallel, const std::vector<int>& eps) {
  if (m.experts == 0 || moe_gpus <= 1) return {1};
  if (eps.empty()) return expert_parallel ? std::vector<int>{1, moe_gpus} : std::vector<int>{1};
  std::vector<int> out;
  for (int e : eps)
    if (moe_gpus % e == 0 && m.experts % e == 0 && std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  return out;
}

// Attention data-parallel ranks of an aggregated replica: MoE models only, without PP, with the
// whole tp x dp group inside one node.
std::vector<int> dp_options(const models::ModelSpec& m, const std::vector<int>& dps, int tp, int pp, int node_gpus) {
  std::vector<int> out;
  for (int dp : dps)
    if (dp == 1 || (m.count(models::LayerKind::moe) > 0 && pp == 1 && tp * dp <= node_gpus)) out.push_back(dp);
  return out;
}

// Nodes that workers take on nodes of `per` GPUs, each group {count, GPUs per worker}: a worker
// wider than a node takes whole nodes, the others share nodes (power-of-two widths pack without
// gaps). Closed form: no worker list is ever materialised, whatever the count.
std::int64_t nodes_for(std::initializer_list<std::pair<std::int64_t, int>> groups, int per) {
  std::int64_t whole = 0, small = 0;
  for (auto [count, g] : groups) {
    if (g > per) whole += count * ((g + per - 1) / per);
    else small += count * g;
  }
  return whole + (small + per - 1) / per;
}

models::StepBatch decode_batch(int seqs, std::int64_t context) {
  models::StepBatch b;
  b.decode_seqs = seqs;
  b.decode_context_tokens = std::int64_t(seqs) * context;
  return b;
}

// GPU seconds and steps of prefilling one prompt alone, in chunks of the token budget; the first
// chunk carries the vision tiles (as the scheduler charges them).
struct PrefillAlone { double gpu_s = 0; int steps = 0; };
PrefillAlone prefill_alone(const models::StepCostModel& cm, std::int64_t prompt, std::int64_t budget, int tiles) {
  PrefillAlone r;
  std::int64_t done = 0;
  while (done < prompt) {
    const std::int64_t ch = std::min(prompt - done, std::max<std::int64_t>(1, budget));
    models::StepBatch b;
    b.prefill_seqs = 1;
    b.prefill_tokens = ch;
    b.prefill_attention_pairs = double(ch) * double(done) + double(ch) * double(ch + 1) / 2;
    b.vision_tiles = done == 0 ? tiles : 0;
    r.gpu_s += cm.seconds(b);
    ++r.steps;
    done += ch;
  }
  return r;
}

double opt_or_inf(const std::optional<double>& v) { return v ? *v : kInf; }

}  // namespace

std::string_view to_string(Pruned p) {
  switch (p) {
    case Pruned::no: return "simulated";
    case Pruned::does_not_fit: return "does_not_fit";
    case Pruned::cannot_meet_slo: return "cannot_meet_slo";
    case Pruned::cannot_win: return "cannot_win";
  }
  return "simulated";
}

void SearchGoal::validate() const {
  if (!(ttft_ms > 0)) throw Error("--ttft-ms", "", "must be > 0 (the SLO on time to first token, e.g. 600)");
  if (!(itl_ms > 0)) throw Error("--itl-ms", "", "must be > 0 (the SLO on inter-token latency, e.g. 100)");
  if (!(gap_ms >= 0) || !std::isfinite(gap_ms))
    throw Error("--gap-ms", "", "must be a finite number >= 0 (the SLO on the gap between streamed tokens, e.g. 200; 0: none)");
  if (objective == SearchObjective::total_gpus && !(total_gpus >= 1))
    throw Error("--total-gpus", "", "must be >= 1");
  if (objective == SearchObjective::target_tps && !(target_tps > 0))
    throw Error("--target-tps", "", "must be > 0");
  check_headroom(headroom);
  if (headroom > 0 && objective != SearchObjective::target_tps)
    throw Error("--headroom", "", "sizes a load target: give --target-tps or --target-rps");
}

nlohmann::json SearchConfig::to_json() const {
  nlohmann::json j;
  j["index"] = index;
  j["label"] = label;
  j["family"] = family;
  j["kind"] = disaggregated() ? "disaggregated" : "aggregated";
  j["precision"] = std::string(hw::to_string(precision));
  j["kv_cache_dtype"] = std::string(hw::to_string(kv_dtype));
  j["engine"] = engine;
  j["max_num_seqs"] = max_num_seqs;
  j["max_num_batched_tokens"] = max_num_batched_tokens;
  j["prefix_caching"] = prefix_caching < 0 ? nlohmann::json("default") : nlohmann::json(prefix_caching ? "on" : "off");
  j["num_speculative_tokens"] = speculative_tokens;
  j["gpus"] = gpus;
  j["instance"] = instance->name;
  j["gpu"] = instance->gpu;
  if (disaggregated()) {
    j["decode_instance"] = decode_instance->name;
    j["decode_gpu"] = decode_instance->gpu;
    j["prefill_workers"] = topo.prefill_workers;
    j["decode_workers"] = topo.decode_workers;
    j["prefill_tp"] = topo.prefill.tp;
    j["prefill_ep"] = topo.prefill.ep;
    j["decode_tp"] = topo.decode.tp;
    j["decode_dp"] = topo.decode.dp;
    j["decode_ep"] = topo.decode.ep;
    j["tp"] = nullptr;
    j["pp"] = 1;
    j["ep"] = nullptr;
    j["dp"] = 1;
  } else {
    j["decode_instance"] = nullptr;
    j["decode_gpu"] = nullptr;
    j["prefill_workers"] = 0;
    j["decode_workers"] = 0;
    j["prefill_tp"] = nullptr;
    j["prefill_ep"] = nullptr;
    j["decode_tp"] = nullptr;
    j["decode_dp"] = nullptr;
    j["decode_ep"] = nullptr;
    j["tp"] = topo.agg.tp;
    j["pp"] = topo.agg.pp;
    j["ep"] = topo.agg.ep;
    j["dp"] = topo.agg.dp;
  }
  j["nodes"] = nodes;
  j["decode_nodes"] = decode_nodes;
  j["usd_per_hour_per_copy"] = usd_per_hour ? nlohmann::json(*usd_per_hour) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json SearchBound::to_json() const {
  return {{"fits", fits}, {"reason", reason}, {"ttft_lb_ms", ttft_lb_ms}, {"itl_lb_ms", itl_lb_ms},
          {"tps_ub", tps_ub}, {"tps_ub_slo", tps_ub_slo}, {"prefix_caching", prefix_caching},
          {"block_tokens", block_tokens}};
}

nlohmann::json SearchScore::to_json() const {
  nlohmann::json j;
  j["feasible"] = feasible;
  j["slo_concurrency"] = slo_concurrency;
  j["tps_per_copy"] = tps_per_copy;
  j["tps_per_gpu"] = tps_per_gpu;
  j["tps_per_user"] = tps_per_user;
  j["ttft_ms"] = ttft_ms;
  j["itl_ms"] = itl_ms;
  j["gap_ms"] = gap_ms;
  j["copies"] = copies;
  j["total_gpus"] = gpus;
  j["instances"] = instances;
  j["usd_per_hour"] = usd_per_hour ? nlohmann::json(*usd_per_hour) : nlohmann::json(nullptr);
  j["served_tps"] = served_tps;
  nlohmann::json nb = nlohmann::json::object();
  for (const auto& [k, v] : nodes_by_instance) nb[k] = v;
  j["nodes_by_instance"] = nb;
  j["limited_by"] = std::string(to_string(limited_by));
  j["advice"] = std::string(advice(limited_by, kv_full, gap_only));
  j["prefill_train"] = prefill_train;
  j["kv_full"] = kv_full;
  j["gap_only"] = gap_only;
  j["prefix_cache_hit_rate"] = prefix_hit;
  if (rate_per_copy > 0) j["rate_per_copy"] = rate_per_copy, j["in_flight_per_copy"] = in_flight;
  if (rate_per_copy > 0 || fewer_overloaded) j["one_copy_fewer_overloaded"] = fewer_overloaded;
  if (rate_per_copy > 0) j["fewer_copies"] = fewer_copies;
  return j;
}

// ---- enumeration ---------------------------------------------------------------------------------

Search::Search(SearchSpace space, SearchTraffic traffic, SearchGoal goal, bool prune)
    : space_(std::move(space)), traffic_(std::move(traffic)), goal_(goal), prune_(prune) {
  if (!space_.model) throw Error("--model", "", "required");
  if (space_.instances.empty()) throw Error("--gpu", "", "name at least one GPU or instance type");
  if (traffic_.isl < 1) throw Error("--isl", "", "must be >= 1");
  if (traffic_.osl < 2) throw Error("--osl", "", "must be >= 2 (inter-token latency needs two tokens)");
  if (traffic_.concurrency.empty()) throw Error("--concurrency", "", "is empty");
  for (int c : traffic_.concurrency)
    if (c < 1 || c > 100000) throw Error("--concurrency", "", std::to_string(c) + " is not a client count in 1..100000");
  if (!std::is_sorted(traffic_.concurrency.begin(), traffic_.concurrency.end()) ||
      std::adjacent_find(traffic_.concurrency.begin(), traffic_.concurrency.end()) != traffic_.concurrency.end())
    throw Error("--concurrency", "", "must be increasing");
  if (traffic_.requests && *traffic_.requests < 1) throw Error("--requests", "", "must be >= 1");
  for (int t : space_.tp)
    if (t < 1 || t > 72) throw Error("--tp", "", std::to_string(t) + " is not a tensor-parallel size in 1..72");
  for (int p : space_.pp)
    if (p < 1 || p > 64) throw Error("--pp", "", std::to_string(p) + " is not a pipeline-parallel size in 1..64");
  for (auto [x, y] : space_.pd_ratios)
    if (x < 1 || y < 1 || x > 64 || y > 64) throw Error("--pd-ratios", "", "worker counts must be in 1..64");
  for (int s : space_.max_num_seqs)   // 0: the engine's default
    if (s < 0) throw Error("--max-num-seqs", "", "must be >= 1");
  for (auto b : space_.max_num_batched_tokens)
    if (b != 0 && b < 16) throw Error("--max-num-batched-tokens", "", "must be >= 16");
  if (!space_.aggregated && !space_.disaggregated) throw Error("--topology", "", "nothing to search");
  if (space_.prefix_caching.empty()) throw Error("--prefix-caching", "", "is empty; give on, off or both (on,off)");
  for (int v : space_.prefix_caching)
    if (v < -1 || v > 1) throw Error("--prefix-caching", "", "expected on or off");
  if (std::count(space_.prefix_caching.begin(), space_.prefix_caching.end(), 1) > 0 &&
      space_.model->count(models::LayerKind::sliding_attention) > 0)
    throw Error("--prefix-caching", "", space_.model->name + " has sliding-window layers, whose prefix caching servesim does not "
                                        "model (one full-attention group only); leave --prefix-caching out or give off");
  if (space_.speculative_tokens.empty()) throw Error("--num-speculative-tokens", "", "is empty; give 0 (off) or draft counts, e.g. 0,1,3");
  for (int k : space_.speculative_tokens) {
    if (k < 0 || k > 16) throw Error("--num-speculative-tokens", "", std::to_string(k) + " is not a draft count in 0..16");
    if (k > 0 && space_.model->mtp_layers == 0)
      throw Error("--num-speculative-tokens", "", space_.model->name + " has no MTP layers to draft with; give 0 or leave it out");
  }
  if (const int most = *std::max_element(space_.speculative_tokens.begin(), space_.speculative_tokens.end()); most > 0)
    make_mtp(*space_.model, most, space_.mtp_acceptance, 0, "--mtp-acceptance");   // the acceptance list checked once
  if (traffic_.shared_prefix_tokens < 0 || traffic_.shared_prefix_tokens > traffic_.isl)
    throw Error("--shared-prefix-tokens", "", "must be 0.." + std::to_string(traffic_.isl) + " (at most --isl), got " +
                                                  std::to_string(traffic_.shared_prefix_tokens));
  if (space_.engines.empty()) throw Error("--engine", "", "is empty; give vllm, sglang or trtllm (comma-separated)");
  for (auto& e : space_.engines) e = engine_profile(e, "--engine").name;
  // "vllm,vllm-0.19" or "vllm,vllm" name one build: searched once.
  for (std::size_t i = 1; i < space_.engines.size();)
    if (std::find(space_.engines.begin(), space_.engines.begin() + std::ptrdiff_t(i), space_.engines[i]) != space_.engines.begin() + std::ptrdiff_t(i))
      space_.engines.erase(space_.engines.begin() + std::ptrdiff_t(i));
    else ++i;
  if (!(space_.gpu_memory_utilization < 0) && !(space_.gpu_memory_utilization > 0 && space_.gpu_memory_utilization <= 1))
    throw Error("--gpu-memory-utilization", "", "must be in (0, 1]");
  goal_.validate();
  // What vLLM would refuse at start-up: a request longer than the model's context.
  const models::ModelSpec& m = *space_.model;
  if (m.max_context > 0 && prompt_tokens() + traffic_.osl > m.max_context)
    throw Error("--isl", "", "prompt + output = " + std::to_string(prompt_tokens() + traffic_.osl) + " tokens exceed " + m.name +
                                 "'s context of " + std::to_string(m.max_context) +
                                 " tokens (max_position_embeddings), which vLLM refuses; give a smaller --isl or --osl");
  // A TP size no GPU type given can hold (one TP group per instance).
  for (int t : space_.tp) {
    const bool fits = std::any_of(space_.instances.begin(), space_.instances.end(),
                                  [&](const hw::InstanceSpec* i) { return t <= i->gpus && t <= i->nvlink_domain_gpus; });
    if (!fits) {
      const hw::InstanceSpec* i = space_.instances.front();
      for (const auto* x : space_.instances) if (x->gpus > i->gpus) i = x;
      throw Error("--tp", "", std::to_string(t) + ": larger than the " + std::to_string(i->gpus) + " GPUs of " + i->name +
                                   " (a TP group stays within one instance); give --tp up to " + std::to_string(i->gpus));
    }
  }
  if (traffic_.requests && *traffic_.requests > kMaxRequestsPerPoint)
      throw Error("--requests", "", std::to_string(*traffic_.requests) + " requests per point is more than " + std::to_string(kMaxRequestsPerPoint) +
                                        " (about 2 us and 90 bytes each to simulate); give fewer");
  enumerate();
  if (configs_.empty() && precision_pairs_ == 0)
    throw Error("--precision", "", "no configuration to search: none of the precisions runs on the GPUs given");
  if (configs_.empty() && layouts_no_engine_runs_ > 0)
    throw Error("--engine", "", "no configuration to search: the engines given launch none of the layouts (vLLM's expert "
                                "parallelism is 1 or TP x DP, TensorRT-LLM's attention DP runs TP 1); widen --tp, --dp or --ep, "
                                "or add --engine trtllm / sglang");
  if (configs_.empty())
    throw Error(space_.ep.empty() ? "--tp" : "--ep", "", "no configuration to search: no layout of the sizes given serves " +
                                                           space_.model->name + (space_.ep.empty() ? "" : " (each --ep must divide a layout's "
                                                                                                "TP x DP GPUs and the model's experts)"));
  // The simulated requests if nothing were pruned: a search that could run for hours is refused
  // up front, naming what multiplies into it.
  double per_config = 0;
  for (int conc : traffic_.concurrency) {
    const double n = double(conc) * (space_.disaggregated ? 64 : 1);   // clients: at most 64 decode workers
    per_config += traffic_.requests ? double(*traffic_.requests) : std::max(100.0, 4 * n) + n;
  }
  const double total = per_config * double(configs_.size());
  if (traffic_.requests && total > kMaxSpaceRequests) {
    char b[64];
    std::snprintf(b, sizeof b, "%.3g", total);
    throw Error("--requests", "", std::string("up to ") + b + " simulated requests (" + std::to_string(configs_.size()) +
                                      " configurations x " + std::to_string(traffic_.concurrency.size()) + " concurrencies x " +
                                      std::to_string(*traffic_.requests) + " requests), more than 10^9 (hours of simulation); "
                                      "give a smaller --requests or a smaller space");
  }
}

std::int64_t Search::prompt_tokens() const { return traffic_.isl + workloads::vision_work(traffic_.multimodal).tokens; }
int Search::vision_tiles() const { return workloads::vision_work(traffic_.multimodal).tiles; }

void Search::enumerate() {
  const auto& cat = hw::Catalog::global();
  const models::ModelSpec& m = *space_.model;
  // Precisions: the user's, or BF16 / FP8 / NVFP4 plus every format the model's checkpoints are
  // published in (MXFP4, INT4, FP8 block). Each runs as vLLM loads it: FP8 on a 128x128 block-FP8
  // checkpoint is fp8_block; a precision is tried on a GPU that computes in it natively, and the
  // weight-only 4-bit formats (INT4, MXFP4, NVFP4 without FP4 tensor cores: Marlin W4A16, BF16
  // math) on any GPU when the model is published in that format or the user asked for it.
  std::vector<hw::Precision> wanted = space_.precisions;
  const bool asked = !wanted.empty();
  std::vector<hw::Precision> published;
  for (const auto& f : m.checkpoint_precisions) published.push_back(hw::parse_precision(f, "checkpoint_precisions"));
  published.push_back(hw::parse_precision(m.checkpoint_precision, "checkpoint_precision"));
  if (!asked) {
    wanted = {hw::Precision::bf16, hw::Precision::fp8, hw::Precision::nvfp4};
    wanted.insert(wanted.end(), published.begin(), published.end());
  }
  std::vector<hw::Precision> formats;
  for (auto p : wanted) {
    p = models::checkpoint_format(m, p);
    if (std::find(formats.begin(), formats.end(), p) == formats.end()) formats.push_back(p);
  }
  auto is_published = [&](hw::Precision p) { return std::find(published.begin(), published.end(), p) != published.end(); };
  auto runs = [&](const hw::GpuSpec& g, hw::Precision p) {
    return g.native(p) || (hw::weight_only(g, p) && g.native(hw::Precision::bf16) && (asked || is_published(p)));
  };
  auto precisions_of = [&](const hw::GpuSpec& a, const hw::GpuSpec& b) {
    std::vector<hw::Precision> out;
    for (auto p : formats)
      if (runs(a, p) && runs(b, p)) out.push_back(p);
    return out;
  };
  auto add = [&](SearchConfig c) {
    if (configs_.size() >= kMaxConfigurations)
      throw Error("--gpu", "",
                  "the search space holds more than " + std::to_string(kMaxConfigurations) +
                      " configurations (the product of --gpu, --precision, --tp, --pp, --dp, --pd-ratios, --max-num-seqs, "
                      "--max-num-batched-tokens, --kv-cache-dtype, --prefix-caching and --num-speculative-tokens); give shorter lists or "
                      "search in parts");
    c.index = static_cast<int>(configs_.size());
    configs_.push_back(std::move(c));
  };
  auto knobs = [&](SearchConfig base, const std::string& label) {
    // The KV dtypes this precision resolves the requested ones to, each once; a dtype other than
    // the checkpoint's is named in the label.
    std::vector<hw::Precision> kvs;
    for (const auto& k : space_.kv_cache_dtypes) {
      const hw::Precision kv = models::resolve_kv_cache_dtype(k, base.precision, "--kv-cache-dtype");
      if (std::find(kvs.begin(), kvs.end(), kv) == kvs.end()) kvs.push_back(kv);
    }
    const hw::Precision own = models::checkpoint_kv_dtype(base.precision);
    const bool several = space_.engines.size() > 1;
    for (const auto& engine : space_.engines) {
      const EngineProfile& prof = engine_profile(engine);
      // Layouts the engine does not launch (TensorRT-LLM's attention DP with attention TP > 1).
      const bool agg = base.topo.kind == TopologyChoice::Kind::aggregated;
      if (agg ? !launches_layout(prof, base.topo.agg)
              : !launches_layout(prof, base.topo.prefill) || !launches_layout(prof, base.topo.decode)) {
        ++layouts_no_engine_runs_;
        continue;
      }
      const GpuClassDefaults& gc = prof.gpu_class(cat.gpu(base.decode_instance->gpu));
      for (hw::Precision kv : kvs)
        for (int s0 : space_.max_num_seqs)
          for (auto b0 : space_.max_num_batched_tokens)
          for (int pc : space_.prefix_caching)
          for (int k : space_.speculative_tokens) {
            SearchConfig c = base;
            c.engine = engine;
            c.prefix_caching = pc;
            c.speculative_tokens = k;
            c.kv_dtype = kv;
            c.max_num_batched_tokens = b0 > 0 ? b0 : gc.max_num_batched_tokens;
            c.max_num_seqs = s0 > 0 ? s0 : int(std::min<std::int64_t>(gc.max_num_seqs, c.max_num_batched_tokens));
            if (several) c.family += " " + engine;
            c.label = label + " " + text::lower(std::string(hw::to_string(c.precision))) +
                      (kv != own ? " kv " + text::lower(std::string(hw::to_string(kv))) : std::string()) + " seqs " +
                      std::to_string(c.max_num_seqs) + " tokens " + std::to_string(c.max_num_batched_tokens) +
                      (several || engine != engine_profile("vllm").name ? " " + engine : std::string()) +
                      (pc < 0 ? std::string() : pc ? " prefix cache on" : " prefix cache off") +
                      (k > 0 ? " MTP " + std::to_string(k) : std::string());
            add(std::move(c));
          }
    }
  };
  auto disagg = [&](const hw::InstanceSpec* pi, const hw::InstanceSpec* di, hw::Precision prec) {
    const bool mixed = pi != di;
    const std::string pg = cat.gpu(pi->gpu).name, dg = cat.gpu(di->gpu).name;
    for (auto [x, y] : space_.pd_ratios)
      for (int ptp : space_.tp) {
        if (ptp > pi->gpus) continue;
        for (int pep : ep_options(m, ptp, space_.expert_parallel, space_.ep))
          for (int dtp : space_.tp) {
            if (dtp > di->gpus) continue;
            // Decode workers of attention-DP ranks (MoE models, within a node), as aggregated replicas.
            for (int ddp : dp_options(m, space_.decode_dp, dtp, 1, di->gpus))
            for (int dep : ep_options(m, dtp * ddp, space_.expert_parallel, space_.ep)) {
              SearchConfig c;
              c.topo.kind = TopologyChoice::Kind::disaggregated;
              c.topo.prefill = {ptp, 1, pep};
              c.topo.decode = {dtp, 1, dep, ddp};
              c.topo.encode = c.topo.prefill;
              c.topo.prefill_workers = x;
              c.topo.decode_workers = y;
              c.instance = pi;
              c.decode_instance = di;
              c.precision = prec;
              c.gpus = x * ptp + y * dtp * ddp;
              if (mixed) {
                c.nodes = int(nodes_for({{x, ptp}}, pi->gpus));
                c.decode_nodes = int(nodes_for({{y, dtp * ddp}}, di->gpus));
                if (pi->usd_per_hour && di->usd_per_hour)
                  c.usd_per_hour = c.nodes * *pi->usd_per_hour + c.decode_nodes * *di->usd_per_hour;
                c.family = "disaggregated " + pg + "+" + dg;
                c.group = pi->name + "+" + di->name;
              } else {
                c.nodes = int(nodes_for({{x, ptp}, {y, dtp * ddp}}, pi->gpus));
                if (pi->usd_per_hour) c.usd_per_hour = c.nodes * *pi->usd_per_hour;
                c.family = "disaggregated " + pg;
                c.group = pi->name;
              }
              std::string label = "disagg " + std::to_string(x) + "P " + shape(c.topo.prefill) + (mixed ? " " + pg : "") +
                                  " + " + std::to_string(y) + "D " + shape(c.topo.decode) + (mixed ? " " + dg : " " + pg);
              knobs(c, label);
            }
          }
      }
  };
  for (const hw::InstanceSpec* inst : space_.instances) {
    const hw::GpuSpec& g = cat.gpu(inst->gpu);
    for (hw::Precision prec : precisions_of(g, g)) {
      ++precision_pairs_;
      if (space_.aggregated)
        for (int tp : space_.tp) {
          if (tp > inst->gpus || tp > inst->nvlink_domain_gpus) continue;
          for (int pp : space_.pp)
            for (int dp : dp_options(m, space_.dp, tp, pp, inst->gpus))
            for (int ep : ep_options(m, tp * dp, space_.expert_parallel, space_.ep)) {
              SearchConfig c;
              c.topo.kind = TopologyChoice::Kind::aggregated;
              c.topo.replicas = 1;
              c.topo.agg = {tp, pp, ep, dp};
              c.instance = c.decode_instance = inst;
              c.precision = prec;
              c.gpus = c.topo.agg.gpus();
              c.nodes = int(nodes_for({{1, c.gpus}}, inst->gpus));
              if (inst->usd_per_hour) c.usd_per_hour = c.nodes * *inst->usd_per_hour;
              c.family = "aggregated " + g.name;
              c.group = inst->name;
              knobs(c, "agg " + shape(c.topo.agg) + " " + g.name);
            }
        }
      if (space_.disaggregated) disagg(inst, inst, prec);
    }
  }
  if (space_.disaggregated && space_.mixed_gpus)
    for (const hw::InstanceSpec* pi : space_.instances)
      for (const hw::InstanceSpec* di : space_.instances) {
        if (pi == di || pi->gpu == di->gpu) continue;
        for (hw::Precision prec : precisions_of(cat.gpu(pi->gpu), cat.gpu(di->gpu))) disagg(pi, di, prec);
      }
  state_.assign(configs_.size(), State{});
}

// ---- bounds ----------------------------------------------------------------------------------------

EngineConfig Search::engine_of(const SearchConfig& c, const hw::GpuSpec& gpu, int tp, bool decodes) const {
  EngineConfig e;
  e.max_num_seqs = c.max_num_seqs;
  e.max_num_batched_tokens = c.max_num_batched_tokens;
  e.max_model_len = prompt_tokens() + traffic_.osl;   // what the traffic needs (vllm serve --max-model-len)
  nlohmann::json given = {{"max_num_seqs", e.max_num_seqs}, {"max_num_batched_tokens", e.max_num_batched_tokens}};
  if (space_.gpu_memory_utilization >= 0) given["gpu_memory_utilization"] = e.gpu_memory_utilization = space_.gpu_memory_utilization;
  if (c.prefix_caching >= 0) given["enable_prefix_caching"] = e.enable_prefix_caching = c.prefix_caching == 1;
  if (decodes && c.speculative_tokens > 0) given["num_speculative_tokens"] = e.num_speculative_tokens = c.speculative_tokens;
  apply_profile(engine_profile(c.engine), *space_.model, gpu, given, e, tp);
  return e;
}

EngineConfig Search::engine_of(const SearchConfig& c) const {
  const models::Parallelism& par = c.disaggregated() ? c.topo.decode : c.topo.agg;
  return engine_of(c, hw::Catalog::global().gpu(c.decode_instance->gpu), par.tp);
}

const models::StepCostModel& Search::cost(const hw::GpuSpec& gpu, hw::Precision p, hw::Precision kv,
                                          const models::Parallelism& par, const hw::KernelTables& tables,
                                          const std::string& engine) {
  // The bounds use the kernel factors of a calibration that applies on this GPU and engine build,
  // as the simulation does: otherwise a calibration making kernels faster would make them no bounds.
  const hw::KernelScales scales = space_.calibration
                                      ? applicable(*space_.calibration, gpu.name, engine_profile(engine).name, space_.model->name, std::string(hw::to_string(p))).kernels
                                      : hw::KernelScales{};
  // The kernel tables of the profile the candidate simulates on (the bounds must not come from others).
  return *costs_->get(*space_.model, gpu, p, par, kv, tables, scales);
}

SearchBound Search::bound_of(const SearchConfig& c) {
  SearchBound b;
  const auto& cat = hw::Catalog::global();
  const models::ModelSpec& m = *space_.model;
  const hw::GpuSpec& pg = cat.gpu(c.instance->gpu);
  const hw::GpuSpec& dg = cat.gpu(c.decode_instance->gpu);
  const hw::Precision kv = c.kv_dtype;
  // With images on a share of the requests only, the bounds take the text-only prompt (a lower
  // bound on any request's cost); memory must hold a request that carries them.
  const bool all_media = traffic_.multimodal.fraction >= 1;
  // With prefix caching on, a prompt whose shared prefix is cached prefills only what follows it
  // (more cheaply than from scratch, which is what the bound takes): the prefix comes off.
  const EngineConfig prefill_engine =
      engine_of(c, cat.gpu(c.instance->gpu), (c.disaggregated() ? c.topo.prefill : c.topo.agg).tp, !c.disaggregated());
  b.prefix_caching = prefill_engine.enable_prefix_caching;
  const std::int64_t whole_prompt = all_media ? prompt_tokens() : traffic_.isl;
  const std::int64_t prompt =
      whole_prompt - (b.prefix_caching ? std::min(traffic_.shared_prefix_tokens, whole_prompt - 1) : std::int64_t{0});
  const std::int64_t seq_tokens = prompt_tokens() + traffic_.osl;
  const int tiles = all_media ? vision_tiles() : 0;
  // GPU time only: the engine's host work per step (scheduling, input preparation, the frontend)
  // may overlap the GPU's, so only the forward passes themselves bound a step from below.
  const double ovh = 0.0;
  const double K = kBoundMargin;

  // Memory: every role's plan must fit and hold at least one whole request.
  auto plan_of = [&](const hw::GpuSpec& g, const models::Parallelism& par, const char* role,
                     bool decodes) -> std::optional<models::MemoryPlan> {
    try {
      models::MemoryPlan p = models::plan_memory(m, g, c.precision, par, engine_of(c, g, par.tp, decodes).memory_config(kv));
      if (p.max_concurrent_seqs(seq_tokens) < 1) {
        b.reason = std::string(role) + " " + shape(par) + " on " + g.name + ": the KV cache holds no request of " +
                   std::to_string(seq_tokens) + " tokens";
        return std::nullopt;
      }
      return p;
    } catch (const Error& err) {
      b.reason = std::string(role) + " " + shape(par) + " on " + g.name + ": " + err.reason();
      return std::nullopt;
    }
  };
  const models::Parallelism& dpar = c.disaggregated() ? c.topo.decode : c.topo.agg;
  const models::Parallelism& ppar = c.disaggregated() ? c.topo.prefill : c.topo.agg;
  const auto dplan = plan_of(dg, dpar, c.disaggregated() ? "decode" : "replica", true);
  if (!dplan) return b;
  b.block_tokens = dplan->block_size;
  if (c.disaggregated()) {
    const auto pplan = plan_of(pg, ppar, "prefill", false);
    if (!pplan) return b;
    b.block_tokens = pplan->block_size;
  }
  b.fits = true;

  const hw::KernelTables& tables = engine_profile(c.engine).kernel_tables;
  const models::StepCostModel& dcm = cost(dg, c.precision, kv, dpar, tables, c.engine);
  const models::StepCostModel& pcm = cost(pg, c.precision, kv, ppar, tables, c.engine);
  // A decode step with K MTP drafts costs at least a plain one (its verify pass holds one) and gives
  // a sequence at most 1 + K tokens: per token, at least t_dec / (1 + K).
  const double per_step = 1.0 + c.speculative_tokens;
  auto t_dec = [&](int seqs) { return (K * dcm.seconds(decode_batch(seqs, prompt)) + ovh) / per_step; };
  const PrefillAlone pa = prefill_alone(pcm, prompt, c.max_num_batched_tokens, tiles);
  const double prefill_s = K * pa.gpu_s + pa.steps * ovh;
  const double ttft_lb = c.disaggregated() ? prefill_s + t_dec(1) : prefill_s;
  const double itl_lb = t_dec(1);
  b.ttft_lb_ms = ttft_lb * 1e3;
  b.itl_lb_ms = itl_lb * 1e3;
  const int cap = std::max(1, std::min(c.max_num_seqs * dpar.dp, dplan->max_concurrent_seqs(seq_tokens)));
  const double osl = double(traffic_.osl);

  // Prefill capacity of one disaggregated prefill worker: a full token budget of prompts at no
  // prior context is the cheapest a prompt token ever gets.
  double prefill_tokens_per_s = kInf;
  if (c.disaggregated()) {
    models::StepBatch pb;
    const std::int64_t budget = c.max_num_batched_tokens;
    if (prompt >= budget) {
      pb.prefill_seqs = 1;
      pb.prefill_tokens = budget;
      pb.prefill_attention_pairs = double(budget) * double(budget + 1) / 2;
    } else {
      const std::int64_t n = budget / prompt;
      pb.prefill_seqs = int(n);
      pb.prefill_tokens = n * prompt;
      pb.prefill_attention_pairs = double(n) * double(prompt) * double(prompt + 1) / 2;
      pb.vision_tiles = int(n) * tiles;
    }
    prefill_tokens_per_s = double(pb.prefill_tokens) / (K * pcm.seconds(pb) + ovh);
  }

  // Aggregated: the least GPU time per output token with B sequences decoding. A decode token
  // costs at least t(B)/B; each request's prompt tokens ride on decode steps at no less than their
  // marginal cost in a step of B decodes. With attention data parallelism each of the dp ranks can
  // carry a chunk in the same step.
  auto agg_per_token = [&](int B) {
    const int ranks = dpar.dp;
    const std::int64_t ch =
        std::max<std::int64_t>(1, std::min<std::int64_t>(prompt, c.max_num_batched_tokens - (B + ranks - 1) / ranks));
    // The cheapest marginal cost per prompt token over the prompts one step may carry (1, 2, 4, ...
    // chunks per rank within the token budget): several prompts in a step share its GEMMs, and the
    // measured kernel tables make a token cheaper at larger m.
    const double t_b = dcm.seconds(decode_batch(B, prompt));
    double marg = kInf;
    for (std::int64_t n = 1; n == 1 || ranks * n * ch + B <= c.max_num_batched_tokens; n *= 2) {
      models::StepBatch mixed = decode_batch(B, prompt);
      mixed.prefill_seqs = int(ranks * n);
      mixed.prefill_tokens = ranks * n * ch;
      mixed.prefill_attention_pairs = double(ranks * n) * double(ch) * double(ch + 1) / 2;
      marg = std::min(marg, std::max(0.0, K * (dcm.seconds(mixed) - t_b)) / double(ranks * n * ch));
    }
    return t_dec(B) / B + (double(prompt) / osl) * marg + K * dcm.encoder_seconds(tiles) / osl;
  };
  const bool ttft_ok = b.ttft_lb_ms <= goal_.ttft_ms;
  const bool itl_ok = b.itl_lb_ms <= goal_.itl_ms;
  for (int conc : traffic_.concurrency) {
    const int n = c.clients(conc);
    // Little's law for a closed loop: n clients, each request at least TTFT + (OSL-1) x ITL long.
    const double little = n * osl / (ttft_lb + (osl - 1) * itl_lb);
    double ub = little;
    bool slo_possible = ttft_ok && itl_ok;
    if (!c.disaggregated()) {
      const int B = std::min(n, cap);
      ub = std::min(ub, 1.0 / agg_per_token(B));
      // In steady state a closed loop keeps its clients in the engine and every step carries every
      // running sequence, so at least half the clients (up to the cap) share each step: ITL cannot
      // beat a decode step of that batch.
      slo_possible = slo_possible && t_dec(std::max(1, B / 2)) * 1e3 <= goal_.itl_ms;
    } else {
      const int y = c.topo.decode_workers, x = c.topo.prefill_workers;
      const int B = std::min((n + y - 1) / y, cap);
      ub = std::min(ub, y * B / t_dec(B));
      ub = std::min(ub, x * prefill_tokens_per_s / double(prompt) * osl);
    }
    b.tps_ub.push_back(ub);
    if (slo_possible) b.tps_ub_slo = std::max(b.tps_ub_slo, ub);
  }
  if (traffic_.open_loop()) {
    // Open loop: no clients bound the load, so only capacity does: the most a copy's steps can
    // serve at any batch up to the cap (aggregated: decode steps with the prompts riding on them;
    // disaggregated: the decode workers and the prefill workers' token rate). Batches of powers of
    // two and the cap are tried (the 0.9 margin covers those between).
    double ub = 0;
    for (int B = 1;; B = std::min(cap, B * 2)) {
      const double at = c.disaggregated()
                            ? std::min(c.topo.decode_workers * B / t_dec(B),
                                       c.topo.prefill_workers * prefill_tokens_per_s / double(prompt) * osl)
                            : 1.0 / agg_per_token(B);
      ub = std::max(ub, at);
      if (B >= cap) break;
    }
    b.tps_ub.assign(b.tps_ub.size(), ub);
    b.tps_ub_slo = ttft_ok && itl_ok ? ub : 0;
  }
  if (!ttft_ok)
    b.reason = "TTFT cannot go below " + std::to_string(int(std::lround(b.ttft_lb_ms))) + " ms (prefill of one prompt alone)";
  else if (!itl_ok)
    b.reason = "ITL cannot go below " + std::to_string(int(std::lround(b.itl_lb_ms))) + " ms (a decode step of one sequence" +
               (c.speculative_tokens > 0 ? " over the " + std::to_string(1 + c.speculative_tokens) + " tokens its MTP drafts give at most)"
                                         : ")");
  else if (b.tps_ub_slo <= 0)
    b.reason = "no swept concurrency can meet the ITL SLO";
  return b;
}

void Search::compute_bounds() {
  double best_ub = 0;
  for (const auto& c : configs_) {
    State& s = state_[std::size_t(c.index)];
    if (goal_.objective == SearchObjective::total_gpus && c.gpus > goal_.total_gpus) {
      // Over the GPU budget: never simulated, whatever its bounds.
      s.bound.reason = "one copy takes " + std::to_string(c.gpus) + " GPUs, more than --total-gpus " +
                       std::to_string(std::int64_t(goal_.total_gpus));
      s.pruned = Pruned::does_not_fit;
      continue;
    }
    s.bound = bound_of(c);
    if (!s.bound.fits) s.pruned = Pruned::does_not_fit;
    else if (prune_ && s.bound.tps_ub_slo <= 0) s.pruned = Pruned::cannot_meet_slo;
    if (s.bound.fits) best_ub = std::max(best_ub, s.bound.tps_ub_slo);
  }
  // A target no configuration could serve with 10^9 copies, even at its throughput bound.
  if (goal_.objective == SearchObjective::target_tps && best_ub > 0 && goal_.sized_tps() / best_ub > double(kMaxCopies)) {
    char b[64];
    std::snprintf(b, sizeof b, "%.4g", std::ceil(goal_.sized_tps() / best_ub));
    throw Error(goal_.target_flag, "", std::string("needs ") + b + " copies of the best configuration, more than 10^9; give a smaller target");
  }
  // Best bound first, so the rounds find a strong incumbent early.
  order_.resize(configs_.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::vector<SearchScore> key(configs_.size());
  for (const auto& c : configs_) key[std::size_t(c.index)] = score_bound(c, state_[std::size_t(c.index)].bound.tps_ub_slo);
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
    const auto &ka = key[std::size_t(a)], &kb = key[std::size_t(b)];
    if (ka.feasible != kb.feasible) return ka.feasible;
    return ka.feasible && better(ka, kb);
  });
  bounded_ = true;
}

// ---- scores ----------------------------------------------------------------------------------------

SearchScore Search::score_bound(const SearchConfig& c, double tps) const {
  SearchScore s;
  if (!(tps > 0)) return s;
  s.tps_per_copy = tps;
  s.tps_per_gpu = tps / c.gpus;
  double copies = 1;
  switch (goal_.objective) {
    case SearchObjective::tps_per_gpu: copies = 1; break;
    case SearchObjective::total_gpus: copies = std::floor(goal_.total_gpus / c.gpus); break;
    case SearchObjective::target_tps: copies = std::max(1.0, std::ceil(goal_.sized_tps() / tps - 1e-9)); break;   // any load takes a copy
  }
  if (!(copies >= 1) || copies > double(kMaxCopies)) return s;   // over the budget, or beyond 10^9 copies
  s.copies = static_cast<std::int64_t>(copies);
  s.feasible = true;
  s.gpus = s.copies * c.gpus;
  s.served_tps = goal_.objective == SearchObjective::target_tps ? goal_.sized_tps() : double(s.copies) * tps;
  if (!c.disaggregated()) {
    s.instances = nodes_for({{s.copies, c.gpus}}, c.instance->gpus);
    if (c.instance->usd_per_hour) s.usd_per_hour = double(s.instances) * *c.instance->usd_per_hour;
    s.nodes_by_instance = {{c.instance->name, s.instances}};
  } else if (c.instance == c.decode_instance) {
    s.instances = nodes_for({{s.copies * c.topo.prefill_workers, c.topo.prefill.gpus()}, {s.copies * c.topo.decode_workers, c.topo.decode.gpus()}},
                            c.instance->gpus);
    if (c.instance->usd_per_hour) s.usd_per_hour = double(s.instances) * *c.instance->usd_per_hour;
    s.nodes_by_instance = {{c.instance->name, s.instances}};
  } else {
    const std::int64_t pn = nodes_for({{s.copies * c.topo.prefill_workers, c.topo.prefill.gpus()}}, c.instance->gpus);
    const std::int64_t dn = nodes_for({{s.copies * c.topo.decode_workers, c.topo.decode.gpus()}}, c.decode_instance->gpus);
    s.instances = pn + dn;
    if (c.instance->usd_per_hour && c.decode_instance->usd_per_hour)
      s.usd_per_hour = double(pn) * *c.instance->usd_per_hour + double(dn) * *c.decode_instance->usd_per_hour;
    s.nodes_by_instance = {{c.instance->name, pn}, {c.decode_instance->name, dn}};
  }
  return s;
}

bool Search::better(const SearchScore& a, const SearchScore& b) const {
  auto lt = [](double x, double y) { return x < y; };
  switch (goal_.objective) {
    case SearchObjective::tps_per_gpu:
      return a.tps_per_gpu > b.tps_per_gpu;
    case SearchObjective::total_gpus:
      if (a.served_tps != b.served_tps) return a.served_tps > b.served_tps;
      if (opt_or_inf(a.usd_per_hour) != opt_or_inf(b.usd_per_hour)) return lt(opt_or_inf(a.usd_per_hour), opt_or_inf(b.usd_per_hour));
      return a.tps_per_gpu > b.tps_per_gpu;
    case SearchObjective::target_tps:
      if (opt_or_inf(a.usd_per_hour) != opt_or_inf(b.usd_per_hour)) return lt(opt_or_inf(a.usd_per_hour), opt_or_inf(b.usd_per_hour));
      if (a.gpus != b.gpus) return a.gpus < b.gpus;
      return a.tps_per_gpu > b.tps_per_gpu;
  }
  return false;
}

// Every component of the real score is no better than the bound's (copies and cost only grow as
// throughput falls), so an incumbent strictly better than the bound is strictly better than the
// candidate whatever its simulation would give.
bool Search::cannot_beat(const SearchConfig& c, const SearchBound& b, const SearchScore& incumbent) const {
  const SearchScore s = score_bound(c, b.tps_ub_slo);
  return !s.feasible || better(incumbent, s);
}

SearchScore Search::score_of(const SearchConfig& c, const std::vector<SweepRow>& rows) const {
  const int st = static_cast<int>(goal_.statistic);
  auto ttft_ok = [&](const SweepRow& r) { return r.ttft_ms[st] <= goal_.ttft_ms; };
  auto itl_ok = [&](const SweepRow& r) { return itl_side_ok(r, st, goal_.itl_ms, goal_.gap_ms); };
  if (traffic_.open_loop()) {
    // The fewest passing copy count, and what the largest failing one below it breaks.
    const SweepRow *best = nullptr, *fewer = nullptr;
    auto ok = [&](const SweepRow& r) { return ttft_ok(r) && itl_ok(r) && !r.overloaded; };   // a growing queue fails in time
    for (const auto& r : rows)
      if (ok(r)) {
        if (!best || r.concurrency < best->concurrency) best = &r;
      }
    for (const auto& r : rows)
      if (!ok(r) && (!best || r.concurrency < best->concurrency) && (!fewer || r.concurrency > fewer->concurrency))
        fewer = &r;
    SearchScore s;
    if (best) {
      const double k = double(best->concurrency);
      s = score_bound(c, goal_.sized_tps() / k);   // k copies, each serving the (sized) target / k
      s.rate_per_copy = traffic_.rate / k;
      s.in_flight = s.rate_per_copy * (best->ttft_ms[st] + double(traffic_.osl - 1) * best->itl_ms[st]) * 1e-3;
      s.tps_per_user = best->output_tps_per_user;
      s.ttft_ms = best->ttft_ms[st];
      s.itl_ms = best->itl_ms[st];
      s.gap_ms = best->gap_ms[st];
      s.prefill_train = best->prefill_train;
      s.prefix_hit = best->prefix_hit;
    }
    if (fewer) {
      const bool t = !ttft_ok(*fewer) || fewer->overloaded, i = !itl_ok(*fewer);
      s.fewer_overloaded = fewer->overloaded;
      s.fewer_copies = fewer->concurrency;   // open-loop rows carry the copy count in `concurrency`
      s.limited_by = t && i ? LimitedBy::both : t ? LimitedBy::ttft : i ? LimitedBy::itl : LimitedBy::none;
      s.kv_full = t && fewer->kv_full;
      s.gap_only = gap_alone_breaks(*fewer, st, goal_.itl_ms, goal_.gap_ms);
    }
    return s;
  }
  int best = -1;
  for (int i = 0; i < int(rows.size()); ++i)
    if (ttft_ok(rows[std::size_t(i)]) && itl_ok(rows[std::size_t(i)])) best = i;
  LimitedBy lim = LimitedBy::none;
  bool gap_only = false;
  if (best + 1 < int(rows.size())) {
    const auto& r = rows[std::size_t(best + 1)];
    const bool t = !ttft_ok(r), i = !itl_ok(r);
    lim = t && i ? LimitedBy::both : t ? LimitedBy::ttft : i ? LimitedBy::itl : LimitedBy::none;
    gap_only = gap_alone_breaks(r, st, goal_.itl_ms, goal_.gap_ms);
  }
  SearchScore s;
  if (best >= 0 && rows[std::size_t(best)].output_tps > 0) {
    const auto& r = rows[std::size_t(best)];
    s = score_bound(c, r.output_tps);
    s.slo_concurrency = r.concurrency;
    s.tps_per_user = r.output_tps_per_user;
    s.ttft_ms = r.ttft_ms[st];
    s.itl_ms = r.itl_ms[st];
    s.gap_ms = r.gap_ms[st];
    s.prefix_hit = r.prefix_hit;
  }
  s.limited_by = lim;
  s.gap_only = gap_only;
  s.kv_full = lim != LimitedBy::none && lim != LimitedBy::itl && rows[std::size_t(best + 1)].kv_full;
  s.prefill_train = (best >= 0 && rows[std::size_t(best)].prefill_train) ||
                    (best + 1 < int(rows.size()) && rows[std::size_t(best + 1)].prefill_train);
  return s;
}

// ---- rounds ----------------------------------------------------------------------------------------

bool Search::calibrated(const SearchConfig& c) const {
  if (!space_.calibration) return false;
  const auto& cat = hw::Catalog::global();
  const std::string build = engine_profile(c.engine).name;
  const std::string precision(hw::to_string(c.precision));
  return applicable(*space_.calibration, cat.gpu(c.instance->gpu).name, build, space_.model->name, precision).any ||
         applicable(*space_.calibration, cat.gpu(c.decode_instance->gpu).name, build, space_.model->name, precision).any;
}

std::string Search::group_of(int index) const { return goal_.per_instance ? configs_[std::size_t(index)].group : ""; }

std::vector<int> Search::next_round() {
  if (!bounded_) compute_bounds();
  // Incumbents: the best simulated candidate of each group (ties: lower index).
  std::map<std::string, int> inc;
  for (const auto& c : configs_) {
    const State& s = state_[std::size_t(c.index)];
    if (!s.simulated || !s.score.feasible) continue;
    auto it = inc.find(group_of(c.index));
    if (it == inc.end() || better(s.score, state_[std::size_t(it->second)].score)) inc[group_of(c.index)] = c.index;
  }
  std::vector<int> round;
  for (int i : order_) {
    State& s = state_[std::size_t(i)];
    if (s.simulated || s.pruned != Pruned::no) continue;
    if (prune_) {
      auto it = inc.find(group_of(i));
      if (it != inc.end() && cannot_beat(configs_[std::size_t(i)], s.bound, state_[std::size_t(it->second)].score)) {
        s.pruned = Pruned::cannot_win;
        continue;
      }
    }
    if (int(round.size()) < (prune_ ? kRoundSize : kRoundSizeNoPrune)) round.push_back(i);
  }
  std::sort(round.begin(), round.end());
  return round;
}

DeploymentSpec Search::deployment_spec(const SearchConfig& c) const {
  const auto& cat = hw::Catalog::global();
  DeploymentSpec d;
  d.model = space_.model;
  d.instance = c.instance;
  d.gpu = &cat.gpu(c.instance->gpu);
  d.weights = c.precision;
  d.kv_dtype = c.kv_dtype;
  // The engine `simulate` runs: the candidate's engine profile for this model and GPU under the
  // knobs the configuration sets, and its API-server path for aggregated deployments.
  const EngineProfile& profile = engine_profile(c.engine);
  d.engine = engine_of(c, *d.gpu, (c.disaggregated() ? c.topo.decode : c.topo.agg).tp);
  // Room for the closed-loop spread of the answer lengths (6 sd), which stands for the clients'
  // desynchronisation: the traffic's real requests need prompt + OSL (the deployment file's).
  // at the most clients a run of this configuration simulates (the list need not be sorted).
  const int most_clients =
      traffic_.concurrency.empty() ? 1 : c.clients(*std::max_element(traffic_.concurrency.begin(), traffic_.concurrency.end()));
  d.engine.max_model_len +=
      static_cast<std::int64_t>(std::ceil(6 * closed_loop_osl_sd(d.engine, most_clients, double(traffic_.osl))));
  // The served engine's context, one value for the prediction and every emitted file: ISL + OSL +
  // vision tokens + the answer-length spread (6 sd) + the chat template's tokens that aiperf's chat
  // requests add to every prompt (the validation harness's margin), within the model's own context.
  d.engine.max_model_len += kChatTemplateMargin;
  if (space_.model->max_context > 0) d.engine.max_model_len = std::min<std::int64_t>(d.engine.max_model_len, space_.model->max_context);
  d.frontend = profile_frontend(profile);
  d.frontend->client.warmup_barrier = false;   // the steady-state rule (sim/studies/plan.hpp)
  d.router = space_.router;
  d.seed = traffic_.seed;
  d.calibration = space_.calibration;
  d.step_costs = costs_;
  if (c.speculative_tokens > 0)   // MTP on the decode-carrying workers, as plan and simulate run it
    d.mtp = make_mtp(*space_.model, c.speculative_tokens, space_.mtp_acceptance, traffic_.seed, "--mtp-acceptance");
  if (c.disaggregated() && c.instance != c.decode_instance) {
    d.prefill_instance = c.instance;
    d.decode_instance = c.decode_instance;
    d.prefill_nodes = c.nodes;
    d.decode_nodes = c.decode_nodes;
    d.nodes = c.nodes;
  } else {
    d.nodes = c.nodes;
  }
  return d;
}

std::vector<SweepRow> Search::run(int index) const {
  if (index < 0 || index >= int(configs_.size()))
    throw Error("search", "index", "must be in [0, " + std::to_string(configs_.size()) + ")");
  const SearchConfig& c = configs_[std::size_t(index)];
  const Deployment dep(c.topo, deployment_spec(c));
  std::vector<SweepRow> rows;
  if (traffic_.open_loop()) {
    // The fewest copies meeting both SLOs at the target rate split evenly over them; the rows are
    // every evaluated copy count (SweepRow::concurrency holds the copies), in evaluation order.
    const int st = static_cast<int>(goal_.statistic);
    auto point = [&](std::int64_t k) {
      workloads::WorkloadConfig wc = open_loop_workload(traffic_.rate / double(k), *traffic_.arrival, traffic_.burstiness,
                                                        traffic_.requests, traffic_.seed, traffic_.isl, traffic_.osl);
      wc.multimodal = traffic_.multimodal;
      wc.shared_prefix_tokens = traffic_.shared_prefix_tokens;
      const PointResult pr = dep.run(wc);
      return sweep_row(c.label, int(std::min<std::int64_t>(k, 1 << 30)), pr, dep.gpus(), true);
    };
    auto passes = [&](const SweepRow& r) {
      return r.ttft_ms[st] <= goal_.ttft_ms && itl_side_ok(r, st, goal_.itl_ms, goal_.gap_ms) && !r.overloaded;
    };
    // A copy that fails with under one request in flight (rate x latency, Little's law) fails
    // alone: more copies cannot help.
    auto hopeless = [&](std::int64_t k, const SweepRow& r) {
      return traffic_.rate / double(k) * (r.ttft_ms[st] + double(traffic_.osl - 1) * r.itl_ms[st]) * 1e-3 < 1.0;
    };
    for (auto& [k, r] : fewest_copies(point, passes, hopeless).tried) rows.push_back(std::move(r));
    return rows;
  }
  for (int conc : traffic_.concurrency) {
    const int n = c.clients(conc);
    workloads::WorkloadConfig wc = capacity_workload(n, traffic_.requests, traffic_.seed, traffic_.isl, traffic_.osl);
    wc.multimodal = traffic_.multimodal;
    wc.shared_prefix_tokens = traffic_.shared_prefix_tokens;
    const PointResult pr = dep.run(wc);
    rows.push_back(sweep_row(c.label, n, pr, dep.gpus()));
  }
  return rows;
}

void Search::add(int index, std::vector<SweepRow> rows) {
  if (index < 0 || index >= int(configs_.size()))
    throw Error("search", "index", "must be in [0, " + std::to_string(configs_.size()) + ")");
  if (!traffic_.open_loop() && rows.size() != traffic_.concurrency.size())
    throw Error("search", "rows", "expected " + std::to_string(traffic_.concurrency.size()) + " rows for configuration " +
                                      std::to_string(index));
  State& s = state_[std::size_t(index)];
  s.score = score_of(configs_[std::size_t(index)], rows);
  s.rows = std::move(rows);
  s.simulated = true;
}

SearchProgress Search::progress() const {
  SearchProgress p;
  p.total = int(configs_.size());
  for (const auto& s : state_) {
    if (s.simulated) ++p.simulated;
    else if (s.pruned != Pruned::no) ++p.pruned;
    else ++p.pending;
  }
  return p;
}

nlohmann::json Search::deployment(int index) const {
  const SearchConfig& c = configs_.at(std::size_t(index));
  const State& s = state_.at(std::size_t(index));
  const auto& cat = hw::Catalog::global();
  const std::int64_t copies = std::max<std::int64_t>(1, s.score.copies);
  EngineConfig e = engine_of(c);
  e.max_model_len = deployment_spec(c).engine.max_model_len;   // the one the prediction ran with
  nlohmann::json d;
  d["name"] = space_.model->name + "-" + (c.disaggregated() ? "disagg" : "agg");
  d["model"] = space_.model->name;
  d["precision"] = text::lower(std::string(hw::to_string(c.precision)));
  if (const std::string from = models::quantized_on_load_from(*space_.model, c.precision); !from.empty() && e.kind == EngineKind::vllm)
    d["checkpoint"] = from;   // no such checkpoint is published: vLLM quantizes this one as it loads
  d["kv_cache_dtype"] = text::lower(std::string(hw::to_string(c.kv_dtype)));
  d.update(launch_knobs(e));
  d["engine"] = c.engine;
  if (c.speculative_tokens > 0) {   // MTP on the decode-carrying workers, at the acceptance the prediction assumed
    d["num_speculative_tokens"] = c.speculative_tokens;
    d["mtp_acceptance"] = space_.mtp_acceptance;
  }
  if (traffic_.shared_prefix_tokens > 0) d["shared_prefix_tokens"] = traffic_.shared_prefix_tokens;
  d["kind"] = c.disaggregated() ? "disaggregated" : "aggregated";
  d["copies"] = copies;
  d["describe"] = c.label + ", " + std::to_string(copies) + (copies == 1 ? " copy" : " copies");
  auto worker = [&](const char* role, std::int64_t count, const models::Parallelism& p, const hw::InstanceSpec* i) {
    return nlohmann::json{{"role", role}, {"count", count * copies}, {"tp", p.tp}, {"pp", p.pp}, {"ep", p.ep}, {"dp", p.dp},
                          {"instance", i->name}, {"gpu", cat.gpu(i->gpu).name}};
  };
  nlohmann::json w = nlohmann::json::array();
  if (c.disaggregated()) {
    w.push_back(worker("prefill", c.topo.prefill_workers, c.topo.prefill, c.instance));
    w.push_back(worker("decode", c.topo.decode_workers, c.topo.decode, c.decode_instance));
  } else {
    w.push_back(worker("aggregated", 1, c.topo.agg, c.instance));
  }
  d["workers"] = w;
  nlohmann::json inst = nlohmann::json::object();
  for (const auto& [k, v] : s.score.nodes_by_instance) inst[k] = v;
  if (inst.empty()) inst[c.instance->name] = c.nodes;
  d["instances"] = inst;
  d["isl"] = traffic_.isl;
  d["osl"] = traffic_.osl;
  nlohmann::json im = nlohmann::json::array();
  for (const auto& x : traffic_.multimodal.images) im.push_back({{"width", x.width_px}, {"height", x.height_px}, {"count", x.count}});
  d["images"] = im;
  d["image_fraction"] = traffic_.multimodal.fraction;
  d["router"] = std::string(to_string(space_.router));
  d["seed"] = traffic_.seed;
  if (traffic_.open_loop() && s.score.rate_per_copy > 0)
    d["rate_per_copy"] = s.score.rate_per_copy, d["arrival"] = workloads::arrival_name(*traffic_.arrival);
  d["vision"] = space_.model->has_vision;
  d["has_encode_workers"] = false;
  if (traffic_.open_loop()) {
    // The rows are the copy counts tried at the target rate: named `copies`, in ascending order,
    // never `concurrency` (no client count was swept), and no closed-loop client list beside them.
    std::vector<SweepRow> rows = s.rows;
    std::stable_sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) { return a.concurrency < b.concurrency; });
    nlohmann::json p = sweep_columns(rows);
    p["copies"] = std::move(p["concurrency"]);
    p.erase("concurrency");
    d["predicted"] = std::move(p);
    d["predicted_axis"] = "copies";
  } else {
    nlohmann::json conc = nlohmann::json::array();
    for (int x : traffic_.concurrency) conc.push_back(c.clients(x));
    d["concurrency"] = conc;
    d["predicted"] = sweep_columns(s.rows);
    d["predicted_axis"] = "clients_per_copy";
  }
  d["slo"] = {{"ttft_ms", goal_.ttft_ms}, {"itl_ms", goal_.itl_ms}, {"gap_ms", goal_.gap_ms},
              {"statistic", std::string(to_string(goal_.statistic))}};
  // The profile the prediction ran with, so that the emitted scenario re-runs the same prediction.
  if (space_.calibration) d["calibration"] = std::filesystem::absolute(space_.calibration->file).string();
  return d;
}

// ---- report ----------------------------------------------------------------------------------------

nlohmann::json Search::report() const {
  nlohmann::json j;
  const auto& cat = hw::Catalog::global();
  j["model"] = space_.model->name;
  j["isl"] = traffic_.isl;
  j["osl"] = traffic_.osl;
  const auto vw = workloads::vision_work(traffic_.multimodal);
  j["vision_tokens_per_request"] = vw.tokens;
  j["vision_tiles_per_request"] = vw.tiles;
  j["image_fraction"] = traffic_.multimodal.fraction;   // the share of requests carrying them
  j["shared_prefix_tokens"] = traffic_.shared_prefix_tokens;
  j["concurrency"] = traffic_.concurrency;
  j["slo"] = {{"ttft_ms", goal_.ttft_ms}, {"itl_ms", goal_.itl_ms}, {"gap_ms", goal_.gap_ms},
              {"statistic", std::string(to_string(goal_.statistic))}};
  j["ttft_ms"] = goal_.ttft_ms;
  j["itl_ms"] = goal_.itl_ms;
  j["gap_ms"] = goal_.gap_ms;
  j["statistic"] = std::string(to_string(goal_.statistic));
  j["method"] = traffic_.open_loop() ? open_loop_rule(traffic_.requests) : capacity_rule(traffic_.requests);
  if (traffic_.open_loop()) {
    j["arrival"] = workloads::arrival_name(*traffic_.arrival);
    j["target_rps"] = traffic_.rate;
    if (*traffic_.arrival == workloads::Arrival::gamma) j["burstiness"] = traffic_.burstiness;
  }
  const char* obj = goal_.objective == SearchObjective::target_tps ? "target_tps"
                    : goal_.objective == SearchObjective::total_gpus ? "total_gpus" : "tps_per_gpu";
  j["objective"] = {{"kind", obj}, {"target_tps", goal_.target_tps}, {"total_gpus", goal_.total_gpus}};
  if (goal_.target_rps > 0) j["objective"]["target_rps"] = goal_.target_rps;   // the rate the target came from
  if (goal_.headroom > 0) {   // candidates sized for the target x (1 + headroom); $/M output tok stays at the target
    j["objective"]["headroom"] = goal_.headroom;
    j["objective"]["sized_tps"] = goal_.sized_tps();
    if (goal_.target_rps > 0) j["objective"]["sized_rps"] = goal_.target_rps * (1 + goal_.headroom);
  }
  j["pruning"] = prune_;
  if (space_.calibration) {   // which candidates the profile applied to
    const CalibrationProfile& cp = *space_.calibration;
    std::vector<std::string> on, off;
    for (const auto* i : space_.instances) {
      const std::string g = cat.gpu(i->gpu).name;
      bool any = false;
      for (const auto& c : configs_) any = any || applicable(cp, g, engine_profile(c.engine).name, space_.model->name, std::string(hw::to_string(c.precision))).any;
      auto& v = any ? on : off;
      if (std::find(v.begin(), v.end(), g) == v.end()) v.push_back(g);
    }
    int n = 0;
    for (const auto& c : configs_) n += calibrated(c);
    j["calibration"] = {{"file", cp.file},
                        {"fitted_on", {{"gpu", cp.gpu}, {"engine", cp.engine}, {"engine_profile", cp.engine_profile},
                                       {"model", cp.model}, {"points", cp.points}}},
                        {"applies_to_gpus", on}, {"uncalibrated_gpus", off}, {"calibrated_configurations", n},
                        {"summary", "calibration " + cp.file + " (fitted on " + cp.model + ", " + cp.gpu + ", " +
                                        (cp.engine_profile.empty() ? cp.engine : cp.engine_profile) + "): applies to " +
                                        std::to_string(n) + " of " + std::to_string(configs_.size()) + " configurations (" +
                                        (on.empty() ? std::string("none") : text::join(on, ", ") + " workers") + ")" +
                                        (off.empty() ? std::string() : "; " + text::join(off, ", ") + " run uncalibrated")}};
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto* i : space_.instances) gpus.push_back({{"instance", i->name}, {"gpu", cat.gpu(i->gpu).name}});
  j["instances"] = gpus;

  const SearchProgress p = progress();
  int fit = 0, slo = 0, win = 0, points = 0;
  for (const auto& s : state_) {
    points += int(s.rows.size());
    fit += s.pruned == Pruned::does_not_fit;
    slo += s.pruned == Pruned::cannot_meet_slo;
    win += s.pruned == Pruned::cannot_win;
  }
  j["counts"] = {{"configurations", p.total}, {"simulated", p.simulated}, {"does_not_fit", fit},
                 {"cannot_meet_slo", slo}, {"cannot_win", win}, {"points_simulated", points}};

  nlohmann::json cfgs = nlohmann::json::array();
  for (const auto& c : configs_) {
    const State& s = state_[std::size_t(c.index)];
    nlohmann::json x = c.to_json();
    x["status"] = s.simulated ? "simulated" : std::string(to_string(s.pruned));
    x["bound"] = s.bound.to_json();
    x["score"] = s.simulated ? s.score.to_json() : nlohmann::json(nullptr);
    if (space_.calibration) x["calibrated"] = calibrated(c);
    cfgs.push_back(std::move(x));
  }
  j["configurations"] = std::move(cfgs);

  // Winners: the best simulated feasible candidate overall, and per instance type (set).
  auto winner_json = [&](int i) {
    const SearchConfig& c = configs_[std::size_t(i)];
    nlohmann::json w = c.to_json();
    w["score"] = state_[std::size_t(i)].score.to_json();
    w["bound"] = state_[std::size_t(i)].bound.to_json();
    const DeploymentSpec spec = deployment_spec(c);
    const Deployment dep(c.topo, spec);
    w["describe"] = dep.describe();
    const std::string user = dep.user_calibration();
    const WhatRan ran{space_.model->name, dep.describe(), &spec.engine, &dep.memory_plan(),
                      traffic_.isl + traffic_.osl + vw.tokens, dep.calibration() + (user.empty() ? "" : "; user calibration: " + user)};
    w["what_ran"] = what_ran_json(ran);
    if (space_.calibration) {
      w["calibrated"] = calibrated(c);
      w["calibration"] = dep.user_calibration();
      // Bands from the profile's cross-validated residuals where it was fitted (GPU, build, model).
      w["calibration_bands"] = {{"prefill", dep.calibrated_on(cat.gpu(c.instance->gpu).name)},
                                {"decode", dep.calibrated_on(cat.gpu(c.decode_instance->gpu).name)}};
    }
    w["deployment"] = deployment(i);
    return w;
  };
  std::map<std::string, int> best_of;
  std::vector<std::string> group_order;
  int best = -1;
  for (const auto& c : configs_) {
    const State& s = state_[std::size_t(c.index)];
    if (!s.simulated || !s.score.feasible) continue;
    if (best < 0 || better(s.score, state_[std::size_t(best)].score)) best = c.index;
    auto it = best_of.find(c.group);
    if (it == best_of.end()) {
      best_of[c.group] = c.index;
      group_order.push_back(c.group);
    } else if (better(s.score, state_[std::size_t(it->second)].score)) {
      it->second = c.index;
    }
  }
  j["best"] = best >= 0 ? winner_json(best) : nlohmann::json(nullptr);
  nlohmann::json per = nlohmann::json::array();
  for (const auto& g : group_order) per.push_back(winner_json(best_of[g]));
  j["best_per_instance"] = per;

  // Pareto frontiers per family over every simulated point.
  std::vector<std::string> families;
  for (const auto& c : configs_)
    if (std::find(families.begin(), families.end(), c.family) == families.end()) families.push_back(c.family);
  nlohmann::json fr = nlohmann::json::array();
  const int st = static_cast<int>(goal_.statistic);
  std::vector<SweepRow> all;
  nlohmann::json fam_col = nlohmann::json::array(), idx_col = nlohmann::json::array(), slo_col = nlohmann::json::array(),
                 usd_col = nlohmann::json::array();
  for (const auto& f : families) {
    struct Pt { double user, gpu; int index, clients; bool meets; };
    // $ per GPU-hour of a configuration: its nodes' price over their GPUs (copies packed into
    // whole nodes); NaN without a price. The frontier chart's per-dollar axis divides by it.
    auto usd_per_gpu_hour = [](const SearchConfig& c) {
      const double node_gpus = double(c.nodes) * c.instance->gpus +
                               (c.decode_instance ? double(c.decode_nodes) * c.decode_instance->gpus : 0.0);
      return c.usd_per_hour && node_gpus > 0 ? *c.usd_per_hour / node_gpus : std::numeric_limits<double>::quiet_NaN();
    };
    std::vector<Pt> pts;
    for (const auto& c : configs_) {
      if (c.family != f) continue;
      const State& s = state_[std::size_t(c.index)];
      if (!s.simulated) continue;
      for (const auto& r : s.rows) {
        const bool meets = r.ttft_ms[st] <= goal_.ttft_ms && itl_side_ok(r, st, goal_.itl_ms, goal_.gap_ms);
        pts.push_back({r.output_tps_per_user, r.output_tps_per_gpu, c.index, r.concurrency, meets});
        all.push_back(r);
        fam_col.push_back(f);
        idx_col.push_back(c.index);
        slo_col.push_back(meets);
        const double g = usd_per_gpu_hour(c);
        usd_col.push_back(std::isfinite(g) ? nlohmann::json(g) : nlohmann::json(nullptr));
      }
    }
    std::stable_sort(pts.begin(), pts.end(), [](const Pt& a, const Pt& b) {
      return a.user != b.user ? a.user > b.user : a.gpu > b.gpu;
    });
    nlohmann::json front = nlohmann::json::array();
    double top = -1;
    for (const auto& q : pts)
      if (q.gpu > top) {
        top = q.gpu;
        const double g = usd_per_gpu_hour(configs_[std::size_t(q.index)]);
        front.push_back({{"index", q.index}, {"label", configs_[std::size_t(q.index)].label}, {"concurrency", q.clients},
                         {"output_tps_per_user", q.user}, {"output_tps_per_gpu", q.gpu}, {"meets_slo", q.meets},
                         {"usd_per_gpu_hour", std::isfinite(g) ? nlohmann::json(g) : nlohmann::json(nullptr)},
                         {"usd_per_million_output_tokens",
                          std::isfinite(g) && q.gpu > 0 ? nlohmann::json(g / (q.gpu * 3600.0) * 1e6) : nlohmann::json(nullptr)}});
      }
    std::reverse(front.begin(), front.end());
    fr.push_back({{"family", f}, {"frontier", front}, {"simulated_points", pts.size()}});
  }
  j["frontiers"] = fr;
  nlohmann::json cols = sweep_columns(all);
  cols["family"] = fam_col;
  cols["index"] = idx_col;
  cols["meets_slo"] = slo_col;
  cols["usd_per_gpu_hour"] = usd_col;
  j["sweep"] = {{"columns", cols}};
  return j;
}

}  // namespace servesim::sim
