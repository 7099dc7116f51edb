// api: the memory plan of one replica and the minimum-GPU table.
#include "common/error.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "sim/api/api.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/kv_offload_setup.hpp"
#include "sim/resolve.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::api {
namespace {

nlohmann::json plan_json(const models::MemoryPlan& p, std::int64_t ctx) {
  return {{"gpus", p.gpus}, {"gpu_total_bytes", p.gpu_total_bytes}, {"budget_bytes", p.budget_bytes},
          {"weight_bytes", p.weight_bytes}, {"weights_quantized_bytes", p.weights.quantized},
          {"weights_high_precision_bytes", p.weights.high_precision}, {"weights_vision_bytes", p.weights.vision},
          {"weights_mtp_bytes", p.weights.mtp}, {"activation_bytes", p.activation_bytes}, {"reserve_bytes", p.reserve_bytes},
          {"cuda_graph_bytes", p.cuda_graph_bytes}, {"nccl_bytes", p.reserve_bytes}, {"context_bytes", p.context_bytes},
          {"cache_bytes", p.cache_bytes}, {"kv_bytes_per_token", p.kv_bytes_per_token}, {"state_bytes_per_seq", p.state_bytes_per_seq},
          {"conv_state_bytes_per_seq", p.conv_state_bytes_per_seq}, {"ssm_state_bytes_per_seq", p.ssm_state_bytes_per_seq},
          {"num_kv_blocks", p.num_kv_blocks}, {"block_size", p.block_size}, {"max_num_seqs", p.max_num_seqs},
          {"max_model_len", p.max_model_len}, {"context_tokens", ctx}, {"max_concurrent_seqs", p.max_concurrent_seqs(ctx)},
          {"kv_cache", kv_cache_json(p, ctx)},
          {"weight_precision", p.weight_precision}, {"kv_cache_dtype", p.kv_precision}, {"weight_note", p.weight_note}};
}

}  // namespace

nlohmann::json kv_cache_json(const models::MemoryPlan& p, std::int64_t ctx) {
  const models::KvCacheLayout& kv = p.kv;
  const models::Concurrency c = p.concurrency(ctx);
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : kv.groups)
    groups.push_back({{"kind", std::string(models::to_string(g.spec.kind))}, {"label", g.spec.label}, {"layers", g.layers}});
  return {{"kv_cache_dtype", p.kv_precision}, {"block_size", kv.block_size}, {"requested_block_size", kv.requested_block_size},
          {"num_blocks", kv.num_blocks}, {"usable_blocks", kv.usable_blocks()}, {"page_bytes", kv.page_bytes},
          {"state_page_bytes", kv.state_page_bytes}, {"attn_bytes_per_token_per_layer", kv.attn_bytes_per_token},
          {"group_size", kv.group_size}, {"tensors", kv.tensors}, {"bytes_per_block", kv.bytes_per_block},
          {"available_bytes", kv.available_bytes}, {"groups", groups}, {"layout", kv.describe()},
          {"lookahead_tokens", kv.lookahead}, {"state_blocks_per_seq", kv.demand.state_blocks(kv.lookahead)},
          {"context_tokens", ctx}, {"blocks_per_seq", c.blocks_per_seq}, {"max_seqs_by_cache", c.by_cache},
          {"max_num_seqs", c.max_num_seqs}, {"max_concurrent_seqs", c.seqs}, {"bound", c.bound},
          {"data_parallel_ranks", p.dp}};  // blocks are one rank's pool; sequences count every rank
}

const models::ModelSpec& resolve_model(const std::string& model, const std::string& model_file) {
  if (!model.empty() && !model_file.empty())
    throw Error("--model-file", "", "give --model or --model-file, not both");
  if (model.empty() && model_file.empty()) throw Error("--model", "", "required (or --model-file)");
  return model_file.empty() ? models::model(model) : models::load_model_file(model_file);
}

sim::Resolved resolve_replica(const models::ModelSpec& m, const std::string& name, const std::string& gpu, const std::string& precision, int tp,
                             int pp) {
  if (tp < 0) throw Error("--tp", "", "parallel sizes must be >= 1 (or leave --tp out for the smallest shape that serves the model)");
  sim::ResolveInput in;
  in.model = name;
  in.gpu = gpu;
  in.precision = precision;
  if (tp > 0) in.tp = tp;
  if (tp > 0 || pp != 1) in.pp = pp;
  in.one_replica = true;
  return sim::resolve(m, in);
}

void check_command_line_layout(const std::string& engine, const models::Parallelism& par) {
  if (par.ep >= 1 && par.dp >= 1)   // plan_memory says what is wrong with sizes below 1
    sim::check_layout(sim::engine_profile(engine.empty() ? sim::kNewestEngine : engine, "--engine"), par, "command line", "--ep", "--dp");
}

nlohmann::json memory(const MemoryArgs& a) {
  const auto& m = resolve_model(a.model, a.model_file);
  const sim::Resolved r = resolve_replica(m, a.model_file.empty() ? a.model : "", a.gpu, a.precision, a.tp, a.pp);
  const auto& gpu = hw::Catalog::global().gpu(r.gpu);
  const auto wp = r.precision;
  models::EngineMemoryConfig cfg;
  if (a.max_num_seqs < 0) throw Error("--max-num-seqs", "", "must be >= 1 (0: the engine's default for the GPU)");
  if (a.max_num_batched_tokens < 0) throw Error("--max-num-batched-tokens", "", "must be >= 1 (0: the engine's default)");
  if (a.num_speculative_tokens < 0 || a.num_speculative_tokens > 16)
    throw Error("--num-speculative-tokens", "", "must be between 0 and 16");
  if (a.block_size < 0 || a.block_size > 4096) throw Error("--block-size", "", "must be between 1 and 4096 (0: the engine's)");
  const auto kv_dtype = models::resolve_kv_cache_dtype(a.kv_cache_dtype, wp, "--kv-cache-dtype");
  std::string profile_name;
  if (a.engine.empty()) {
    cfg.gpu_memory_utilization = a.gpu_memory_utilization < 0 ? 0.9 : a.gpu_memory_utilization;
    cfg.max_num_seqs = a.max_num_seqs > 0 ? a.max_num_seqs : models::serve_max_num_seqs(gpu);
    cfg.max_num_batched_tokens = a.max_num_batched_tokens > 0 ? a.max_num_batched_tokens : models::serve_max_num_batched_tokens(gpu);
    cfg.kv_cache_dtype = kv_dtype;
    cfg.num_speculative_tokens = a.num_speculative_tokens;
    cfg.block_size = a.block_size > 0 ? a.block_size : 16;
  } else {
    // The engine profile's knobs for this GPU and TP, under the flags given.
    const sim::EngineProfile& prof = sim::engine_profile(a.engine, "--engine");
    profile_name = prof.name;
    nlohmann::json given = nlohmann::json::object();
    sim::EngineConfig e;
    e.num_speculative_tokens = a.num_speculative_tokens;
    if (a.gpu_memory_utilization >= 0) given["gpu_memory_utilization"] = e.gpu_memory_utilization = a.gpu_memory_utilization;
    if (a.max_num_seqs > 0) given["max_num_seqs"] = e.max_num_seqs = a.max_num_seqs;
    if (a.max_num_batched_tokens > 0) given["max_num_batched_tokens"] = e.max_num_batched_tokens = a.max_num_batched_tokens;
    if (a.block_size > 0) given["block_size"] = e.block_size = a.block_size;
    sim::apply_profile(prof, m, gpu, given, e, r.tp);
    const bool auto_kv = a.kv_cache_dtype.empty() || text::iequals(a.kv_cache_dtype, "auto");
    cfg = e.memory_config(auto_kv ? prof.auto_kv_cache_dtype(m, gpu, wp) : kv_dtype);
  }
  if (a.context < 0) throw Error("--context", "", "must be >= 0 (0: max_model_len)");
  const models::Parallelism par{r.tp, r.pp, a.ep, a.dp};
  check_command_line_layout(a.engine, par);
  const auto p = models::plan_memory(m, gpu, wp, par, cfg);
  std::int64_t vision = 0;
  if (!a.images.empty()) {
    if (!m.has_vision) throw Error("--images", "", m.name + " has no vision encoder; leave --images out");
    if (a.context <= 0) throw Error("--images", "", "give --context (prompt + answer tokens) for the images' vision tokens to add to");
    vision = workloads::vision_work(images_option(a.images)).tokens;
  }
  const std::int64_t ctx = a.context > 0 ? a.context + vision : p.max_model_len;
  auto j = plan_json(p, ctx);
  if (vision > 0) j["vision_tokens_per_request"] = vision;
  j["model"] = m.name;
  j["engine"] = profile_name.empty() ? "vllm serve defaults" : profile_name;
  j["memory_planner"] = std::string(models::to_string(p.planner));
  j["memory_fraction"] = p.memory_fraction;
  j["peak_bytes"] = p.peak_bytes;
  j["gpu"] = gpu.name;
  j["tp"] = r.tp;
  j["pp"] = r.pp;
  j["ep"] = a.ep;
  j["dp"] = a.dp;
  j["precision"] = std::string(hw::to_string(wp));
  j["defaults"] = r.notes;
  j["estimate"] = m.estimate;
  j["note"] = m.note;
  if (!a.kv_offload.empty()) {   // the tiers beside this replica's pool, bounded by its share of the instance's host memory
    const hw::InstanceSpec* inst = nullptr;
    for (const auto& i : hw::Catalog::global().instances())
      if (!inst && text::iequals(i.gpu, gpu.name)) inst = &i;
    const int gpus = models::Parallelism{r.tp, r.pp, a.ep, a.dp}.gpus();
    const sim::OffloadConfig c = sim::resolve_offload(sim::parse_offload_flag(a.kv_offload), gpu, inst, gpus, "--kv-offload");
    j["kv_offload"] = sim::offload_memory_json(c, p.kv.bytes_per_block, double(p.kv.demand.state_groups) * p.kv.bytes_per_block,
                                               p.block_size, gpus, ctx);
    if (inst) j["kv_offload"]["instance"] = inst->name;
  }
  return j;
}

std::vector<hw::Precision> min_gpus_precisions(const models::ModelSpec& m, const std::string& precisions, const std::string& name) {
  std::vector<hw::Precision> precs;
  for (const auto& s : option_list(precisions, "--precisions")) precs.push_back(hw::parse_precision(s, "--precisions"));
  if (precs.empty()) {   // the checkpoint's (the one a quantised repository's id names), and nvfp4
    precs.push_back(models::resolve_weight_precision(m, models::id_checkpoint_precision(name, m), "--model"));
    if (precs[0] != hw::Precision::nvfp4) precs.push_back(hw::Precision::nvfp4);
  }
  return precs;
}

nlohmann::json min_gpus(const MinGpusArgs& a) {
  const auto& m = resolve_model(a.model, a.model_file);
  models::ServingPolicy pol;
  pol.kind = models::parse_policy(a.policy);
  if (a.concurrency < 1) throw Error("--concurrency", "", "must be >= 1 clients, got " + std::to_string(a.concurrency));
  if (a.context < 0) throw Error("--context", "", "must be >= 0 tokens (0: the model's max_model_len), got " + std::to_string(a.context));
  pol.required_seqs = a.concurrency;
  pol.required_context = a.context;
  const std::vector<hw::Precision> precs = min_gpus_precisions(m, a.precisions, a.model_file.empty() ? a.model : "");
  std::vector<std::string> only = option_list(a.gpus, "--gpus");
  for (const auto& g : only) (void)hw::Catalog::global().gpu(g);  // unknown names list the known ones
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : models::min_gpu_table(m, precs, pol)) {
    if (!only.empty()) {
      bool keep = false;
      for (const auto& g : only) keep |= text::iequals(g, r.gpu);
      if (!keep) continue;
    }
    const int vendor = (m.name == "nemotron-3.5-super-vl") ? models::vendor_min_gpus(r.gpu, r.precision) : 0;
    const std::int64_t ctx = a.context > 0 ? a.context : r.plan.max_model_len;
    std::string note = r.note;
    if (vendor && r.min_gpus != vendor) note = "differs from the vendor's " + std::to_string(vendor) + "; " + note;
    j.push_back({{"gpu", r.gpu}, {"precision", std::string(hw::to_string(r.precision))}, {"min_gpus", r.min_gpus},
                 {"tp", r.par.tp}, {"pp", r.par.pp}, {"vendor_min_gpus", vendor ? nlohmann::json(vendor) : nlohmann::json(nullptr)},
                 {"run_as", r.run_as}, {"policy", a.policy}, {"note", note},
                 {"max_concurrent_seqs", r.min_gpus ? r.plan.max_concurrent_seqs(ctx) : 0}, {"context_tokens", ctx},
                 {"kv_cache", r.min_gpus ? kv_cache_json(r.plan, ctx) : nlohmann::json(nullptr)},
                 {"cache_bytes_per_gpu", r.plan.cache_bytes}, {"weight_bytes_per_gpu", r.plan.weight_bytes}});
  }
  return j;
}

}  // namespace servesim::api
