// A kernel model with each family's time multiplied by a factor: what a user's calibration on their
// own measured runs learns about their cluster and engine build (GEMMs 1.3x the tables', say).
#pragma once
#include <memory>
#include <string>

#include "hwmodels/kernel_model.hpp"

namespace servesim::hw {

// Time factors per kernel family on top of the tables (1 = as measured). gemm: dense linear layers
// (and the LM head); moe: fused MoE and grouped expert GEMMs; attention: prefill, decode and encoder
// attention; communication: all-reduce and collectives, transfers. prefill: a further factor on
// compute-bound work, whatever its family: prefill and encoder attention whole, and a GEMM or MoE
// query of m tokens with weight m / (m + 512) (a decode batch of 16 takes 3 % of it, a 4,096-token
// chunk 89 %): a cluster whose tensor throughput differs from the tables' more than its bandwidth.
// decode_attention: a further factor on decode attention alone (paged attention over the KV cache,
// bound by HBM bandwidth and growing with the context, where prefill attention is compute-bound).
// decode: prefill's counterpart on bandwidth-bound work, whatever its family: decode attention whole,
// and a GEMM or MoE query of m tokens with weight 512 / (m + 512) (a decode batch of 16 takes 97 % of
// it, a 4,096-token chunk 11 %): a cluster whose HBM-bound steps differ from the tables more than its
// prefill (the two together are a prefill and a decode time scale). custom_allreduce: a further
// factor on the TP all-reduces timed as vLLM's custom all-reduce (the kernel vLLM picks below its size
// limit: a decode step's messages, and on Hopper TP 2-4 prefill chunks up to 8 MiB), on top of
// communication. mixer: the linear-time token mixers of hybrid models, their own kernel family (Mamba-2's
// chunked scan and recurrent step, their causal conv1d, Gated DeltaNet's prefill and decode): a build's
// SSM or linear-attention kernels, which none of the factors above reach.
struct KernelScales {
  double gemm = 1, moe = 1, attention = 1, communication = 1, prefill = 1, decode_attention = 1, decode = 1, custom_allreduce = 1,
         mixer = 1;
  bool identity() const {
    return gemm == 1 && moe == 1 && attention == 1 && communication == 1 && prefill == 1 && decode_attention == 1 && decode == 1 &&
           custom_allreduce == 1 && mixer == 1;
  }
  bool operator==(const KernelScales&) const = default;
};

// `base` (which must outlive the result) with its times scaled; its provenance names the factors.
std::unique_ptr<KernelModel> scaled_kernel_model(const KernelModel& base, const KernelScales& scales);

}  // namespace servesim::hw
