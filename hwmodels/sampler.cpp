#include "hwmodels/sampler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::hw {

std::string_view to_string(SamplingMode m) {
  switch (m) {
    case SamplingMode::greedy: return "greedy";
    case SamplingMode::random: return "random";
    case SamplingMode::top_k: return "top_k";
    case SamplingMode::top_p: return "top_p";
    case SamplingMode::top_k_top_p: return "top_k_top_p";
  }
  return "?";
}

SamplingMode sampling_mode(double temperature, int top_k, double top_p) {
  if (temperature < 1e-5) return SamplingMode::greedy;
  const bool k = top_k > 0, p = top_p < 1;
  return p ? (k ? SamplingMode::top_k_top_p : SamplingMode::top_p) : k ? SamplingMode::top_k : SamplingMode::random;
}

namespace {
constexpr std::string_view kFile = "hwmodels/data/sampler_h200.json";

struct Table {
  std::vector<double> vocab, batch;
  std::array<std::vector<std::vector<double>>, 5> us;  // [mode][vocab][batch]
  std::string gpu;                                     // the measured GPU (the file's "gpu")
  double bw = 0;                                       // its HBM bandwidth
  Table() {
    const auto doc = parse_json(data::get(kFile), std::string(kFile));
    JsonReader j(doc, std::string(kFile));
    for (const auto& v : j.json().at("vocab")) vocab.push_back(v.get<double>());
    for (const auto& b : j.json().at("batch")) batch.push_back(b.get<double>());
    const auto& t = j.json().at("gpu_us");
    for (int m = 0; m < 5; ++m) {
      const auto& rows = t.at(std::string(to_string(SamplingMode(m))));
      for (const auto& r : rows) us[m].push_back(r.get<std::vector<double>>());
      if (us[m].size() != vocab.size()) j.fail("gpu_us", "one row per vocabulary expected");
      for (const auto& r : us[m])
        if (r.size() != batch.size()) j.fail("gpu_us", "one value per batch expected");
    }
    gpu = text::lower(j.string("gpu"));
    bw = Catalog::global().gpu(gpu).hbm_bw_bytes_per_s;
  }
  // Log-log in batch within the measured range, proportional beyond its ends.
  double at_vocab(int m, std::size_t v, double rows) const {
    const auto& r = us[m][v];
    if (rows <= batch.front()) return r.front() * std::max(rows / batch.front(), 0.0);
    if (rows >= batch.back()) return r.back() * rows / batch.back();
    std::size_t i = std::upper_bound(batch.begin(), batch.end(), rows) - batch.begin();
    const double f = std::log(rows / batch[i - 1]) / std::log(batch[i] / batch[i - 1]);
    return std::exp(std::log(r[i - 1]) + f * (std::log(r[i]) - std::log(r[i - 1])));
  }
  double us_at(SamplingMode mode, double v, double rows) const {
    const int m = int(mode);
    if (v <= vocab.front()) return at_vocab(m, 0, rows) * v / vocab.front();
    if (v >= vocab.back()) return at_vocab(m, vocab.size() - 1, rows) * v / vocab.back();
    std::size_t i = std::upper_bound(vocab.begin(), vocab.end(), v) - vocab.begin();
    const double f = (v - vocab[i - 1]) / (vocab[i] - vocab[i - 1]);
    return at_vocab(m, i - 1, rows) * (1 - f) + at_vocab(m, i, rows) * f;
  }
};
const Table& table() {
  static const Table t;
  return t;
}
}  // namespace

OpTime sampler(const GpuSpec& gpu, std::int64_t vocab, double rows, SamplingMode mode) {
  OpTime o;
  o.bound = Bound::memory;
  o.kernel = "vLLM Sampler (PyTorch ops; FlashInfer sampling off by default)";
  if (rows <= 0 || vocab <= 0) return o;
  const Table& t = table();
  const bool here = text::lower(gpu.name) == t.gpu;
  o.seconds = 1e-6 * t.us_at(mode, double(vocab), rows) * (here ? 1.0 : t.bw / gpu.hbm_bw_bytes_per_s);
  o.source = here ? Source::interpolated : Source::transferred;
  o.bytes = rows * double(vocab) * 4;  // one float32 pass over the logits (the least it moves)
  return o;
}

}  // namespace servesim::hw
