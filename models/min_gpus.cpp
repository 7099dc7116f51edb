// Minimum-GPU search over the TP/PP shapes vLLM deploys, under a stated serving policy.
#include "models/min_gpus.hpp"

#include <cmath>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"

namespace servesim::models {

PolicyKind parse_policy(std::string_view s, const std::string& where) {
  if (text::iequals(s, "headroom") || text::iequals(s, "vendor")) return PolicyKind::headroom;
  if (text::iequals(s, "vllm")) return PolicyKind::vllm;
  throw Error(where, "", "unknown policy \"" + std::string(s) + "\" (known: headroom, vllm)");
}

int vendor_min_gpus(std::string_view gpu, hw::Precision p) {
  const std::string g = text::lower(gpu);
  const bool bf16 = p == hw::Precision::bf16, fp4 = p == hw::Precision::nvfp4;
  if (!bf16 && !fp4) return 0;
  if (g == "b200" || g == "gb200") return bf16 ? 8 : 2;
  if (g == "b300" || g == "gb300") return bf16 ? 4 : 1;
  if (g == "h200") return bf16 ? 8 : 4;
  if (g == "h100") return bf16 ? 16 : 8;
  return 0;
}

namespace {

std::vector<Parallelism> shapes(const ModelSpec& m, int n, int domain) {
  std::vector<Parallelism> out;
  if (n <= domain) {
    if ((n & (n - 1)) == 0) out.push_back({n, 1, 1});  // powers of two inside one NVLink domain
  } else if (n % domain == 0) {
    out.push_back({domain, n / domain, 1});             // full nodes, PP across them
  }
  (void)m;
  return out;
}

// Does this shape hold the policy? Fills `why` with the shortfall.
bool holds(const ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision p, const Parallelism& par,
           const ServingPolicy& pol, MemoryPlan& plan, std::string& why) {
  EngineMemoryConfig cfg = pol.engine;
  cfg.kv_cache_dtype = checkpoint_kv_dtype(p);
  hw::Precision sized = p;
  // Without FP4 tensor cores the headroom policy serves the FP8 checkpoint (see policy_text()).
  if (pol.kind == PolicyKind::headroom && p == hw::Precision::nvfp4 && !gpu.native(p)) sized = hw::Precision::fp8;
  try {
    plan = plan_memory(m, gpu, sized, par, cfg);
  } catch (const Error& e) {
    why = e.reason();
    return false;
  }
  if (pol.kind == PolicyKind::headroom) {
    const double need = pol.headroom_cache_to_weights * plan.weight_bytes;
    if (plan.cache_bytes >= need) return true;
    why = "cache " + human_bytes(plan.cache_bytes) + "/GPU < " + fixed(pol.headroom_cache_to_weights, 1) + " x weights " +
          human_bytes(plan.weight_bytes) + "/GPU";
    return false;
  }
  const std::int64_t ctx = pol.required_context > 0 ? pol.required_context : plan.max_model_len;
  const int seqs = plan.max_concurrent_seqs(ctx);
  if (seqs >= pol.required_seqs) return true;
  why = "holds " + std::to_string(seqs) + " of " + std::to_string(pol.required_seqs) + " sequences at " +
        std::to_string(ctx) + " tokens (cache " + human_bytes(plan.cache_bytes) + "/GPU)";
  return false;
}

}  // namespace

MinGpuResult min_gpus(const ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision p, const ServingPolicy& pol) {
  MinGpuResult r;
  r.gpu = gpu.name;
  r.precision = p;
  r.run_as = (p == hw::Precision::nvfp4 && !gpu.native(p))
                 ? (pol.kind == PolicyKind::headroom ? "FP8 checkpoint (no FP4 tensor cores)"
                                                   : "NVFP4 via Marlin W4A16 (weights stay 4-bit)")
                 : std::string(hw::to_string(p)) + " native";
  std::string last_why;
  for (int n = 1; n <= pol.max_gpus; ++n) {
    for (const auto& par : shapes(m, n, pol.nvlink_domain)) {
      MemoryPlan plan;
      std::string why;
      if (holds(m, gpu, p, par, pol, plan, why)) {
        r.min_gpus = n;
        r.par = par;
        r.plan = plan;
        r.note = last_why.empty() ? "" : "smaller: " + last_why;
        return r;
      }
      last_why = std::to_string(n) + (n == 1 ? " GPU: " : " GPUs: ") + why;
    }
  }
  r.note = "does not fit within " + std::to_string(pol.max_gpus) + " GPUs; " + last_why;
  return r;
}

std::vector<MinGpuResult> min_gpu_table(const ModelSpec& m, const std::vector<hw::Precision>& precisions,
                                        const ServingPolicy& pol) {
  std::vector<MinGpuResult> out;
  for (const auto& gpu : hw::Catalog::global().gpus())
    for (auto p : precisions) {
      ServingPolicy local = pol;
      local.nvlink_domain = std::min(pol.nvlink_domain, gpu.nvlink_domain);
      out.push_back(min_gpus(m, gpu, p, local));
    }
  return out;
}

std::string policy_text(PolicyKind k) {
  if (k == PolicyKind::headroom)
    return "Default serving policy (--policy headroom): one vLLM replica with vLLM's defaults - "
           "gpu_memory_utilization 0.9, max_num_batched_tokens 8192, max_num_seqs 1024 (vllm serve on >= 70 GiB GPUs), CUDA graphs on, block_size 16, "
           "max_model_len = the config's max_position_embeddings - on tensor parallel 1, 2, 4 or 8 GPUs inside one "
           "NVLink domain, then whole nodes joined by pipeline parallelism. Weights are stored as the checkpoint "
           "stores them (embeddings, LM head, router, norms, Mamba conv/A/D/dt, vision encoder and the NVFP4 recipe's "
           "excluded projections in BF16; NVFP4 adds one FP8 scale per 16 weights); the KV cache is BF16 for BF16 "
           "checkpoints and FP8 for FP8/NVFP4 checkpoints (their hf_quant_config declares FP8 KV). A shape passes when "
           "the KV/Mamba-state cache left after weights, the profile-run activation peak and the reserve (CUDA "
           "context, graphs, NCCL buffers) is at least twice the weights on every GPU: room for the concurrency a "
           "replica is bought for, whatever the precision. GPUs without FP4 tensor cores (H100, H200) serve an NVFP4 "
           "request from the model's FP8 checkpoint, their fastest native format (vLLM could run NVFP4 weight-only "
           "through Marlin W4A16, but with BF16 math). These two rules reproduce all 8 cells of the vendor's table "
           "for Nemotron 3.5 Super VL with margin. No fixed concurrency x context target does (--policy vllm shows "
           "one): the table's requirement scales with the weight bytes (BF16 needs more than 720 GB and at most "
           "1080 GB of HBM in total, NVFP4 on Blackwell more than 180 and at most 270 GB).";
  return "Concurrency policy (--policy vllm): the same vLLM replica and memory plan, with GPUs without native FP4 "
         "running NVFP4 checkpoints through vLLM's Marlin W4A16 kernels (weights stay 4-bit in memory); the cache "
         "must hold --concurrency sequences (default 64, the reference sweep's middle) at --context tokens (default "
         "max_model_len) in vLLM's shared block pool: cdiv(context, block_size) attention blocks plus one state block per "
         "Mamba group each, the attention block size raised to hold a Mamba state page (KV heads replicated when "
         "kv_heads < TP). For Nemotron 3.5 Super VL it needs fewer GPUs than the vendor's table on B200/GB200, "
         "B300/GB300 BF16 and Hopper NVFP4, because BF16 weights are 4x the NVFP4 bytes while the cache it asks for "
         "is the same.";
}

}  // namespace servesim::models
