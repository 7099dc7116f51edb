#include "hwmodels/moe_kernels.hpp"

#include <algorithm>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"

namespace servesim::hw {

namespace {
constexpr const char* kFile = "hwmodels/data/moe_kernels.json";

std::vector<MoeKernelRule> load() {
  const nlohmann::json doc = parse_json(data::get(kFile), kFile);
  JsonReader root(doc, kFile);
  std::vector<MoeKernelRule> out;
  for (const auto& r : root.array("rules")) {
    MoeKernelRule k;
    for (const auto& a : r.json().at("arch")) k.arch.push_back(a.get<std::string>());
    k.weights = parse_precision(r.string("weights"), std::string(kFile) + ": weights");
    const std::string ep = r.string("ep");
    if (ep == "any") k.ep = MoeKernelRule::Ep::any;
    else if (ep == "1") k.ep = MoeKernelRule::Ep::one;
    else if (ep == ">1") k.ep = MoeKernelRule::Ep::many;
    else r.fail("ep", "expected any, 1 or >1");
    for (const auto& f : r.json().at("families")) k.families.push_back(f.get<std::string>());
    if (k.families.empty()) r.fail("families", "must name at least one calibration family");
    k.kernel = r.string("kernel");
    k.source = r.string("source");
    out.push_back(std::move(k));
  }
  return out;
}
}  // namespace

const std::vector<MoeKernelRule>& moe_kernel_rules() {
  static const std::vector<MoeKernelRule> rules = load();
  return rules;
}

const MoeKernelRule& moe_kernel_rule(const GpuSpec& gpu, Precision weights, int ep) {
  for (const auto& r : moe_kernel_rules()) {
    if (r.weights != weights || std::find(r.arch.begin(), r.arch.end(), gpu.arch) == r.arch.end()) continue;
    if (r.ep == MoeKernelRule::Ep::one && ep > 1) continue;
    if (r.ep == MoeKernelRule::Ep::many && ep <= 1) continue;
    return r;
  }
  throw Error(kFile, "rules", "no vLLM MoE kernel for " + std::string(to_string(weights)) + " weights on " + gpu.name +
                                  " (arch " + gpu.arch + ", EP " + std::to_string(ep) + ")");
}

}  // namespace servesim::hw
