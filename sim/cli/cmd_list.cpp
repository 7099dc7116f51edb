// `servesim list gpus|instances|models`: the catalogues (sim/api), as a table or JSON.
#include <string>

#include "common/table.hpp"
#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

std::string str(const nlohmann::json& v) { return v.get<std::string>(); }
std::string tf(const nlohmann::json& flops) { return flops.get<double>() > 0 ? fixed(flops.get<double>() / 1e12, 0) : "-"; }

void list_gpus(Format f) {
  const auto j = api::gpus();
  Table t({"gpu", "arch", "HBM usable", "HBM BW TB/s", "BF16 TF", "FP8 TF", "NVFP4 TF", "NVLink GB/s", "domain"});
  for (const auto& g : j)
    t.add_row({str(g["name"]), str(g["arch"]), human_bytes(g["hbm_usable_bytes"].get<double>()), fixed(g["hbm_bw_bytes_per_s"].get<double>() / 1e12, 2),
               tf(g["bf16_flops"]), tf(g["fp8_flops"]), tf(g["nvfp4_flops"]),
               fixed(g["nvlink_bw_bytes_per_s"].get<double>() / 1e9, 0), std::to_string(g["nvlink_domain"].get<int>())});
  emit(f, j, t.render());
}

void list_instances(Format f) {
  const auto j = api::instances();
  Table t({"instance", "gpu", "gpus", "EFA GB/s", "EFA/GPU GB/s", "host mem", "USD/h"});
  for (const auto& i : j)
    t.add_row({str(i["name"]), str(i["gpu"]), std::to_string(i["gpus"].get<int>()), fixed(i["efa_total_bytes_per_s"].get<double>() / 1e9, 0),
               fixed(i["efa_per_gpu_bytes_per_s"].get<double>() / 1e9, 1), human_bytes(i["host_memory_bytes"].get<double>()),
               i["usd_per_hour"].is_null() ? "-" : fixed(i["usd_per_hour"].get<double>(), 2)});
  emit(f, j, t.render());
}

void list_models(Format f) {
  const auto j = api::models();
  Table t({"model", "layers M/*/-/E", "hidden", "total B", "active B", "experts/top-k", "vision", "estimate"});
  for (const auto& r : j) {
    const auto& m = models::model(r["name"].get<std::string>());
    using K = models::LayerKind;
    const std::string pat = std::to_string(m.layers.size()) + " (" + std::to_string(m.count(K::mamba)) + "/" +
                            std::to_string(m.count(K::attention)) + "/" + std::to_string(m.count(K::mlp)) + "/" +
                            std::to_string(m.count(K::moe)) + ")";
    t.add_row({m.name, pat, std::to_string(m.hidden), fixed(r["llm_total_params"].get<double>() / 1e9, 2),
               fixed(r["active_params"].get<double>() / 1e9, 2),
               m.experts ? std::to_string(m.experts) + "/" + std::to_string(m.top_k) : "-", m.has_vision ? m.vision.name : "-",
               m.estimate ? "yes" : "no"});
  }
  emit(f, j, t.render());
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto* list = app.add_subcommand("list", "List the GPU, instance or model catalogue");
  list->require_subcommand(1);
  struct Opts { Format f = Format::table; };
  static Opts gpus, inst, mods;
  auto* g = list->add_subcommand("gpus", "GPUs");
  add_format_option(*g, gpus.f);
  g->callback([] { list_gpus(gpus.f); });
  auto* i = list->add_subcommand("instances", "Instances");
  add_format_option(*i, inst.f);
  i->callback([] { list_instances(inst.f); });
  auto* m = list->add_subcommand("models", "Models");
  add_format_option(*m, mods.f);
  m->callback([] { list_models(mods.f); });
}

}  // namespace servesim::cli
