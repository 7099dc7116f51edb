// FLOPs and HBM bytes of each op family for a shape: the roofline numerators shared by the fit
// (measured points) and the predictions (queries), so both see the same physics.
#pragma once
#include <cstdint>

#include "hwmodels/catalog.hpp"
#include "hwmodels/fit.hpp"

namespace servesim::hw {

struct Work {
  double flops = 0;
  double bytes = 0;
};

// Bytes per element of a weight / activation in `p`; nvfp4 includes one fp8 scale per 16 values.
double element_bytes(Precision p);

// C[m,n] = A[m,k]·B[k,n] with activations in `act` and weights in `weights`, bf16 output.
Work gemm_work(double m, double n, double k, Precision weights, Precision act);
// Experts distinct experts touched by `tokens` slots routed with power-law exponent `skew` (0 = uniform).
double experts_touched(int experts, double tokens, double skew);
// How `tokens` slots land on `experts`: balanced = even split; skewed = Zipf(skew) over expert rank
// with largest-remainder rounding, as the measurement script routes them.
struct Routing {
  double max_tokens = 0;  // slots of the busiest expert
  double active = 0;      // experts with at least one slot
};
Routing route(int experts, double tokens, double skew);
// Weights of the `active` experts read once; activations in, outputs out.
Work grouped_gemm_work(double active, double tokens, double n, double k, Precision weights, Precision act);
// Causal prefill: QK^T and PV over the lower triangle.
Work attention_prefill_work(double batch, double seq, double heads, double kv_heads, double head_dim);
Work attention_decode_work(double batch, double context, double heads, double kv_heads, double head_dim);
// Mamba-2 SSD with chunk 128: intra-chunk CB^T and its product with x, plus state passing.
Work mamba_scan_work(double batch, double seqlen, double heads, double head_dim, double d_state, double groups);
// Selective state update: reads and writes the fp32 state of every head.
Work mamba_step_work(double batch, double heads, double head_dim, double d_state, double groups);
Work conv1d_work(double tokens, double channels, double kernel, bool decode);

// Log-space shape coordinates of each family (fit.hpp Features): what "a nearby shape" means.
Features gemm_features(double m, double n, double k);
Features grouped_gemm_features(int experts, double tokens, const Routing& r, double n, double k, double skew,
                               bool fp8 = false);
Features attention_features(double batch, double len, double heads, double kv_heads, double head_dim);
Features mamba_scan_features(double batch, double seqlen, double heads, double head_dim, double d_state, double groups);
Features mamba_step_features(double batch, double heads, double head_dim, double d_state, double groups);
Features conv1d_features(double tokens, double channels, double kernel);
Features bytes_features(double bytes);

}  // namespace servesim::hw
