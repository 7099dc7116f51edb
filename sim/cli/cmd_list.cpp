// `servesim list gpus|instances|models`: the catalogues, as a table or JSON.
#include <vector>

#include "common/table.hpp"
#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

void list_gpus(Format f) {
  nlohmann::json j = nlohmann::json::array();
  Table t({"gpu", "arch", "HBM usable", "HBM BW TB/s", "BF16 TF", "FP8 TF", "NVFP4 TF", "NVLink GB/s", "domain"});
  for (const auto& g : hw::Catalog::global().gpus()) {
    j.push_back({{"name", g.name}, {"arch", g.arch}, {"hbm_nominal_bytes", g.hbm_nominal_bytes}, {"hbm_usable_bytes", g.hbm_usable_bytes},
                 {"hbm_bw_bytes_per_s", g.hbm_bw_bytes_per_s}, {"bf16_flops", g.bf16_flops}, {"fp8_flops", g.fp8_flops},
                 {"nvfp4_flops", g.nvfp4_flops}, {"nvlink_bw_bytes_per_s", g.nvlink_bw_bytes_per_s}, {"nvlink_domain", g.nvlink_domain}});
    t.add_row({g.name, g.arch, human_bytes(g.hbm_usable_bytes), fixed(g.hbm_bw_bytes_per_s / 1e12, 2), fixed(g.bf16_flops / 1e12, 0),
               fixed(g.fp8_flops / 1e12, 0), g.nvfp4_flops > 0 ? fixed(g.nvfp4_flops / 1e12, 0) : "-",
               fixed(g.nvlink_bw_bytes_per_s / 1e9, 0), std::to_string(g.nvlink_domain)});
  }
  emit(f, j, t.render());
}

void list_instances(Format f) {
  nlohmann::json j = nlohmann::json::array();
  Table t({"instance", "gpu", "gpus", "EFA GB/s", "EFA/GPU GB/s", "host mem", "USD/h"});
  for (const auto& i : hw::Catalog::global().instances()) {
    j.push_back({{"name", i.name}, {"gpu", i.gpu}, {"gpus", i.gpus}, {"efa_total_bytes_per_s", i.efa_total_bytes_per_s},
                 {"efa_per_gpu_bytes_per_s", i.efa_per_gpu_bytes_per_s}, {"host_memory_bytes", i.host_memory_bytes},
                 {"usd_per_hour", i.usd_per_hour ? nlohmann::json(*i.usd_per_hour) : nlohmann::json(nullptr)}});
    t.add_row({i.name, i.gpu, std::to_string(i.gpus), fixed(i.efa_total_bytes_per_s / 1e9, 0), fixed(i.efa_per_gpu_bytes_per_s / 1e9, 1),
               human_bytes(i.host_memory_bytes), i.usd_per_hour ? fixed(*i.usd_per_hour, 2) : "-"});
  }
  emit(f, j, t.render());
}

void list_models(Format f) {
  nlohmann::json j = nlohmann::json::array();
  Table t({"model", "layers M/*/-/E", "hidden", "total B", "active B", "experts/top-k", "vision", "estimate"});
  for (const auto& name : models::model_names()) {
    const auto& m = models::model(name);
    using K = models::LayerKind;
    const std::string pat = std::to_string(m.layers.size()) + " (" + std::to_string(m.count(K::mamba)) + "/" +
                            std::to_string(m.count(K::attention)) + "/" + std::to_string(m.count(K::mlp)) + "/" +
                            std::to_string(m.count(K::moe)) + ")";
    j.push_back({{"name", m.name}, {"display_name", m.display_name}, {"layers", m.layers.size()}, {"hidden", m.hidden},
                 {"total_params", models::total_params(m) + (m.has_vision ? m.vision.params() : 0)},
                 {"llm_total_params", models::total_params(m)}, {"active_params", models::active_params(m)},
                 {"experts", m.experts}, {"top_k", m.top_k}, {"vision", m.has_vision ? m.vision.name : ""},
                 {"estimate", m.estimate}, {"note", m.note}, {"source", m.source}});
    t.add_row({m.name, pat, std::to_string(m.hidden), fixed(models::total_params(m) / 1e9, 2), fixed(models::active_params(m) / 1e9, 2),
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
