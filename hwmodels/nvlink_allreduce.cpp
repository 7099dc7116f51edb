#include "hwmodels/nvlink_allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/embedded.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::hw {
namespace {

constexpr const char* kFile = "hwmodels/data/nvlink_allreduce.json";

struct Table {
  std::string gpu, arch;
  int gpus = 0;
  std::vector<double> log_bytes, log_seconds;
};

struct Data {
  double max_bytes = 0;
  std::vector<Table> tables;
};

const Data& data() {
  static const Data d = [] {
    Data out;
    const auto j = parse_json(servesim::data::get(kFile), kFile);
    JsonReader r(j, kFile);
    out.max_bytes = r.number("max_bytes");
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
    return out;
  }();
  return d;
}

// "blackwell-ultra" and "blackwell" share NVLink 5 and the same kernel family.
std::string family(const std::string& arch) { return arch.substr(0, arch.find('-')); }

// The table for this GPU: the same GPU and count, else the same architecture (then family) with the
// fewest GPUs >= n (more GPUs only make the kernel slower), else the largest count there.
const Table* pick(const GpuSpec& gpu, int n) {
  const Table* best = nullptr;
  auto better = [&](const Table& t) {
    if (!best) return true;
    bool t_ok = t.gpus >= n, b_ok = best->gpus >= n;
    if (t_ok != b_ok) return t_ok;
    if (t_ok) return t.gpus < best->gpus || (t.gpus == best->gpus && text::iequals(t.gpu, gpu.name));
    return t.gpus > best->gpus;
  };
  for (int pass = 0; pass < 3 && !best; ++pass)
    for (const auto& t : data().tables) {
      bool match = pass == 0 ? (text::iequals(t.gpu, gpu.name) && t.gpus == n)
                 : pass == 1 ? t.arch == gpu.arch
                             : family(t.arch) == family(gpu.arch);
      if (match && better(t)) best = &t;
    }
  return best;
}

}  // namespace

double nvlink_allreduce_max_bytes() { return data().max_bytes; }

std::optional<NvlinkAllReduceTime> nvlink_allreduce(const GpuSpec& gpu, int gpus, double bytes) {
  if (gpus < 2 || !(bytes > 0) || bytes > data().max_bytes) return std::nullopt;
  const Table* t = pick(gpu, gpus);
  if (!t) return std::nullopt;
  const double x = std::log(bytes);
  const auto& xs = t->log_bytes;
  const auto& ys = t->log_seconds;
  double y;
  if (x <= xs.front()) {
    y = ys.front();  // below the smallest message the kernel is latency-bound
  } else {
    size_t i = std::upper_bound(xs.begin(), xs.end(), x) - xs.begin();
    i = std::min(i, xs.size() - 1);
    const double f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
    y = ys[i - 1] + f * (ys[i] - ys[i - 1]);
  }
  return NvlinkAllReduceTime{std::exp(y), text::iequals(t->gpu, gpu.name) && t->gpus == gpus};
}

}  // namespace servesim::hw
