#include "hwmodels/scaled_kernel_model.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

namespace servesim::hw {
namespace {

constexpr double kPrefillHalfTokens = 512;   // m at which a query takes half the prefill (and half the decode) factor

OpTime scaled(OpTime t, double f) {
  t.seconds *= f;
  t.cold_weights_s *= f;
  return t;
}

class Scaled final : public KernelModel {
 public:
  Scaled(const KernelModel& base, const KernelScales& s) : b_(base), s_(s) {}

  // The prefill factor's share for a query of m tokens, and the decode factor's (the rest).
  double compute(double f, double m) const {
    const double w = m / (m + kPrefillHalfTokens);
    return f * (s_.prefill == 1 ? 1 : std::pow(s_.prefill, w)) * (s_.decode == 1 ? 1 : std::pow(s_.decode, 1 - w));
  }
  OpTime gemm(std::int64_t m, std::int64_t n, std::int64_t k, Precision p) const override {
    return scaled(b_.gemm(m, n, k, p), compute(s_.gemm, double(m)));
  }
  OpTime grouped_gemm(int experts, std::int64_t tokens, std::int64_t n, std::int64_t k, Precision p, double skew) const override {
    return scaled(b_.grouped_gemm(experts, tokens, n, k, p, skew), compute(s_.moe, double(tokens)));
  }
  OpTime attention_prefill(int batch, std::int64_t seq, int heads, int kv_heads, int head_dim, Precision kv, int window) const override {
    return scaled(b_.attention_prefill(batch, seq, heads, kv_heads, head_dim, kv, window), s_.attention * s_.prefill);
  }
  OpTime attention_decode(int batch, std::int64_t context, int heads, int kv_heads, int head_dim, Precision kv, int window) const override {
    return scaled(b_.attention_decode(batch, context, heads, kv_heads, head_dim, kv, window), s_.attention * s_.decode_attention * s_.decode);
  }
  OpTime encoder_attention(int batch, std::int64_t seq, int heads, int head_dim) const override {
    return scaled(b_.encoder_attention(batch, seq, heads, head_dim), s_.attention * s_.prefill);
  }
  OpTime moe(const MoeShape& shape, Precision p) const override { return scaled(b_.moe(shape, p), compute(s_.moe, shape.tokens)); }
  ColdWeights cold_weights(std::string_view family) const override { return b_.cold_weights(family); }
  OpTime gdn(bool decode, int batch, std::int64_t seq, int k_heads, int v_heads, int head_k_dim, int head_v_dim) const override {
    return scaled(b_.gdn(decode, batch, seq, k_heads, v_heads, head_k_dim, head_v_dim), s_.mixer);
  }
  OpTime tp_all_reduce(double bytes, int gpus) const override {
    OpTime t = b_.tp_all_reduce(bytes, gpus);
    const bool custom = t.kernel.starts_with("vLLM custom all-reduce");
    return scaled(std::move(t), s_.communication * (custom ? s_.custom_allreduce : 1));
  }
  OpTime mamba_scan(int batch, std::int64_t seqlen, int heads, int head_dim, int d_state, int groups) const override {
    return scaled(b_.mamba_scan(batch, seqlen, heads, head_dim, d_state, groups), s_.mixer);
  }
  OpTime mamba_step(int batch, int heads, int head_dim, int d_state, int groups) const override {
    return scaled(b_.mamba_step(batch, heads, head_dim, d_state, groups), s_.mixer);
  }
  OpTime conv1d(std::int64_t tokens, std::int64_t channels, int kernel, bool decode) const override {
    return scaled(b_.conv1d(tokens, channels, kernel, decode), s_.mixer);
  }
  OpTime memory_bound(double bytes) const override { return b_.memory_bound(bytes); }
  OpTime collective(Collective op, double bytes, const CommGroup& group) const override {
    return scaled(b_.collective(op, bytes, group), s_.communication);
  }
  OpTime transfer(double bytes, bool cross_node, const InstanceSpec* instance) const override {
    return scaled(b_.transfer(bytes, cross_node, instance), s_.communication);
  }
  std::string provenance() const override {
    // The factors that move a kernel, each once: one at 1 (held at its prior, or not fitted) changes nothing.
    const std::pair<const char*, double> factors[] = {
        {"GEMM", s_.gemm}, {"MoE", s_.moe}, {"attention", s_.attention}, {"communication", s_.communication},
        {"prefill", s_.prefill}, {"decode", s_.decode}, {"decode attention", s_.decode_attention},
        {"vLLM custom all-reduce", s_.custom_allreduce}, {"Mamba / linear-attention mixers", s_.mixer}};
    std::string s;
    for (const auto& [name, v] : factors) {
      if (v == 1) continue;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s x%.3g", s.empty() ? "" : ", ", name, v);
      s += buf;
    }
    return b_.provenance() + "; scaled by a calibration: " + (s.empty() ? std::string("every kernel factor at 1") : s);
  }

 private:
  const KernelModel& b_;
  KernelScales s_;
};

}  // namespace

std::unique_ptr<KernelModel> scaled_kernel_model(const KernelModel& base, const KernelScales& scales) {
  return std::make_unique<Scaled>(base, scales);
}

}  // namespace servesim::hw
