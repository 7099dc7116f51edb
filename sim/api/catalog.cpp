// api: the GPU, instance and model catalogues as JSON.
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"

namespace servesim::api {

nlohmann::json gpus() {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& g : hw::Catalog::global().gpus())
    j.push_back({{"name", g.name}, {"arch", g.arch}, {"hbm_nominal_bytes", g.hbm_nominal_bytes}, {"hbm_usable_bytes", g.hbm_usable_bytes},
                 {"hbm_bw_bytes_per_s", g.hbm_bw_bytes_per_s}, {"bf16_flops", g.bf16_flops}, {"fp8_flops", g.fp8_flops},
                 {"nvfp4_flops", g.nvfp4_flops}, {"int8_ops", g.int8_ops}, {"nvlink_bw_bytes_per_s", g.nvlink_bw_bytes_per_s},
                 {"nvlink_domain", g.nvlink_domain}, {"sms", g.sms}, {"l2_bytes", g.l2_bytes}, {"tdp_watts", g.tdp_watts},
                 {"sources", g.sources}});
  return j;
}

nlohmann::json instances() {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& i : hw::Catalog::global().instances())
    j.push_back({{"name", i.name}, {"gpu", i.gpu}, {"gpus", i.gpus}, {"efa_devices", i.efa_devices},
                 {"efa_total_bytes_per_s", i.efa_total_bytes_per_s}, {"efa_per_gpu_bytes_per_s", i.efa_per_gpu_bytes_per_s},
                 {"efa_latency_s", i.efa_latency_s}, {"host_memory_bytes", i.host_memory_bytes},
                 {"usd_per_hour", i.usd_per_hour ? nlohmann::json(*i.usd_per_hour) : nlohmann::json(nullptr)},
                 {"nvlink_domain_gpus", i.nvlink_domain_gpus}, {"sources", i.sources}});
  return j;
}

namespace {

nlohmann::json summary_json(const models::ModelSpec& m) {
  return {{"name", m.name}, {"display_name", m.display_name}, {"layers", m.layers.size()}, {"hidden", m.hidden},
          {"total_params", models::total_params(m) + (m.has_vision ? m.vision.params() : 0)},
          {"llm_total_params", models::total_params(m)}, {"active_params", models::active_params(m)},
          {"experts", m.experts}, {"top_k", m.top_k}, {"vision", m.has_vision ? m.vision.name : ""},
          {"estimate", m.estimate}, {"note", m.note}, {"source", m.source},
          {"checkpoint_precision", m.checkpoint_precision}, {"checkpoint_precisions", m.checkpoint_precisions}};
}

}  // namespace

nlohmann::json models() {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& name : models::model_names()) j.push_back(summary_json(models::model(name)));
  return j;
}

nlohmann::json model(std::string_view name) {
  return model(models::model(name));
}

nlohmann::json model_file(const std::string& path) { return model(models::load_model_file(path)); }

nlohmann::json model(const models::ModelSpec& m) {
  nlohmann::json j = summary_json(m);
  std::string pattern;
  for (auto k : m.layers) pattern += models::pattern_char(k);
  nlohmann::json counts;
  for (auto k : models::all_layer_kinds()) counts[std::string(models::to_string(k))] = m.count(k);
  nlohmann::json widths = nlohmann::json::array();   // [[intermediate, blocks], ...]: one entry when uniform
  for (const auto& [w, n] : m.mlp_width_counts()) widths.push_back({w, n});
  j["mlp_widths"] = widths;
  j.update({{"hf_model_type", m.hf_model_type}, {"layer_pattern", pattern}, {"layer_counts", counts},
            {"heads", m.heads}, {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim},
            {"mamba_heads", m.mamba_heads}, {"mamba_head_dim", m.mamba_head_dim}, {"d_state", m.d_state},
            {"groups", m.groups}, {"conv_kernel", m.conv_kernel}, {"chunk_size", m.chunk_size},
            {"mlp_intermediate", m.mlp_intermediate}, {"mlp_gated", m.mlp_gated}, {"shared_experts", m.shared_experts},
            {"moe_intermediate", m.moe_intermediate}, {"shared_intermediate", m.shared_intermediate},
            {"moe_latent", m.moe_latent}, {"moe_gated", m.moe_gated}, {"mtp_layers", m.mtp_layers},
            {"mtp_params", models::mtp_params(m)}, {"vocab", m.vocab}, {"tied_embeddings", m.tied_embeddings},
            {"max_context", m.max_context}, {"advertised_context", m.advertised_context},
            {"ssm_state_fp32", m.ssm_state_fp32}, {"published_total_params", m.published_total_params},
            {"published_active_params", m.published_active_params},
            {"published_active_counts", m.published_active_counts},
            {"active_params_as_published", models::active_params_as_published(m)},
            {"qk_norm", m.qk_norm}, {"attention_bias", m.attention_bias}, {"attention_sinks", m.attention_sinks},
            {"attn_output_gate", m.attn_output_gate}, {"sliding_window", m.sliding_window},
            {"chunked_attention", m.chunked_attention}, {"q_lora_rank", m.q_lora_rank}, {"kv_lora_rank", m.kv_lora_rank},
            {"qk_nope_head_dim", m.qk_nope_head_dim}, {"qk_rope_head_dim", m.qk_rope_head_dim}, {"v_head_dim", m.v_head_dim},
            {"index_heads", m.index_heads}, {"index_head_dim", m.index_head_dim}, {"index_topk", m.index_topk},
            {"linear_key_heads", m.lin_key_heads}, {"linear_value_heads", m.lin_value_heads},
            {"linear_key_head_dim", m.lin_key_head_dim}, {"linear_value_head_dim", m.lin_value_head_dim},
            {"linear_conv_kernel", m.lin_conv_kernel}, {"linear_state_fp32", m.lin_state_fp32},
            {"checkpoint_precision", m.checkpoint_precision}, {"checkpoint_precisions", m.checkpoint_precisions},
            {"checkpoint_format", models::checkpoint_format_label(m)}, {"checkpoint_group_size", m.checkpoint_group_size},
            {"checkpoint_kv_precision", m.checkpoint_kv_precision}, {"quantized_experts_only", m.quantized_experts_only},
            {"experts_only_checkpoints", [&] {
               nlohmann::json e = nlohmann::json::object();
               for (const auto& [fmt, src] : m.experts_only_checkpoints) e[fmt] = src;
               return e;
             }()},
            {"hf_ids", m.hf_ids}});
  if (m.has_vision) {
    const auto& v = m.vision;
    j["vision_encoder"] = {{"name", v.name}, {"layers", v.layers}, {"hidden", v.hidden}, {"mlp_intermediate", v.mlp_intermediate},
                           {"heads", v.heads}, {"patch", v.patch}, {"tile_pixels", v.tile_pixels},
                           {"tokens_per_tile", v.tokens_per_tile}, {"max_tiles", v.max_tiles}, {"thumbnail", v.thumbnail},
                           {"params", v.params()}};
  } else {
    j["vision_encoder"] = nullptr;
  }
  return j;
}

}  // namespace servesim::api
