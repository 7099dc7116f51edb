// Minimum-GPU search over the TP/PP shapes vLLM deploys, under a stated serving policy.
#include "models/min_gpus.hpp"

#include <cmath>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"

namespace servesim::models {

PolicyKind parse_policy(std::string_view s, const std::string& where) {
  if (text::iequals(s, "vllm")) return PolicyKind::vllm;
  if (text::iequals(s, "vendor")) return PolicyKind::vendor;
  throw Error(where, "", "unknown policy \"" + std::string(s) + "\" (known: vllm, vendor)");
}

hw::Precision checkpoint_kv_dtype(hw::Precision w) {
  return w == hw::Precision::bf16 ? hw::Precision::bf16 : hw::Precision::fp8;
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
  // The vendor's Hopper NVFP4 cells only follow from 8-bit weights (see policy_text(vendor)).
  if (pol.kind == PolicyKind::vendor && p == hw::Precision::nvfp4 && !gpu.native(p)) sized = hw::Precision::fp8;
  try {
    plan = plan_memory(m, gpu, sized, par, cfg);
  } catch (const Error& e) {
    why = e.reason();
    return false;
  }
  if (pol.kind == PolicyKind::vendor) {
    const double need = pol.vendor_cache_to_weights * plan.weight_bytes;
    if (plan.cache_bytes >= need) return true;
    why = "cache " + human_bytes(plan.cache_bytes) + "/GPU < " + fixed(pol.vendor_cache_to_weights, 1) + " x weights " +
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
                 ? (pol.kind == PolicyKind::vendor ? "NVFP4 sized as 8-bit weights (vendor assumption)"
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
      last_why = std::to_string(n) + " GPUs: " + why;
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
  if (k == PolicyKind::vendor)
    return "Vendor-table policy (--policy vendor): what the vendor's minimum-GPU table for Nemotron 3.5 Super VL "
           "implies. The same memory plan as the default, but a shape passes only when the KV/Mamba-state cache left "
           "after weights, activations and reserve is at least twice the weights, and NVFP4 on Hopper (no native FP4) "
           "is sized as 8-bit weights. Every one of the 8 cells then follows with margin; no fixed concurrency x "
           "context target reproduces them, because the table's requirement scales with the weight bytes "
           "(BF16 needs 720-1080 GB of HBM in total, NVFP4 on Blackwell 180-270 GB).";
  return "Default serving policy (--policy vllm): one vLLM replica with its defaults - gpu_memory_utilization 0.9, "
         "max_num_batched_tokens 8192, max_num_seqs 256, CUDA graphs on, block_size 16 - and max_model_len = the "
         "config's max_position_embeddings (262,144 for Nemotron 3). Shapes: tensor parallel over 1, 2, 4 or 8 GPUs "
         "inside one NVLink domain, then whole nodes joined by pipeline parallelism. Weights are stored as the "
         "checkpoint says (embeddings, LM head, router, norms, Mamba conv/A/D/dt, vision encoder and the NVFP4 "
         "recipe's excluded attention/Mamba projections in BF16; NVFP4 adds one FP8 scale per 16 weights); GPUs "
         "without native FP4 (H100, H200) run NVFP4 checkpoints through vLLM's Marlin W4A16 kernels, so the "
         "weights stay 4-bit in memory. The KV cache is BF16 for BF16 checkpoints and FP8 for NVFP4/FP8 checkpoints "
         "(their hf_quant_config declares kv_cache_quant_algo FP8). The cache left after weights, the profile-run "
         "activation peak and the reserve (CUDA context, CUDA graphs, NCCL buffers) must hold 64 concurrent "
         "sequences - the top of the reference deployment's concurrency sweep - at max_model_len, each with its "
         "Mamba conv + fp32 SSM state and its attention KV (KV heads replicated when kv_heads < TP).";
}

}  // namespace servesim::models
