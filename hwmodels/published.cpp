#include "hwmodels/published.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/embedded.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::hw {
namespace {

struct Table {
  std::string gpu, arch;
  int gpus = 0;
  std::vector<double> log_bytes, log_seconds;
};

struct Curves {
  double max_bytes = 0;  // 0: no ceiling
  std::vector<Table> tables;
};

const Curves& curves(const std::string& file) {
  static std::mutex mu;
  static std::map<std::string, Curves> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  Curves out;
  const auto j = parse_json(servesim::data::get(file), file);
  JsonReader r(j, file);
  out.max_bytes = r.number_or("max_bytes", 0);
  for (const auto& t : r.array("tables")) {
    Table tab;
    tab.gpu = t.string("gpu");
    tab.arch = t.string("arch");
    tab.gpus = int(t.integer("gpus"));
    for (const auto& p : t.json().at("points")) {
      tab.log_bytes.push_back(std::log(p.at(0).get<double>()));
      tab.log_seconds.push_back(std::log(p.at(1).get<double>() * 1e-6));
    }
    out.tables.push_back(std::move(tab));
  }
  return cache.emplace(file, std::move(out)).first->second;
}

// "blackwell-ultra" and "blackwell" share NVLink 5 and the same kernel families.
std::string family(const std::string& arch) { return arch.substr(0, arch.find('-')); }

// The table for this GPU: the same GPU and count, else the same architecture (then family) with the
// fewest GPUs >= n (more GPUs only make a collective slower), else the largest count there.
const Table* pick(const Curves& c, const GpuSpec& gpu, int n) {
  const Table* best = nullptr;
  auto better = [&](const Table& t) {
    if (!best) return true;
    bool t_ok = t.gpus >= n, b_ok = best->gpus >= n;
    if (t_ok != b_ok) return t_ok;
    if (t_ok) return t.gpus < best->gpus || (t.gpus == best->gpus && text::iequals(t.gpu, gpu.name));
    return t.gpus > best->gpus;
  };
  for (int pass = 0; pass < 3 && !best; ++pass)
    for (const auto& t : c.tables) {
      bool match = pass == 0 ? (text::iequals(t.gpu, gpu.name) && t.gpus == n)
                 : pass == 1 ? t.arch == gpu.arch
                             : family(t.arch) == family(gpu.arch);
      if (match && better(t)) best = &t;
    }
  return best;
}

// Log-log interpolation; below the smallest message the curve is flat (latency-bound), above the
// largest it continues the last segment's slope.
double at(const Table& t, double bytes) {
  const double x = std::log(bytes);
  const auto& xs = t.log_bytes;
  const auto& ys = t.log_seconds;
  if (x <= xs.front()) return std::exp(ys.front());
  size_t i = std::upper_bound(xs.begin(), xs.end(), x) - xs.begin();
  i = std::clamp<size_t>(i, 1, xs.size() - 1);
  const double f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return std::exp(ys[i - 1] + f * (ys[i] - ys[i - 1]));
}

constexpr const char* kNvlinkAllReduce = "hwmodels/data/published_nvlink_allreduce.json";
constexpr const char* kNcclAllReduce = "hwmodels/data/published_nccl_allreduce.json";

}  // namespace

double nvlink_allreduce_max_bytes() { return curves(kNvlinkAllReduce).max_bytes; }

std::optional<PublishedTime> nvlink_allreduce(const GpuSpec& gpu, int gpus, double bytes) {
  const Curves& c = curves(kNvlinkAllReduce);
  if (gpus < 2 || !(bytes > 0) || bytes > c.max_bytes) return std::nullopt;
  const Table* t = pick(c, gpu, gpus);
  if (!t) return std::nullopt;
  return PublishedTime{at(*t, bytes), text::iequals(t->gpu, gpu.name) && t->gpus == gpus, t->gpus};
}

std::optional<double> nccl_allreduce_scaling(const GpuSpec& gpu, int gpus, double bytes) {
  const Curves& c = curves(kNcclAllReduce);
  if (gpus <= 2 || !(bytes > 0)) return std::nullopt;
  const Table* two = pick(c, gpu, 2);
  const Table* n = pick(c, gpu, gpus);
  if (!two || !n || two->gpus != 2 || n->gpus == 2 || family(two->arch) != family(n->arch)) return std::nullopt;
  // Between 2 and the table's count, interpolate the ratio in log2(GPUs).
  const double full = at(*n, bytes) / at(*two, bytes);
  const double f = n->gpus > gpus ? std::log2(double(gpus) / 2) / std::log2(double(n->gpus) / 2) : 1.0;
  return std::pow(full, f);
}

}  // namespace servesim::hw
