// `servesim memory` (per-GPU memory plan) and `servesim min-gpus` (minimum-GPU table).
#include <string>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

struct MemoryOpts {
  std::string model, gpu, precision = "bf16", kv_dtype, model_file;
  int tp = 1, pp = 1, ep = 1, max_num_seqs = 256, spec = 0;
  std::int64_t context = 0, max_num_batched_tokens = 8192;
  double util = 0.9;
  Format format = Format::table;
};

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

void run_memory(const MemoryOpts& o) {
  const auto& m = o.model_file.empty() ? models::model(o.model) : models::add_model_file(o.model_file);
  const auto& gpu = hw::Catalog::global().gpu(o.gpu);
  const auto wp = hw::parse_precision(o.precision);
  models::EngineMemoryConfig cfg;
  cfg.gpu_memory_utilization = o.util;
  cfg.max_num_seqs = o.max_num_seqs;
  cfg.max_num_batched_tokens = o.max_num_batched_tokens;
  cfg.kv_cache_dtype = o.kv_dtype.empty() ? models::checkpoint_kv_dtype(wp) : hw::parse_precision(o.kv_dtype, "--kv-cache-dtype");
  cfg.num_speculative_tokens = o.spec;
  const auto p = models::plan_memory(m, gpu, wp, {o.tp, o.pp, o.ep}, cfg);
  const std::int64_t ctx = o.context > 0 ? o.context : p.max_model_len;
  auto j = plan_json(p, ctx);
  j["model"] = m.name;
  j["gpu"] = gpu.name;
  j["tp"] = o.tp;
  j["pp"] = o.pp;
  j["ep"] = o.ep;
  j["estimate"] = m.estimate;
  Table t({"item (per GPU)", "value"});
  t.add_row({"model / GPU", m.name + " on " + std::to_string(p.gpus) + "x " + gpu.name + " (tp " + std::to_string(o.tp) + ", pp " + std::to_string(o.pp) + ")"});
  t.add_row({"weights", human_bytes(p.weight_bytes) + " (" + p.weight_note + ")"});
  t.add_row({"  quantized linears", human_bytes(p.weights.quantized)});
  t.add_row({"  kept in BF16", human_bytes(p.weights.high_precision)});
  if (p.weights.vision > 0) t.add_row({"  vision encoder", human_bytes(p.weights.vision)});
  if (p.weights.mtp > 0) t.add_row({"  MTP layers", human_bytes(p.weights.mtp)});
  t.add_row({"activations (profile peak)", human_bytes(p.activation_bytes)});
  t.add_row({"reserve (context+graphs+NCCL)", human_bytes(p.reserve_bytes)});
  t.add_row({"budget (util x HBM)", human_bytes(p.budget_bytes) + " of " + human_bytes(p.gpu_total_bytes)});
  t.add_row({"cache (KV + state)", human_bytes(p.cache_bytes)});
  t.add_row({"KV per token (" + p.kv_precision + ")", human_bytes(p.kv_bytes_per_token)});
  t.add_row({"Mamba state per sequence", human_bytes(p.state_bytes_per_seq) + " (conv " + human_bytes(p.conv_state_bytes_per_seq) +
                                             ", SSM " + human_bytes(p.ssm_state_bytes_per_seq) + ")"});
  t.add_row({"KV capacity (replica)", std::to_string(p.kv_capacity_tokens) + " tokens, " + std::to_string(p.num_kv_blocks) + " blocks"});
  t.add_row({"max sequences at " + std::to_string(ctx), std::to_string(p.max_concurrent_seqs(ctx))});
  std::string text = t.render();
  if (m.estimate) text += "note: " + m.note + "\n";
  emit(o.format, j, text);
}

struct MinOpts {
  std::string model, precisions = "bf16,nvfp4", policy = "vllm", gpus;
  int seqs = 64;
  std::int64_t context = 0;
  Format format = Format::table;
};

void run_min_gpus(const MinOpts& o) {
  const auto& m = models::model(o.model);
  models::ServingPolicy pol;
  pol.kind = models::parse_policy(o.policy);
  pol.required_seqs = o.seqs;
  pol.required_context = o.context;
  std::vector<hw::Precision> precs;
  for (const auto& s : text::split_csv(o.precisions)) precs.push_back(hw::parse_precision(s));
  std::vector<std::string> only = text::split_csv(o.gpus);
  for (const auto& g : only) (void)hw::Catalog::global().gpu(g);  // unknown names list the known ones
  auto rows = models::min_gpu_table(m, precs, pol);
  nlohmann::json j = nlohmann::json::array();
  Table t({"gpu", "precision", "min_gpus", "tp x pp", "vendor", "run as", "max seqs @ctx", "note"});
  int disagree = 0;
  for (const auto& r : rows) {
    if (!only.empty()) {
      bool keep = false;
      for (const auto& g : only) keep |= text::iequals(g, r.gpu);
      if (!keep) continue;
    }
    const int vendor = (m.name == "nemotron-3.5-super-vl") ? models::vendor_min_gpus(r.gpu, r.precision) : 0;
    const std::int64_t ctx = o.context > 0 ? o.context : r.plan.max_model_len;
    std::string note = r.note;
    if (vendor && r.min_gpus != vendor) {
      ++disagree;
      note = "differs from the vendor's " + std::to_string(vendor) + "; " + note;
    }
    j.push_back({{"gpu", r.gpu}, {"precision", std::string(hw::to_string(r.precision))}, {"min_gpus", r.min_gpus},
                 {"tp", r.par.tp}, {"pp", r.par.pp}, {"vendor_min_gpus", vendor ? nlohmann::json(vendor) : nlohmann::json(nullptr)},
                 {"run_as", r.run_as}, {"policy", o.policy}, {"note", note},
                 {"max_concurrent_seqs", r.min_gpus ? r.plan.max_concurrent_seqs(ctx) : 0}, {"context_tokens", ctx},
                 {"cache_bytes_per_gpu", r.plan.cache_bytes}, {"weight_bytes_per_gpu", r.plan.weight_bytes}});
    t.add_row({r.gpu, std::string(hw::to_string(r.precision)), r.min_gpus ? std::to_string(r.min_gpus) : "none",
               std::to_string(r.par.tp) + "x" + std::to_string(r.par.pp), vendor ? std::to_string(vendor) : "-", r.run_as,
               r.min_gpus ? std::to_string(r.plan.max_concurrent_seqs(ctx)) + " @" + std::to_string(ctx) : "-", note});
  }
  std::string text = t.render() + "policy: " + models::policy_text(pol.kind) + "\n";
  if (disagree)
    text += "note: " + std::to_string(disagree) + " cell(s) differ from the vendor's table; `--policy vendor` states what the vendor must have assumed.\n";
  if (m.estimate) text += "note: " + m.note + "\n";
  emit(o.format, j, text);
}

}  // namespace

void add_memory_commands(CLI::App& app) {
  static MemoryOpts mo;
  auto* mem = app.add_subcommand("memory", "Per-GPU memory plan of one replica (vLLM gpu_memory_utilization semantics)");
  mem->add_option("--model", mo.model, "Model name (servesim list models)");
  mem->add_option("--model-file", mo.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  mem->add_option("--gpu", mo.gpu, "GPU name")->required();
  mem->add_option("--precision", mo.precision, "Weights: bf16 | fp8 | nvfp4");
  mem->add_option("--kv-cache-dtype", mo.kv_dtype, "KV cache dtype (default: the checkpoint's: bf16, or fp8 for fp8/nvfp4)");
  mem->add_option("--tp", mo.tp, "Tensor parallel size");
  mem->add_option("--pp", mo.pp, "Pipeline parallel size");
  mem->add_option("--ep", mo.ep, "Expert parallel size (1: experts TP-sharded)");
  mem->add_option("--context", mo.context, "Context length for the concurrency figure (default max_model_len)");
  mem->add_option("--gpu-memory-utilization", mo.util, "vLLM gpu_memory_utilization");
  mem->add_option("--max-num-seqs", mo.max_num_seqs, "vLLM max_num_seqs");
  mem->add_option("--max-num-batched-tokens", mo.max_num_batched_tokens, "vLLM max_num_batched_tokens");
  mem->add_option("--num-speculative-tokens", mo.spec, "MTP draft tokens (loads MTP weights)");
  add_format_option(*mem, mo.format);
  mem->callback([] {
    if (mo.model.empty() && mo.model_file.empty()) throw Error("--model", "", "required (or --model-file)");
    run_memory(mo);
  });

  static MinOpts no;
  auto* mg = app.add_subcommand("min-gpus", "Minimum GPUs per GPU type and precision under the default serving policy");
  mg->add_option("--model", no.model, "Model name")->required();
  mg->add_option("--precisions", no.precisions, "Comma-separated precisions (default bf16,nvfp4)");
  mg->add_option("--gpus", no.gpus, "Comma-separated GPU names (default all)");
  mg->add_option("--policy", no.policy, "vllm (default) | vendor");
  mg->add_option("--concurrency", no.seqs, "vllm policy: concurrent sequences the cache must hold (default 64)");
  mg->add_option("--context", no.context, "vllm policy: context of each (default max_model_len)");
  add_format_option(*mg, no.format);
  mg->callback([] { run_min_gpus(no); });
}

}  // namespace servesim::cli
