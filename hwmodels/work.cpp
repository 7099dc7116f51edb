#include "hwmodels/work.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace servesim::hw {

namespace {
constexpr double kBf16 = 2, kFp32 = 4;
constexpr double kSsdChunk = 128;  // chunk length of mamba_chunk_scan_combined in serving engines
Features logs(std::initializer_list<double> v) {
  Features f{};
  int i = 0;
  for (double x : v) f[i++] = std::log(x);
  return f;
}
}  // namespace

double element_bytes(Precision p) {
  switch (p) {
    case Precision::bf16: return 2;
    case Precision::fp8: return 1;
    case Precision::int8: return 1;
    case Precision::nvfp4: return 0.5 + 1.0 / 16;  // 4-bit values + an fp8 scale per 16-element block
    case Precision::fp8_block: return 1 + 4.0 / (128 * 128);  // + one fp32 scale per 128x128 block
    case Precision::mxfp4: return 0.5 + 1.0 / 32;             // 4-bit values + an E8M0 scale per 32
    case Precision::int4: return 0.5 + 2.0 / 32;              // 4-bit values + a bf16 scale per group of 32
  }
  return 2;
}

Work gemm_work(double m, double n, double k, Precision weights, Precision act) {
  return {2 * m * n * k, m * k * element_bytes(act) + k * n * element_bytes(weights) + m * n * kBf16};
}

double experts_touched(int experts, double tokens, double skew) {
  if (experts <= 0 || tokens <= 0) return 0;
  if (skew <= 0) return experts * (1 - std::pow(1 - 1.0 / experts, tokens));
  double norm = 0;
  for (int i = 1; i <= experts; ++i) norm += std::pow(i, -skew);
  double touched = 0;
  for (int i = 1; i <= experts; ++i) touched += 1 - std::pow(1 - std::pow(i, -skew) / norm, tokens);
  return touched;
}

Routing route(int experts, double tokens, double skew) {
  if (experts <= 0 || tokens <= 0) return {};
  if (skew <= 0) return {std::ceil(tokens / experts), std::min<double>(experts, tokens)};
  // Largest-remainder rounding of the Zipf shares, ties to the lower rank. The scratch buffer is
  // reused across calls, so a query allocates only when it sees more experts than before.
  thread_local std::vector<std::pair<double, int>> rem;
  rem.resize(experts);
  double norm = 0;
  for (int i = 1; i <= experts; ++i) norm += std::pow(i, -skew);
  double floors = 0;
  Routing r;
  for (int i = 0; i < experts; ++i) {
    double q = tokens * std::pow(i + 1, -skew) / norm, f = std::floor(q);
    floors += f;
    rem[i] = {q - f, i};
    r.active += f >= 1;
    if (i == 0) r.max_tokens = f;
  }
  int left = static_cast<int>(std::llround(tokens - floors));
  if (left > 0) {
    auto first = [](const std::pair<double, int>& a, const std::pair<double, int>& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    };
    std::nth_element(rem.begin(), rem.begin() + (left - 1), rem.end(), first);
    for (int j = 0; j < left; ++j) {
      int i = rem[j].second;
      double f = std::floor(tokens * std::pow(i + 1, -skew) / norm);
      r.active += f < 1;  // an empty expert that gets a leftover slot
      if (i == 0) r.max_tokens += 1;
    }
  }
  r.max_tokens = std::max(1.0, r.max_tokens);
  return r;
}

Work grouped_gemm_work(double active, double tokens, double n, double k, Precision weights, Precision act) {
  return {2 * tokens * n * k, active * k * n * element_bytes(weights) + tokens * (k * element_bytes(act) + n * kBf16)};
}

double causal_pairs(double seq, double window) {
  return window > 0 && window < seq ? seq * window - 0.5 * window * window : 0.5 * seq * seq;
}

Work attention_prefill_work(double batch, double seq, double heads, double kv_heads, double head_dim, double kv_bytes,
                            double window) {
  // Two matmuls of 2·d FLOPs per query-key pair and head.
  return {4 * batch * heads * head_dim * causal_pairs(seq, window),
          batch * seq * head_dim * (kBf16 * 2 * heads + (kBf16 + kv_bytes) * 2 * kv_heads)};
}

Work attention_decode_work(double batch, double context, double heads, double kv_heads, double head_dim, double kv_bytes,
                           double window) {
  double ctx = window > 0 ? std::min(context, window) : context;
  return {4 * batch * heads * head_dim * ctx,
          batch * (kv_bytes * 2 * ctx * kv_heads * head_dim + kBf16 * 2 * heads * head_dim)};
}

bool custom_ar_one_shot(int gpus, double bytes) {
  return gpus == 2 || (gpus <= 4 && bytes < 512 * 1024) || bytes < 256 * 1024;
}

EncoderTiles encoder_tiles(const std::string& arch) {
  // Blackwell's FlashAttention-4 runs two 128-row query tiles per CTA against 128-key tiles; on
  // Hopper FlashAttention-3 takes 192 query rows at ViT head sizes (<= 96). The key-tile width that
  // best explains the measured steps there is 64 (hwmodels/README.md, encoder attention).
  if (arch.rfind("blackwell", 0) == 0) return {256, 128};
  return {192, 64};
}

Work encoder_attention_work(double batch, double seq, double heads, double head_dim, int sms, EncoderTiles t) {
  // Bidirectional: every query meets every key. Each (query tile, batch x head) is a CTA that
  // sweeps all keys tile by tile, so the math done is that of the padded tiles, and it runs in
  // whole waves over the SMs: the time follows the busiest SM's padded work (waves x one CTA's).
  const double q_tiles = std::ceil(seq / t.q), keys = t.kv * std::ceil(seq / t.kv);
  const double ctas = batch * heads * q_tiles, per_cta = 4 * t.q * keys * head_dim;
  const double flops = sms > 0 ? std::ceil(ctas / sms) * double(sms) * per_cta : ctas * per_cta;
  return {flops, kBf16 * 4 * batch * seq * heads * head_dim};
}

namespace {
// Power-law routing: expert i (rank 1 = most popular) has popularity i^-skew; a token picks k
// distinct experts, so expert i is among them with probability p_i = min(1, c·i^-skew), c set so
// the p_i sum to k (the most popular experts saturate at 1). Summed over the experts rank 0 holds
// (the most popular E/ep).
double expected_blocks(double n, double p, int b);
MoeRouting power_law_routing(const MoeShape& s, int block_m) {
  const int E = s.experts, local = std::max(1, E / std::max(1, s.ep));
  thread_local std::vector<double> w;
  w.resize(E);
  for (int i = 0; i < E; ++i) w[i] = std::pow(i + 1, -s.skew);
  double lo = 0, hi = double(s.topk) / w[E - 1];  // Σ min(1, c·w) is monotone in c
  for (int it = 0; it < 60; ++it) {
    const double c = 0.5 * (lo + hi);
    double sum = 0;
    for (int i = 0; i < E; ++i) sum += std::min(1.0, c * w[i]);
    (sum < s.topk ? lo : hi) = c;
  }
  const double c = 0.5 * (lo + hi);
  MoeRouting r;
  r.block_m = block_m;
  for (int i = 0; i < local; ++i) {
    const double p = std::min(1.0, c * w[i]);
    r.slots += s.tokens * p;
    r.touched += 1 - std::pow(1 - p, s.tokens);
    if (block_m > 0) r.padded += block_m * expected_blocks(s.tokens, p, block_m);
  }
  return r;
}

// E[ceil(X / b)] for X ~ Binomial(n, p): summed over the pmf where X spreads over less than a block
// either way (10 standard deviations around the mean, the pmf stepped out from its mode); wider,
// the remainder of X / b is uniform to far below a percent and E[ceil(X / b)] = E[X] / b + 1/2.
double expected_blocks(double n, double p, int b) {
  n = std::floor(n);
  if (n <= 0 || p <= 0) return 0;
  if (p >= 1) return std::ceil(n / b);
  const double mean = n * p, sd = std::sqrt(n * p * (1 - p));
  if (sd > b) return mean / b + 0.5;
  const double lo = std::max(1.0, std::floor(mean - 10 * sd - 1)), hi = std::min(n, std::ceil(mean + 10 * sd + 1));
  const double mode = std::clamp(std::floor(mean), lo, hi), odds = p / (1 - p);
  const double at_mode = std::exp(std::lgamma(n + 1) - std::lgamma(mode + 1) - std::lgamma(n - mode + 1) +
                                  mode * std::log(p) + (n - mode) * std::log1p(-p));
  double e = at_mode * std::ceil(mode / b), pmf = at_mode;
  for (double x = mode; x < hi; ++x) pmf *= (n - x) / (x + 1) * odds, e += pmf * std::ceil((x + 1) / b);
  pmf = at_mode;
  for (double x = mode; x > lo; --x) pmf *= x / (n - x + 1) / odds, e += pmf * std::ceil((x - 1) / b);
  return e;
}
}  // namespace

int marlin_block_m(double tokens, int topk, int local_experts) {
  const double per_expert = tokens * topk / std::max(1, local_experts);
  for (int b : {8, 16, 32, 48}) {
    if (per_expert / b < 0.9) return b;
  }
  return 64;
}

MoeRouting moe_routing_expected(const MoeShape& s, int block_m) {
  if (s.experts <= 0 || s.tokens <= 0) return {};
  if (s.skew > 0) return power_law_routing(s, block_m);
  const double local = double(s.experts) / std::max(1, s.ep);
  const double p = std::min(1.0, double(s.topk) / s.experts);
  MoeRouting r{s.tokens * s.topk / std::max(1, s.ep), local * (1 - std::pow(1 - p, s.tokens))};
  if (block_m > 0) r.padded = local * block_m * expected_blocks(s.tokens, p, block_m), r.block_m = block_m;
  return r;
}

namespace {
// AIC's power-law rows: per-expert loads drawn independently from a power law x^-skew on
// [1, 0.8 tokens] (on [0.01, 2] when tokens x topk <= experts), scaled to tokens x topk slots and
// rounded (the rounding remainder added to the largest loads or taken from the smallest), the
// expert-parallel group with the largest load swapped onto rank 0, the measured rank. The mean
// over kDraws seeded draws (deterministic per shape) of rank 0's slots and experts with a slot.
MoeRouting power_law_draws(const MoeShape& s, int block_m) {
  constexpr int kDraws = 32;
  const int E = s.experts, ep = std::max(1, s.ep), group = std::max(1, E / ep);
  const double target = std::round(s.tokens * s.topk), a = 1 - s.skew;
  const bool many = target > E;
  const double xmin = many ? 1.0 : 0.01, xmax = std::max(xmin, many ? 0.8 * s.tokens : 2.0);
  const double lo = std::pow(xmin, a), hi = std::pow(xmax, a);
  std::uint64_t state = 0x9e3779b97f4a7c15ull ^ (std::uint64_t(E) << 40) ^ (std::uint64_t(target) << 8) ^
                        std::uint64_t(ep) ^ std::uint64_t(s.skew * 1000) << 56;
  auto uniform = [&]() {  // splitmix64
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  };
  thread_local std::vector<double> x, tie;
  thread_local std::vector<long long> load;
  thread_local std::vector<int> order;
  x.resize(E), tie.resize(E), load.resize(E), order.resize(E);
  MoeRouting r;
  for (int d = 0; d < kDraws; ++d) {
    double sum = 0;
    for (int i = 0; i < E; ++i) sum += x[i] = std::fabs(a) < 1e-12 ? xmin : std::pow((hi - lo) * uniform() + lo, 1 / a);
    long long total = 0;
    for (int i = 0; i < E; ++i) total += load[i] = std::llround(x[i] / sum * target);
    long long delta = static_cast<long long>(target) - total;
    for (int i = 0; i < E; ++i) order[i] = i, tie[i] = uniform();
    // The remainder goes one slot each to the largest loads (delta > 0) or comes one slot each
    // from the smallest non-empty ones (delta < 0), in (load, tie) order. When it needs at most
    // one pass, only which experts are first matters: a selection, not a sort (the same result).
    const auto before = [&](int i, int j) { return load[i] != load[j] ? load[i] > load[j] : tie[i] < tie[j]; };
    if (delta > 0 && delta <= E) {
      std::nth_element(order.begin(), order.begin() + (delta - 1), order.end(), before);
      for (long long j = 0; j < delta; ++j) ++load[order[j]];
      delta = 0;
    } else if (delta < 0) {
      const auto nonzero = std::partition(order.begin(), order.end(), [&](int i) { return load[i] > 0; });
      const long long n = nonzero - order.begin();
      if (-delta <= n) {
        std::nth_element(order.begin(), order.begin() + (n + delta), nonzero, before);
        for (auto it = order.begin() + (n + delta); it != nonzero; ++it) --load[*it];
        delta = 0;
      } else {
        for (int i = 0; i < E; ++i) order[i] = i;
      }
    }
    if (delta != 0) {   // more than one pass: the full order, round and round
      std::sort(order.begin(), order.end(), before);
      for (long long j = 0; delta > 0; ++j, --delta) ++load[order[j % E]];
      for (long long j = 0; delta < 0; ++j) {
        int i = order[E - 1 - j % E];
        if (load[i] > 0) --load[i], ++delta;
      }
    }
    int best = 0;
    long long best_sum = -1;
    for (int g = 0; g < ep; ++g) {
      long long gs = 0;
      for (int i = g * group; i < (g + 1) * group && i < E; ++i) gs += load[i];
      if (gs > best_sum) best_sum = gs, best = g;
    }
    for (int i = best * group; i < (best + 1) * group && i < E; ++i) {
      r.slots += load[i], r.touched += load[i] > 0;
      if (block_m > 0) r.padded += block_m * std::ceil(double(load[i]) / block_m);
    }
  }
  r.slots /= kDraws, r.touched /= kDraws, r.padded /= kDraws;
  r.block_m = block_m;
  return r;
}
}  // namespace

namespace {
using RoutingKey = std::tuple<int, double, int, int, double, int>;
RoutingKey key_of(const PowerLawRouting& r) { return {r.experts, r.tokens, r.topk, r.ep, r.skew, r.block_m}; }
// Drawn routings memoised per key (many shapes share one): the same key always gives the same value.
std::map<RoutingKey, MoeRouting> drawn_memo;
std::mutex drawn_mu;
std::size_t table_misses = 0;
}  // namespace

MoeRouting power_law_routing_drawn(const MoeShape& s, int block_m) { return power_law_draws(s, block_m); }

std::vector<PowerLawRouting> power_law_routings_drawn() {
  std::lock_guard<std::mutex> lock(drawn_mu);
  std::vector<PowerLawRouting> out;
  for (const auto& [k, r] : drawn_memo)
    out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), std::get<4>(k), std::get<5>(k), r});
  return out;
}

std::size_t power_law_routing_table_misses() {
  std::lock_guard<std::mutex> lock(drawn_mu);
  return table_misses;
}

MoeRouting moe_routing_measured(const MoeShape& s, int block_m) {
  if (s.experts <= 0 || s.tokens <= 0) return {};
  if (s.skew > 0) {
    const RoutingKey k{s.experts, s.tokens, s.topk, s.ep, s.skew, block_m};
    const auto table = precomputed_power_law_routings();
    const auto at = std::lower_bound(table.begin(), table.end(), k,
                                     [](const PowerLawRouting& e, const RoutingKey& key) { return key_of(e) < key; });
    if (at != table.end() && key_of(*at) == k) return at->routing;
    {
      std::lock_guard<std::mutex> lock(drawn_mu);
      ++table_misses;
      if (auto it = drawn_memo.find(k); it != drawn_memo.end()) return it->second;
    }
    const MoeRouting r = power_law_draws(s, block_m);
    std::lock_guard<std::mutex> lock(drawn_mu);
    return drawn_memo.emplace(k, r).first->second;
  }
  const double local = double(s.experts) / std::max(1, s.ep);
  const double slots = s.tokens * s.topk / std::max(1, s.ep);
  MoeRouting r{std::max(1.0, slots), std::min(local, std::max(1.0, std::ceil(slots)))};
  if (block_m > 0) {
    // The rank's whole slots over its experts, as evenly as they go: `extra` experts one more.
    const double whole = std::max(1.0, std::round(slots)), each = std::floor(whole / local);
    const double extra = whole - each * local;
    r.padded = block_m * (extra * std::ceil((each + 1) / block_m) + (local - extra) * std::ceil(each / block_m));
    r.block_m = block_m;
  }
  return r;
}

Work moe_work(const MoeShape& s, const MoeRouting& r, Precision weights) {
  const double I = s.inter / std::max(1, s.tp), mats = s.gated ? 3 : 2;
  const double expert_bytes = mats * s.hidden * I * element_bytes(weights);
  const double act = s.tokens * s.hidden * kBf16 * 2 + r.slots * (s.gated ? 2 : 1) * I * kBf16 * 2;
  // Block-padded kernels: the math of every padded slot, and each block streams its expert's
  // weights (one pass per block of block_m rows instead of one per touched expert).
  if (r.padded > 0 && r.block_m > 0)
    return {2 * r.padded * mats * s.hidden * I, r.padded / r.block_m * expert_bytes + act};
  return {2 * r.slots * mats * s.hidden * I, r.touched * expert_bytes + act};
}

Features moe_features(const MoeShape& s, const MoeRouting& r) {
  // What sets a fused MoE kernel's efficiency beyond its bytes and FLOPs: tokens, rows per touched
  // expert (tile fill; the padded rows of a block-padded kernel), experts touched (parallel work), one expert's weight size and aspect,
  // local experts (routing bookkeeping), top-k, and the routing skew.
  const double I = s.inter / std::max(1, s.tp), touched = std::max(r.touched, 1e-3);
  const double rows = r.padded > 0 ? r.padded : r.slots;  // block-padded kernels: the rows they compute
  Features f = logs({s.tokens, std::max(rows, 1e-3) / touched, touched, (s.gated ? 3 : 2) * s.hidden * I,
                     s.hidden / I, double(s.experts) / std::max(1, s.ep), double(s.topk)});
  f[7] = s.skew;
  return f;
}

double moe_dispatch_bytes(const MoeShape& s) { return s.tokens * s.topk * s.hidden * kBf16; }

Work gdn_work(bool decode, double batch, double seq, double k_heads, double v_heads, double head_k, double head_v) {
  const double tokens = batch * seq, state = kFp32 * batch * v_heads * head_k * head_v;
  const double io = kBf16 * tokens * (2 * k_heads * head_k + 2 * v_heads * head_v);
  if (decode) return {6 * tokens * v_heads * head_k * head_v, 2 * state + io};
  constexpr double kChunk = 64;  // chunk length of the chunked delta rule
  return {2 * tokens * v_heads * (kChunk * (head_k + head_v) + 3 * head_k * head_v), io + 2 * state};
}

Features gdn_features(double batch, double seq, double k_heads, double v_heads, double head_k, double head_v) {
  return logs({batch * seq, batch, k_heads, v_heads, head_k, head_v});
}

Work mamba_scan_work(double batch, double seqlen, double heads, double head_dim, double d_state, double groups) {
  double tokens = batch * seqlen;
  double flops = 2 * tokens * (groups * kSsdChunk * d_state + heads * kSsdChunk * head_dim + 2 * heads * d_state * head_dim);
  double bytes = kBf16 * tokens * (2 * heads * head_dim + 2 * groups * d_state + heads) +
                 kFp32 * batch * heads * head_dim * d_state;
  return {flops, bytes};
}

Work mamba_step_work(double batch, double heads, double head_dim, double d_state, double groups) {
  double state = kFp32 * batch * heads * head_dim * d_state;
  return {6 * batch * heads * head_dim * d_state,
          2 * state + kBf16 * batch * (2 * heads * head_dim + 2 * groups * d_state + 2 * heads)};
}

Work conv1d_work(double tokens, double channels, double kernel, bool decode) {
  double bytes = kBf16 * (2 * tokens * channels + channels * kernel);
  if (decode) bytes += kBf16 * 2 * tokens * channels * std::max(0.0, kernel - 1);  // rolling conv state
  return {2 * tokens * channels * kernel, bytes};
}


Features gemm_features(double m, double n, double k) { return logs({m, n, k}); }
Features grouped_gemm_features(int experts, double tokens, const Routing& r, double n, double k, double skew, bool fp8) {
  // Per-expert rows set the tile shape; active experts the weight traffic; skewed routing is
  // kept apart from balanced by its own coordinate; the expert count sizes the kernel's group
  // bookkeeping (the same routed rows over 64 or 512 experts do not time alike); the routed total
  // tells apart splits whose busiest and active experts coincide (181 or 256 slots over 128).
  Features f = logs({r.max_tokens, r.active, n, k, 1.0, double(experts), tokens});
  f[4] = skew;
  // torch._scaled_grouped_mm on H200 runs 2-3x slower with 129..2047 routed rows per expert on
  // average (measured on every Nemotron expert shape and expert count, balanced and skewed,
  // hwmodels/calibration/h200/grouped_gemm.json run 2): a tile-configuration step, which a
  // separate coordinate keeps interpolation from averaging across (2 = three octaves).
  double mean_rows = tokens / experts;
  if (fp8) f[7] = mean_rows > 128 && mean_rows < 2048 ? 2.0 : 0.0;
  return f;
}
Features attention_features(double batch, double len, double heads, double kv_heads, double head_dim) {
  return logs({batch, len, heads, kv_heads, head_dim});
}
Features mamba_scan_features(double batch, double seqlen, double heads, double head_dim, double d_state, double groups) {
  return logs({batch * seqlen, batch, heads, head_dim, d_state, groups});
}
Features mamba_step_features(double batch, double heads, double head_dim, double d_state, double groups) {
  return logs({batch, heads, head_dim, d_state, groups});
}
Features conv1d_features(double tokens, double channels, double kernel, double batch) {
  return logs({tokens, channels, kernel, batch});
}
Features bytes_features(double bytes) { return logs({bytes}); }

}  // namespace servesim::hw
