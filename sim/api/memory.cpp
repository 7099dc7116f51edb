// api: the memory plan of one replica and the minimum-GPU table.
#include "common/error.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "sim/api/api.hpp"

namespace servesim::api {
namespace {

nlohmann::json plan_json(const models::MemoryPlan& p, std::int64_t ctx) {
  return {{"gpus", p.gpus}, {"gpu_total_bytes", p.gpu_total_bytes}, {"budget_bytes", p.budget_bytes},
          {"weight_bytes", p.weight_bytes}, {"weights_quantized_bytes", p.weights.quantized},
          {"weights_high_precision_bytes", p.weights.high_precision}, {"weights_vision_bytes", p.weights.vision},
          {"weights_mtp_bytes", p.weights.mtp}, {"activation_bytes", p.activation_bytes}, {"reserve_bytes", p.reserve_bytes},
          {"cuda_graph_bytes", p.cuda_graph_bytes}, {"nccl_bytes", p.nccl_bytes}, {"context_bytes", p.context_bytes},
          {"cache_bytes", p.cache_bytes}, {"kv_bytes_per_token", p.kv_bytes_per_token}, {"state_bytes_per_seq", p.state_bytes_per_seq},
          {"conv_state_bytes_per_seq", p.conv_state_bytes_per_seq}, {"ssm_state_bytes_per_seq", p.ssm_state_bytes_per_seq},
          {"state_slots", p.state_slots}, {"kv_capacity_tokens", p.kv_capacity_tokens}, {"num_kv_blocks", p.num_kv_blocks},
          {"max_model_len", p.max_model_len}, {"context_tokens", ctx}, {"max_concurrent_seqs", p.max_concurrent_seqs(ctx)},
          {"weight_precision", p.weight_precision}, {"kv_cache_dtype", p.kv_precision}, {"weight_note", p.weight_note}};
}

}  // namespace

nlohmann::json memory(const MemoryArgs& a) {
  if (a.model.empty() && a.model_file.empty()) throw Error("--model", "", "required (or --model-file)");
  const auto& m = a.model_file.empty() ? models::model(a.model) : models::add_model_file(a.model_file);
  const auto& gpu = hw::Catalog::global().gpu(a.gpu);
  const auto wp = hw::parse_precision(a.precision);
  models::EngineMemoryConfig cfg;
  cfg.gpu_memory_utilization = a.gpu_memory_utilization;
  cfg.max_num_seqs = a.max_num_seqs;
  cfg.max_num_batched_tokens = a.max_num_batched_tokens;
  cfg.kv_cache_dtype = a.kv_cache_dtype.empty() || text::iequals(a.kv_cache_dtype, "auto")
                           ? models::checkpoint_kv_dtype(wp)
                           : hw::parse_precision(a.kv_cache_dtype, "--kv-cache-dtype");
  cfg.num_speculative_tokens = a.num_speculative_tokens;
  if (a.context < 0) throw Error("--context", "", "must be >= 0 (0: max_model_len)");
  const auto p = models::plan_memory(m, gpu, wp, {a.tp, a.pp, a.ep}, cfg);
  const std::int64_t ctx = a.context > 0 ? a.context : p.max_model_len;
  auto j = plan_json(p, ctx);
  j["model"] = m.name;
  j["gpu"] = gpu.name;
  j["tp"] = a.tp;
  j["pp"] = a.pp;
  j["ep"] = a.ep;
  j["estimate"] = m.estimate;
  j["note"] = m.note;
  return j;
}

nlohmann::json min_gpus(const MinGpusArgs& a) {
  const auto& m = models::model(a.model);
  models::ServingPolicy pol;
  pol.kind = models::parse_policy(a.policy);
  pol.required_seqs = a.concurrency;
  pol.required_context = a.context;
  std::vector<hw::Precision> precs;
  for (const auto& s : text::split_csv(a.precisions)) precs.push_back(hw::parse_precision(s, "--precisions"));
  if (precs.empty()) throw Error("--precisions", "", "is empty; known: bf16, fp8, nvfp4, int8");
  std::vector<std::string> only = text::split_csv(a.gpus);
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
                 {"cache_bytes_per_gpu", r.plan.cache_bytes}, {"weight_bytes_per_gpu", r.plan.weight_bytes}});
  }
  return j;
}

}  // namespace servesim::api
