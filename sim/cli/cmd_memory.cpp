// `servesim memory` (per-GPU memory plan) and `servesim min-gpus` (minimum-GPU table); the data
// comes from sim/api, this file renders it.
#include <string>

#include "common/table.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "sim/api/api.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

std::string str(const nlohmann::json& v) { return v.get<std::string>(); }
std::string bytes(const nlohmann::json& v) { return human_bytes(v.get<double>()); }
std::string num(const nlohmann::json& v) { return std::to_string(v.get<std::int64_t>()); }
// A tier's source names its link before the first colon (the JSON has the whole source).
std::string link_name(const std::string& source) { return source.substr(0, source.find(':')); }

void run_memory(const api::MemoryArgs& a, Format format) {
  const auto j = api::memory(a);
  Table t({"item (per GPU)", "value"});
  const std::int64_t dp = j.value("dp", 1), ep = j.value("ep", 1);
  t.add_row({"model / GPU", str(j["model"]) + " on " + num(j["gpus"]) + "x " + str(j["gpu"]) + " (tp " + num(j["tp"]) +
                                ", pp " + num(j["pp"]) + (dp > 1 ? ", dp " + std::to_string(dp) : "") +
                                (dp > 1 || ep > 1 ? ", ep " + std::to_string(ep) : "") + ")"});
  t.add_row({"weights", bytes(j["weight_bytes"]) + " (" + str(j["weight_note"]) + ")"});
  t.add_row({"  quantized linears", bytes(j["weights_quantized_bytes"])});
  t.add_row({"  kept in BF16", bytes(j["weights_high_precision_bytes"])});
  if (j["weights_vision_bytes"].get<double>() > 0) t.add_row({"  vision encoder", bytes(j["weights_vision_bytes"])});
  if (j["weights_mtp_bytes"].get<double>() > 0) t.add_row({"  MTP layers", bytes(j["weights_mtp_bytes"])});
  t.add_row({"activations (profile peak)", bytes(j["activation_bytes"])});
  t.add_row({"non-torch (NCCL buffers)", bytes(j["reserve_bytes"])});
  const std::string planner = str(j["memory_planner"]);
  const std::string frac = fixed(j["memory_fraction"].get<double>(), 3);
  if (planner == "trtllm") {
    // TRT-LLM: free_gpu_memory_fraction of what the warm-up's peak leaves.
    t.add_row({"warm-up peak", bytes(j["peak_bytes"]) + " (weights + activations + CUDA graphs, prior, + CUDA context + NCCL)"});
    t.add_row({"free after the peak", bytes(j["budget_bytes"]) + " of " + bytes(j["gpu_total_bytes"])});
    t.add_row({"cache (KV + state)", bytes(j["cache_bytes"]) + " (free_gpu_memory_fraction " + frac + " x free)"});
  } else if (planner == "sglang") {
    t.add_row({"budget (mem_fraction_static x HBM)", bytes(j["budget_bytes"]) + " of " + bytes(j["gpu_total_bytes"]) +
                                                       " (mem_fraction_static " + frac + ")"});
    t.add_row({"CUDA context (measured)", bytes(j["context_bytes"]) + ", taken from the budget"});
    t.add_row({"outside the budget", "activations + graphs (" + bytes(j["cuda_graph_bytes"]) + ", prior) in the " +
                                         bytes(j["gpu_total_bytes"].get<double>() - j["budget_bytes"].get<double>()) + " headroom"});
  } else {
    t.add_row({"budget (util x HBM)", bytes(j["budget_bytes"]) + " of " + bytes(j["gpu_total_bytes"])});
  }
  if (planner == "vllm") {
    const double outside = j["context_bytes"].get<double>() + j["cuda_graph_bytes"].get<double>();
    const double headroom = j["gpu_total_bytes"].get<double>() - j["budget_bytes"].get<double>();
    t.add_row({"outside the budget", bytes(outside) + " (CUDA context, measured, + graphs, prior) in the " + bytes(headroom) + " headroom" +
                                         (outside > headroom ? ": TOO LITTLE, lower gpu_memory_utilization" : "")});
  }
  if (planner != "trtllm") t.add_row({"cache (KV + state)", bytes(j["cache_bytes"])});
  t.add_row({"KV per token (" + str(j["kv_cache_dtype"]) + ")", bytes(j["kv_bytes_per_token"])});
  t.add_row({"state per sequence", bytes(j["state_bytes_per_seq"]) + " (conv " + bytes(j["conv_state_bytes_per_seq"]) +
                                             ", SSM " + bytes(j["ssm_state_bytes_per_seq"]) + ")"});
  const auto& kv = j["kv_cache"];
  const std::int64_t bs = kv["block_size"].get<std::int64_t>(), usable = kv["usable_blocks"].get<std::int64_t>();
  const std::int64_t state_blocks = kv["state_blocks_per_seq"].get<std::int64_t>();
  std::string blocks = num(kv["num_blocks"]) + " x " + num(kv["block_size"]) + " tokens (" + std::to_string(usable) + " usable)";
  if (state_blocks == 0) blocks += " = " + std::to_string(usable * bs) + " tokens";
  t.add_row({"KV cache blocks", blocks});
  t.add_row({"  per block (" + num(kv["tensors"]) + " layers)", bytes(kv["bytes_per_block"]) + " (" + bytes(kv["page_bytes"]) + " page)"});
  t.add_row({"  groups", str(kv["layout"])});
  const std::int64_t per = kv["blocks_per_seq"].get<std::int64_t>();
  std::string per_seq = std::to_string(per);
  if (state_blocks > 0) per_seq += " (" + std::to_string(per - state_blocks) + " attention + " + std::to_string(state_blocks) + " state)";
  if (j.contains("vision_tokens_per_request"))
    t.add_row({"context", num(j["context_tokens"]) + " tokens (--context " + std::to_string(a.context) + " + " +
                              num(j["vision_tokens_per_request"]) + " vision tokens of --images)"});
  t.add_row({"blocks per sequence at " + num(j["context_tokens"]), per_seq});
  if (dp > 1) t.add_row({"data-parallel ranks", std::to_string(dp) + ", each with its own KV cache blocks above"});
  t.add_row({"max sequences at " + num(j["context_tokens"]) + (dp > 1 ? " (all ranks)" : ""),
             num(kv["max_concurrent_seqs"]) + " (" + str(kv["bound"]) + " binds; cache " + num(kv["max_seqs_by_cache"]) +
                 ", max_num_seqs " + num(kv["max_num_seqs"]) + ")"});
  if (j.contains("kv_offload")) {   // offload tiers beside the pool (Dynamo KVBM / LMCache style)
    const auto& o = j["kv_offload"];
    const std::int64_t ctx = o["context_tokens"].get<std::int64_t>();
    t.add_row({"KV offload (per replica of " + num(o["replica_gpus"]) + " GPU" + (o["replica_gpus"].get<int>() > 1 ? "s" : "") + ")",
               "one block " + bytes(o["block_bytes_per_gpu"]) + " per GPU" +
                   (o["state_bytes_per_seq_per_gpu"].get<double>() > 0
                        ? ", a hit's Mamba state " + bytes(o["state_bytes_per_seq_per_gpu"]) + " per GPU"
                        : std::string()) +
                   (o.contains("instance") ? "; host share of " + str(o["instance"]) : std::string())});
    for (const auto& x : o["tiers"]) {
      t.add_row({"  " + str(x["name"]) + " tier", bytes(x["capacity_bytes"]) + " = " + num(x["capacity_blocks"]) + " blocks = " +
                                                   num(x["capacity_tokens"]) + " tokens (" + num(x["sequences_at_context"]) +
                                                   " sequences at " + std::to_string(ctx) + ")"});
      t.add_row({"    link", fixed(x["bytes_per_s"].get<double>() / 1e9, 1) + " GB/s per GPU + " +
                                 fixed(1e6 * x["latency_s"].get<double>(), 1) + " us (" + link_name(str(x["source"])) + ")"});
      t.add_row({"    onboard " + std::to_string(ctx) + " tokens", num(x["onboard_blocks"]) + " blocks, " + bytes(x["onboard_bytes"]) +
                                                              " per GPU: " + fixed(1e3 * x["onboard_s"].get<double>(), 3) + " ms"});
    }
  }
  const models::Parallelism par{j["tp"].get<int>(), j["pp"].get<int>(), j["ep"].get<int>(), j["dp"].get<int>()};
  std::string text = "servesim memory: " + str(j["model"]) + " on " + str(j["gpu"]) + ", " + par.label() + ", " + str(j["precision"]) +
                     " weights, KV " + str(j["kv_cache_dtype"]) +
                     (planner == "vllm" && str(j["engine"]) == "vllm serve defaults" ? std::string() : ", " + str(j["engine"])) +
                     "\n" + defaults_line(j["defaults"]) + t.render();
  if (planner == "sglang")
    text += "note: SGLang caps running requests at " + num(j["max_num_seqs"]) +
            " (min(max(tokens / context x 512, 2048), 4096) request slots and tokens / 2).\n";
  if (kv["state_page_bytes"].get<double>() > 0 && kv["attn_bytes_per_token_per_layer"].get<double>() > 0)
    text += "note: vLLM's hybrid allocator raises block_size from " + num(kv["requested_block_size"]) + " to " +
            num(kv["block_size"]) + " so one attention page (" + num(kv["block_size"]) + " tokens x " +
            fixed(kv["attn_bytes_per_token_per_layer"].get<double>(), 0) + " B) holds a state page (" +
            fixed(kv["state_page_bytes"].get<double>(), 0) + " B); a sequence holds " +
            std::to_string(state_blocks) + " state blocks while it runs" +
            (kv["lookahead_tokens"].get<int>() > 0 ? " (1 + K per Mamba group, K = " + num(kv["lookahead_tokens"]) + " MTP tokens)" : std::string()) +
            ".\n";
  if (j["estimate"].get<bool>()) text += "note: " + str(j["note"]) + "\n";
  emit(format, j, text);
}

void run_min_gpus(const api::MinGpusArgs& a, Format format) {
  const auto j = api::min_gpus(a);
  Table t({"gpu", "precision", "min_gpus", "tp x pp", "vendor", "run as", "max seqs @ctx", "note"});
  int disagree = 0, listed = 0;
  for (const auto& r : j) {
    const int mg = r["min_gpus"].get<int>();
    const bool vendor = !r["vendor_min_gpus"].is_null();
    listed += vendor;
    if (vendor && r["vendor_min_gpus"].get<int>() != mg) ++disagree;
    t.add_row({str(r["gpu"]), str(r["precision"]), mg ? std::to_string(mg) : "none", num(r["tp"]) + "x" + num(r["pp"]),
               vendor ? num(r["vendor_min_gpus"]) : "-", str(r["run_as"]),
               mg ? num(r["max_concurrent_seqs"]) + " @" + num(r["context_tokens"]) : "-", str(r["note"])});
  }
  const auto& m = api::resolve_model(a.model, a.model_file);
  std::string precs;
  for (const auto p : api::min_gpus_precisions(m, a.precisions, a.model_file.empty() ? a.model : "")) precs += (precs.empty() ? "" : ", ") + std::string(hw::to_string(p));
  std::string text = "servesim min-gpus: " + m.name + ", precisions " + precs + ", policy " + a.policy + "\n" +
                     (a.precisions.empty() ? "(defaults: precisions " + precs + " (the checkpoint's, and nvfp4))\n"
                                           : std::string()) +
                     t.render() + "policy: " + models::policy_text(models::parse_policy(a.policy)) + "\n" +
                     (listed ? "vendor: the fewest GPUs the model's vendor lists for serving it with vLLM on that GPU and "
                               "precision (its published table, for comparison; '-': not listed)\n"
                             : "vendor: '-' in every row: servesim holds a vendor's minimum-GPU table only for nemotron-3.5-super-vl\n");
  if (disagree)
    text += "note: " + std::to_string(disagree) + " row(s) differ from the vendor's table (column 'vendor').\n";
  if (m.estimate) text += "note: " + m.note + "\n";
  emit(format, j, text);
}

}  // namespace

void add_memory_commands(CLI::App& app) {
  static api::MemoryArgs mo;
  static Format mf = Format::table;
  auto* mem = app.add_subcommand("memory", "Per-GPU memory plan of one replica (vLLM's planner, or --engine sglang / trtllm's)");
  mem->add_option("--engine", mo.engine, "Engine profile whose defaults and memory planner apply (vllm, sglang, trtllm, or a release: servesim list engines; default vLLM serve's defaults)");
  mem->add_option("--model", mo.model, "Model name (servesim list models) or its Hugging Face id");
  mem->add_option("--model-file", mo.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  mem->add_option("--gpu", mo.gpu, "GPU name (default h200)");
  mem->add_option("--precision", mo.precision, "Weights: bf16 | fp8 | fp8_block | nvfp4 | mxfp4 | int4 | int8 (default: the checkpoint's)");
  mem->add_option("--kv-cache-dtype", mo.kv_cache_dtype, "KV cache dtype (default: the checkpoint's: bf16, or fp8 for fp8/nvfp4; --engine sglang: a DSA model's bf16 on Hopper, fp8 on Blackwell)");
  mem->add_option("--tp", mo.tp, "Tensor parallel size (default: the smallest TP x PP that serves the model, as min-gpus)")
      ->check(CLI::Range(1, 1 << 20));
  mem->add_option("--pp", mo.pp, "Pipeline parallel size");
  mem->add_option("--ep", mo.ep, "Expert parallel size (1: experts TP-sharded; tp x dp: whole experts; on --engine trtllm / sglang a divisor of it: MoE TP x EP)");
  mem->add_option("--dp", mo.dp, "Attention data-parallel ranks (MoE models): each holds its own KV cache");
  mem->add_option("--context", mo.context, "Context length for the concurrency figure (default max_model_len)");
  mem->add_option("--images", mo.images, "WxH[:N],...: a request's images (vision models); their vision tokens add to --context, as simulate, plan and recommend count them");
  mem->add_option("--gpu-memory-utilization", mo.gpu_memory_utilization,
                  "vLLM gpu_memory_utilization (default 0.9); SGLang mem_fraction_static (default its heuristic); TRT-LLM free_gpu_memory_fraction (default 0.9)");
  mem->add_option("--max-num-seqs", mo.max_num_seqs, "vLLM max_num_seqs (default: vLLM serve's, 1024 on >= 70 GiB GPUs)");
  mem->add_option("--max-num-batched-tokens", mo.max_num_batched_tokens, "vLLM max_num_batched_tokens (default: vLLM serve's, 8192 on >= 70 GiB GPUs)");
  mem->add_option("--block-size", mo.block_size, "KV block (page) size (default the engine's: vLLM 16, hybrid models raised to match the state page; SGLang 1, 64 on Blackwell; TRT-LLM 32)");
  mem->add_option("--num-speculative-tokens", mo.num_speculative_tokens, "MTP draft tokens K (loads MTP weights; K lookahead slots and 1 + K state blocks per Mamba group)");
  mem->add_option("--kv-offload", mo.kv_offload, "KV offload tiers per replica, cpu:GIB[,disk:GIB]: each tier's blocks, tokens, link and the onboarding of --context tokens");
  add_format_option(*mem, mf);
  mem->callback([] { run_memory(mo, mf); });

  static api::MinGpusArgs no;
  static Format nf = Format::table;
  auto* mg = app.add_subcommand("min-gpus", "Minimum GPUs per GPU type and precision under the default serving policy");
  mg->add_option("--model", no.model, "Model name (servesim list models) or its Hugging Face id");
  mg->add_option("--model-file", no.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  mg->add_option("--precisions", no.precisions, "Comma-separated precisions (default: the checkpoint's and nvfp4)");
  mg->add_option("--gpus", no.gpus, "Comma-separated GPU names (default all)");
  mg->add_option("--policy", no.policy, "headroom (default: cache >= 2x weights, FP8 on GPUs without FP4) | vllm (a concurrency x context target)");
  mg->add_option("--concurrency", no.concurrency, "vllm policy: concurrent sequences the cache must hold (default 64)");
  mg->add_option("--context", no.context, "vllm policy: context of each (default max_model_len)");
  add_format_option(*mg, nf);
  mg->callback([] { run_min_gpus(no, nf); });
}

}  // namespace servesim::cli
