// `servesim list gpus|instances|models`: the catalogues (sim/api), as a table or JSON.
#include <cmath>
#include <string>

#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "sim/cli/commands.hpp"
#include "sim/engine/engine_profile.hpp"

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

// A price as the catalogue holds it: cents, or a tenth of a cent where the source gives one (63.296),
// so nodes x this price is the $/hour recommend and plan print, to the cent.
std::string instance_price(double usd) {
  const double cents = usd * 100;
  return fixed(usd, std::abs(cents - std::round(cents)) < 1e-6 ? 2 : 3);
}

void list_instances(Format f) {
  const auto j = api::instances();
  Table t({"instance", "gpu", "gpus", "EFA GB/s", "EFA/GPU GB/s", "host mem", "USD/h"});
  for (const auto& i : j)
    t.add_row({str(i["name"]), str(i["gpu"]), std::to_string(i["gpus"].get<int>()), fixed(i["efa_total_bytes_per_s"].get<double>() / 1e9, 0),
               fixed(i["efa_per_gpu_bytes_per_s"].get<double>() / 1e9, 1), human_bytes(i["host_memory_bytes"].get<double>()),
               i["usd_per_hour"].is_null() ? "-" : instance_price(i["usd_per_hour"].get<double>())});
  emit(f, j, t.render());
}

void list_models(Format f) {
  const auto j = api::models();
  // "blocks": residual blocks as vLLM's nemotron_h counts them, one mixer (Mamba, attention, MLA,
  // sliding, Gated DeltaNet) or one feed-forward (MLP, MoE) each: a transformer layer is two.
  Table t({"model", "blocks (by kind)", "hidden", "total B", "active B", "experts/top-k", "checkpoint", "vision", "estimate"});
  for (const auto& r : j) {
    const auto& m = models::model(r["name"].get<std::string>());
    std::string kinds;
    for (auto k : models::all_layer_kinds())
      if (int c = m.count(k); c > 0) kinds += (kinds.empty() ? "" : " ") + std::to_string(c) + std::string(1, models::pattern_char(k));
    const std::string pat = std::to_string(m.layers.size()) + " (" + kinds + ")";
    const std::string ckpt = m.checkpoint_precisions.empty() ? m.checkpoint_precision : text::join(m.checkpoint_precisions, ",");
    t.add_row({m.name, pat, std::to_string(m.hidden), fixed(r["llm_total_params"].get<double>() / 1e9, 2),
               fixed(r["active_params"].get<double>() / 1e9, 2),
               m.experts ? std::to_string(m.experts) + "/" + std::to_string(m.top_k) : "-", ckpt, m.has_vision ? m.vision.name : "-",
               m.estimate ? "yes" : "no"});
  }
  emit(f, j, t.render() + "blocks: one mixer or one feed-forward each (a transformer layer is two): M mamba, * attention, "
                         "S sliding-window/chunked attention, L multi-head latent attention, G Gated DeltaNet, - MLP, E MoE\n");
}

// `servesim model`: one model's architecture, parameters and cache figures (catalogue or file).
void show_model(const std::string& name, const std::string& file, Format f) {
  const auto& m = api::resolve_model(name, file);
  const auto j = api::model(m);
  std::string out;
  struct Lines {
    std::string& out;
    void add_row(const std::vector<std::string>& r) { out += r[0] + std::string(r[0].size() < 22 ? 22 - r[0].size() : 1, ' ') + r[1] + "\n"; }
  } t{out};
  auto B = [](double x) { return fixed(x / 1e9, 2) + " B"; };
  t.add_row({"model", m.name + (m.display_name != m.name ? " (" + m.display_name + ")" : "")});
  t.add_row({"hf model_type", m.hf_model_type});
  t.add_row({"blocks", std::to_string(m.layers.size()) + " " + j["layer_pattern"].get<std::string>()});
  t.add_row({"parameters", B(models::total_params(m)) + " total, " + B(models::active_params(m)) + " active" +
                               (m.has_vision ? " (+ " + B(m.vision.params()) + " vision)" : "")});
  if (m.published_total_params > 0)
    t.add_row({"published", B(m.published_total_params) + " total, " + B(m.published_active_params) + " active (counts: " +
                                m.published_active_counts + "; ours so counted " + B(models::active_params_as_published(m)) + ")"});
  t.add_row({"checkpoint", m.checkpoint_precision + " (" + models::checkpoint_format_label(m) + ")" +
                               (m.checkpoint_kv_precision.empty() ? "" : ", KV " + m.checkpoint_kv_precision)});
  for (const auto& fmt : m.checkpoint_precisions) {
    if (fmt == m.checkpoint_precision) continue;
    const bool experts = models::quantizes_experts_only(m, std::string_view(fmt));
    t.add_row({"also published", fmt + (experts ? " (routed experts only; attention, router and the rest BF16)" : "")});
  }
  t.add_row({"KV per token (bf16)", human_bytes(models::kv_bytes_per_token(m, hw::Precision::bf16)) +
                                        (m.sliding_window > 0 ? " + window " + std::to_string(m.sliding_window) + " tokens on " +
                                                                    std::to_string(m.count(models::LayerKind::sliding_attention)) + " layers"
                                                              : "")});
  if (!m.layer_mlp_widths.empty()) {   // nemotron-nas: each MLP block at its own width
    std::string w;
    for (const auto& [width, n] : m.mlp_width_counts()) w += (w.empty() ? "" : ", ") + std::to_string(n) + " x " + std::to_string(width);
    t.add_row({"MLP widths", w + " (blocks x intermediate)"});
  }
  const double state = models::conv_state_bytes_per_seq(m) + models::ssm_state_bytes_per_seq(m);
  if (state > 0) t.add_row({"state per sequence", human_bytes(state)});
  if (m.mtp_layers > 0) t.add_row({"MTP", std::to_string(m.mtp_layers) + " layer(s), " + B(models::mtp_params(m))});
  if (m.has_vision) t.add_row({"vision", m.vision.name});
  if (!m.hf_ids.empty()) t.add_row({"hf ids", text::join(m.hf_ids)});
  if (!m.note.empty()) t.add_row({"note", m.note});
  t.add_row({"source", m.source});
  emit(f, j, out);
}

// Engine profiles; with --gpu/--tp also what each resolves to on that GPU (defaults of its class,
// capture sizes, all-reduce switch points).
void list_engines(Format f, const std::string& gpu_name, int tp) {
  const hw::GpuSpec* gpu = gpu_name.empty() ? nullptr : &hw::Catalog::global().gpu(gpu_name);
  nlohmann::json j = nlohmann::json::array();
  Table t({"engine", "async", "graphs", "capture", "KV memory", "block", "closed-loop OSL sd (tokens)", "scheduler",
           "MoE under attention DP", "expert parallel", "defaults by GPU class (tokens/seqs)", "aliases"});
  const auto names = sim::engine_profile_names();
  for (const auto& n : names) {
    const auto& p = sim::engine_profile(n);
    const bool newest = n == sim::engine_profile(p.engine).name;
    nlohmann::json e = {{"name", p.name}, {"engine", p.engine}, {"version", p.version}, {"description", p.description},
                        {"async_scheduling", p.async_scheduling}, {"async_scheduling_hybrid", p.async_scheduling_hybrid},
                        {"launches_on_scheduler_thread", p.launches_on_scheduler_thread},
                        {"cudagraph_mode", p.graphs.mode},
                        {"gpu_memory_utilization", p.gpu_memory_utilization}, {"block_size", p.block_size},
                        {"closed_loop_osl_spread_tokens", p.closed_loop_osl_spread_tokens},
                        {"closed_loop_osl_spread_load_exponent", p.closed_loop_osl_spread_load_exponent},
                        {"closed_loop_osl_spread_length_exponent", p.closed_loop_osl_spread_length_exponent},
                        {"sources", p.sources}, {"unverified", p.unverified}, {"newest", newest},
                        {"scheduler", sim::scheduler_summary(p.kind)}, {"cudagraph_padding", p.graphs.padding},
                        {"memory_planner", std::string(sim::to_string(p.kind))},
                        {"dp_prefill_moe", std::string(models::to_string(p.dp_prefill_moe))},
                        {"wide_ep_all_to_all", p.wide_ep_all_to_all}, {"moe_tp_x_ep", p.moe_tp_x_ep},
                        {"attention_dp_with_tp", p.attention_dp_with_tp}};
    // What an MoE layer under attention DP runs (docs/engines.md): prefill steps' tokens, and the
    // exchange of an EP group wider than a node.
    const std::string dp_moe = "prefill " + std::string(models::to_string(p.dp_prefill_moe)) +
                               (p.wide_ep_all_to_all ? "; all-to-all past a node" : "; all-gather");
    // The layouts it launches (sim::check_layout): EP sizes, and attention DP's TP.
    const std::string layouts = std::string(p.moe_tp_x_ep ? "1, TP x DP or between (MoE TP x EP)" : "1 or TP x DP") +
                                (p.attention_dp_with_tp ? "" : "; attention DP at TP 1");
    std::string classes;
    for (const auto& c : p.gpu_classes) {
      e["gpu_classes"].push_back({{"label", c.label}, {"max_num_seqs", c.max_num_seqs}, {"max_num_batched_tokens", c.max_num_batched_tokens}});
      std::string graph_bs;
      for (const auto& [min_tp, bs] : c.cuda_graph_max_bs) {
        e["gpu_classes"].back()["cuda_graph_max_bs"][std::to_string(min_tp)] = bs;
        graph_bs += (graph_bs.empty() ? ", graphs <= " : " / ") + std::to_string(bs) + (min_tp > 1 ? " at TP >= " + std::to_string(min_tp) : "");
      }
      classes += (classes.empty() ? "" : "; ") + c.label + ": " + std::to_string(c.max_num_batched_tokens) + "/" +
                 std::to_string(c.max_num_seqs) + graph_bs;
    }
    const bool decode_only = p.graphs.mode == "FULL_DECODE_ONLY";
    std::string cap = decode_only ? "decode bs" + std::string(p.graphs.padding ? ", padded" : ", unpadded")
                                  : "<= " + std::to_string(p.graphs.max_capture_size) + " step " + std::to_string(p.graphs.step) + "/" +
                                        std::to_string(p.graphs.large_step);
    std::string memory = p.kind == sim::EngineKind::trtllm ? fixed(p.gpu_memory_utilization, 2) + " x free after peak"
                         : p.gpu_memory_utilization > 0   ? fixed(p.gpu_memory_utilization, 2) + " x total"
                                                          : "heuristic x total";
    std::string block = std::to_string(p.block_size);
    for (const auto& [cc, b] : p.block_size_by_cc)
      if (b != p.block_size) block += ", " + std::to_string(b) + " on " + cc;
    if (gpu) {
      const auto& c = p.gpu_class(*gpu);
      const auto sizes = p.capture_sizes(*gpu, tp, c.max_num_seqs, 0);
      e["on_gpu"] = {{"gpu", gpu->name}, {"compute_capability", sim::compute_capability(*gpu)}, {"tp", tp},
                     {"max_num_seqs", c.max_num_seqs}, {"max_num_batched_tokens", c.max_num_batched_tokens},
                     {"cudagraph_capture_sizes", sizes}, {"block_size", p.block_size_for(*gpu)}};
      cap = std::to_string(sizes.size()) + " sizes <= " + std::to_string(sizes.empty() ? 0 : sizes.back()) +
            (decode_only ? (p.graphs.padding ? " (decode bs, padded)" : " (decode bs, unpadded)") : "");
      block = std::to_string(p.block_size_for(*gpu));
      if (p.kind == sim::EngineKind::sglang && p.gpu_memory_utilization == 0) {
        const double f = models::sglang_mem_fraction_static(gpu->hbm_usable_bytes, c.max_num_batched_tokens,
                                                            sizes.empty() ? 0 : sizes.back(), tp, 1, false);
        e["on_gpu"]["mem_fraction_static"] = f;
        memory = fixed(f, 3) + " x total";
      }
      nlohmann::json ar = nlohmann::json::array();
      for (const auto& [upto, impl] : p.all_reduce_switch_points(*gpu, tp))
        ar.push_back({{"below_bytes", std::isfinite(upto) ? nlohmann::json(upto) : nlohmann::json(nullptr)}, {"impl", sim::to_string(impl)}});
      e["on_gpu"]["all_reduce"] = ar;
    }
    const std::string async = std::string(p.async_scheduling ? "on" : "off") +
                              (p.async_scheduling_hybrid != p.async_scheduling
                                   ? std::string(p.async_scheduling_hybrid ? " (hybrid on)" : " (hybrid off)") : "");
    t.add_row({p.name, async, p.graphs.mode, cap, memory, block,
               p.closed_loop_osl_spread_tokens > 0
                   ? sim::closed_loop_osl_sd_formula(p.closed_loop_osl_spread_tokens, p.closed_loop_osl_spread_load_exponent,
                                                     p.closed_loop_osl_spread_length_exponent, "C", "OSL")
                   : "0",
               sim::scheduler_summary(p.kind), dp_moe, layouts, classes, newest ? p.engine : "-"});
    j.push_back(e);
  }
  std::string text = t.render();
  if (gpu) {
    for (const auto& engine : sim::engine_names()) {
      const auto& p = sim::engine_profile(engine);
      text += "\nTP all-reduce on " + gpu->name + " x " + std::to_string(tp) + " (" + p.name + ", bf16 payload):";
      double lo = 0;
      for (const auto& [upto, impl] : p.all_reduce_switch_points(*gpu, tp)) {
        text += "\n  " + human_bytes(lo) + " .. " + (std::isfinite(upto) ? human_bytes(upto) : std::string("any")) + ": " + sim::to_string(impl);
        lo = upto;
      }
      text += "\n";
    }
  }
  emit(f, j, text);
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto* list = app.add_subcommand("list", "List the GPU, instance, model or engine catalogue");
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
  static Opts eng;
  static std::string eng_gpu;
  static int eng_tp = 1;
  auto* e = list->add_subcommand("engines", "Engine profiles (defaults of vllm serve, sglang.launch_server and trtllm-serve by release)");
  add_format_option(*e, eng.f);
  e->add_option("--gpu", eng_gpu, "Also show what each profile resolves to on this GPU");
  e->add_option("--tp", eng_tp, "Tensor-parallel size for the all-reduce switch points (with --gpu)");
  e->callback([] { list_engines(eng.f, eng_gpu, eng_tp); });

  struct ModelOpts { std::string name, file; Format f = Format::table; };
  static ModelOpts mo;
  auto* one = app.add_subcommand("model", "One model's blocks, parameters, checkpoint precision and cache per token / sequence");
  one->add_option("name,--model", mo.name, "Model name (servesim list models) or its Hugging Face id");
  one->add_option("--model-file", mo.file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  add_format_option(*one, mo.f);
  one->callback([] { show_model(mo.name, mo.file, mo.f); });
}

}  // namespace servesim::cli
