// vLLM's sampler: the GPU work an engine step does on the logits after the forward, measured on the
// H200 (hwmodels/data/sampler_h200.json) by batch, vocabulary and sampling mode, and carried to
// other GPUs by the HBM bandwidth ratio (every op of it streams the batch x vocab logits).
#pragma once
#include <string_view>

#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"

namespace servesim::hw {

// What vLLM v1's Sampler runs (TopKTopPSampler.forward_native, the default): greedy = argmax;
// random = temperature, softmax, exponential draw, argmax; top_k = the same after torch.topk;
// top_p and top_k_top_p = the same after a full sort of the vocabulary.
enum class SamplingMode { greedy, random, top_k, top_p, top_k_top_p };
std::string_view to_string(SamplingMode m);
// The mode a request's sampling parameters select (vLLM: temperature < 1e-5 is greedy; top_k <= 0
// or >= vocab and top_p >= 1 are off).
SamplingMode sampling_mode(double temperature, int top_k, double top_p);

// GPU time of one sampler call over `rows` logits rows (one per request scheduled in the step,
// 1 + draft tokens for a speculative decode) of `vocab` entries. 0 for rows <= 0. Log-log in rows
// and linear in vocabulary between the measured points, proportional beyond them.
OpTime sampler(const GpuSpec& gpu, std::int64_t vocab, double rows, SamplingMode mode);

}  // namespace servesim::hw
