// Model catalogue, parameter counts and Hugging Face config.json import.
#include "models/model_spec.hpp"

#include <algorithm>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::models {

std::string_view to_string(LayerKind k) {
  switch (k) {
    case LayerKind::mamba: return "mamba";
    case LayerKind::attention: return "attention";
    case LayerKind::mlp: return "mlp";
    case LayerKind::moe: return "moe";
  }
  return "?";
}

int ModelSpec::count(LayerKind k) const { return int(std::count(layers.begin(), layers.end(), k)); }

double VisionEncoderSpec::params() const {
  const double h = hidden, f = mlp_intermediate;
  const double block = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;  // qkv+o (+bias), fc1/fc2 (+bias), 2 LayerNorms
  const double patch_embed = 3.0 * patch * patch * h + h + double(patches_per_tile()) * h;  // + position embedding
  // Pixel shuffle (0.5) concatenates 2x2 patches: projector input 4*h, MLP to the LLM width.
  const double proj = projector_intermediate > 0
                          ? 4 * h * double(projector_intermediate) + double(projector_intermediate) * double(llm_hidden)
                          : 0;
  return layers * block + patch_embed + proj;
}

namespace {
double mlp_params(std::int64_t in, std::int64_t inter, bool gated) { return (gated ? 3.0 : 2.0) * double(in) * double(inter); }
}  // namespace

double layer_params(const ModelSpec& m, LayerKind k) {
  const double H = double(m.hidden);
  switch (k) {
    case LayerKind::mamba: {
      const double di = double(m.mamba_d_inner()), conv = double(m.mamba_conv_dim());
      const double in_proj = H * (2 * di + 2.0 * m.groups * m.d_state + m.mamba_heads);
      return in_proj + conv * m.conv_kernel + conv /*conv bias*/ + 3.0 * m.mamba_heads /*A, D, dt_bias*/ +
             di /*gated norm*/ + di * H /*out_proj*/ + H /*pre-norm*/;
    }
    case LayerKind::attention: {
      const double q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
      return H * q + 2 * H * kv + q * H + H;
    }
    case LayerKind::mlp: return mlp_params(m.hidden, m.mlp_intermediate, m.mlp_gated) + H;
    case LayerKind::moe: {
      const double routed = double(m.experts) * mlp_params(m.moe_width(), m.moe_intermediate, m.moe_gated);
      const double shared = m.shared_experts > 0 ? mlp_params(m.hidden, m.shared_intermediate * m.shared_experts, m.moe_gated) : 0;
      const double latent = m.moe_latent > 0 ? 2 * H * double(m.moe_latent) : 0;
      return routed + shared + latent + H * m.experts /*router*/ + m.experts /*score bias*/ + H;
    }
  }
  return 0;
}

namespace {
double embedding_params(const ModelSpec& m) {
  return double(m.vocab) * double(m.hidden) * (m.tied_embeddings ? 1 : 2) + double(m.hidden) /*final norm*/;
}
}  // namespace

double total_params(const ModelSpec& m) {
  double p = embedding_params(m);
  for (auto k : m.layers) p += layer_params(m, k);
  return p;
}

double active_params(const ModelSpec& m) {
  double p = total_params(m);
  if (m.experts > 0) {
    const double inactive = double(m.experts - m.top_k) * mlp_params(m.moe_width(), m.moe_intermediate, m.moe_gated);
    p -= inactive * m.count(LayerKind::moe);
  }
  return p;
}

double mtp_params(const ModelSpec& m) {
  if (m.mtp_layers == 0) return 0;
  // One MTP layer: eh_proj (2H -> H), two input norms, its blocks, a final norm; embeddings and
  // LM head are shared with the base model. Nemotron 3 shares the MTP weights across depths.
  double p = 2.0 * m.hidden * m.hidden + 3.0 * m.hidden;
  for (auto k : m.mtp_pattern) p += layer_params(m, k);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Import.

namespace {

// Python's json module writes Infinity/NaN, which strict JSON parsers reject.
std::string sanitize(std::string_view text) {
  static const std::regex bad(R"((^|[\s\[,:])(-?Infinity|NaN)(?=[\s,\]\}]))");
  return std::regex_replace(std::string(text), bad, "$1null");
}

std::vector<LayerKind> parse_pattern(const JsonReader& j, const std::string& key) {
  std::vector<LayerKind> out;
  const std::string pat = j.string(key);
  for (char c : pat) {
    switch (c) {
      case 'M': out.push_back(LayerKind::mamba); break;
      case '*': out.push_back(LayerKind::attention); break;
      case '-': out.push_back(LayerKind::mlp); break;
      case 'E': out.push_back(LayerKind::moe); break;
      default: j.fail(key, std::string("unknown block type '") + c + "' (expected M, *, - or E)");
    }
  }
  return out;
}

std::vector<LayerKind> parse_block_types(const JsonReader& j, const std::string& key) {
  std::vector<LayerKind> out;
  const auto& arr = j.json().at(key);
  if (!arr.is_array()) j.fail(key, "expected an array of block types");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string s = arr[i].is_string() ? text::lower(arr[i].get<std::string>()) : "";
    if (s == "mamba") out.push_back(LayerKind::mamba);
    else if (s == "attention") out.push_back(LayerKind::attention);
    else if (s == "mlp") out.push_back(LayerKind::mlp);
    else if (s == "moe") out.push_back(LayerKind::moe);
    else j.fail(key + "[" + std::to_string(i) + "]", "unknown block type " + brief(arr[i]) + " (expected mamba, attention, mlp or moe)");
  }
  return out;
}

int positive(const JsonReader& j, const std::string& key) {
  const auto v = j.integer(key);
  if (v <= 0) j.fail(key, "must be positive, got " + std::to_string(v));
  return int(v);
}
std::int64_t positive64(const JsonReader& j, const std::string& key) {
  const auto v = j.integer(key);
  if (v <= 0) j.fail(key, "must be positive, got " + std::to_string(v));
  return v;
}

void read_attention(ModelSpec& m, const JsonReader& j) {
  m.heads = positive(j, "num_attention_heads");
  m.kv_heads = j.has("num_key_value_heads") ? positive(j, "num_key_value_heads") : m.heads;
  m.head_dim = j.has("head_dim") ? positive(j, "head_dim") : int(m.hidden / m.heads);
  if (m.heads % m.kv_heads != 0) j.fail("num_key_value_heads", "must divide num_attention_heads");
}

void transformer_layers(ModelSpec& m, int n, LayerKind ffn) {
  for (int i = 0; i < n; ++i) {
    m.layers.push_back(LayerKind::attention);
    m.layers.push_back(ffn);
  }
}

}  // namespace

ModelSpec import_hf_config(std::string_view json_text, const std::string& file, const std::string& name) {
  const auto doc = parse_json(sanitize(json_text), file);
  if (!doc.is_object()) throw Error(file, "", "expected a JSON object (a Hugging Face config.json)");
  JsonReader j(doc, file);
  ModelSpec m;
  m.name = name;
  m.display_name = name;
  m.hf_model_type = j.string("model_type");
  // Multimodal configs (llama4, qwen3_vl, gemma, kimi) nest the language model under text_config:
  // say that, rather than "hidden_size: missing".
  if (!j.has("hidden_size") && j.has("text_config"))
    j.fail("model_type", "\"" + m.hf_model_type + "\" keeps its language model under text_config, which servesim does not "
                         "import (supported: configs with hidden_size at the top level)");
  m.hidden = positive64(j, "hidden_size");
  m.vocab = positive64(j, "vocab_size");
  m.tied_embeddings = j.boolean_or("tie_word_embeddings", false);
  m.max_context = j.integer_or("max_position_embeddings", 0);
  m.source = "Hugging Face config.json (" + file + ")";
  const std::string type = m.hf_model_type;
  if (type == "nemotron_h") {
    if (j.has("hybrid_override_pattern")) m.layers = parse_pattern(j, "hybrid_override_pattern");
    else if (j.has("layers_block_type")) m.layers = parse_block_types(j, "layers_block_type");
    else j.fail("hybrid_override_pattern", "missing: nemotron_h needs hybrid_override_pattern or layers_block_type");
    if (j.has("num_hidden_layers") && j.integer("num_hidden_layers") != std::int64_t(m.layers.size()))
      j.fail("num_hidden_layers", "is " + std::to_string(j.integer("num_hidden_layers")) + " but the layer pattern has " +
                                      std::to_string(m.layers.size()) + " blocks");
    if (m.count(LayerKind::attention) > 0) read_attention(m, j);
    if (m.count(LayerKind::mamba) > 0) {
      m.mamba_heads = positive(j, "mamba_num_heads");
      m.mamba_head_dim = positive(j, "mamba_head_dim");
      m.d_state = positive(j, "ssm_state_size");
      m.groups = positive(j, "n_groups");
      m.conv_kernel = positive(j, "conv_kernel");
      m.chunk_size = int(j.integer_or("chunk_size", 128));
      m.ssm_state_fp32 = text::lower(j.string_or("mamba_ssm_cache_dtype", "float32")) == "float32";
    }
    if (m.count(LayerKind::mlp) > 0) m.mlp_intermediate = positive64(j, "intermediate_size");
    if (m.count(LayerKind::moe) > 0) {
      m.experts = positive(j, "n_routed_experts");
      m.top_k = positive(j, "num_experts_per_tok");
      m.moe_intermediate = positive64(j, "moe_intermediate_size");
      m.shared_experts = int(j.integer_or("n_shared_experts", 0));
      if (m.shared_experts > 0) m.shared_intermediate = positive64(j, "moe_shared_expert_intermediate_size");
      m.moe_latent = j.integer_or("moe_latent_size", 0);
    }
    // ReLU² non-gated MLPs and experts (vLLM nemotron_h.py).
    m.mlp_gated = m.moe_gated = false;
    m.mtp_layers = int(j.integer_or("num_nextn_predict_layers", 0));
    if (m.mtp_layers > 0) {
      if (j.has("mtp_hybrid_override_pattern")) m.mtp_pattern = parse_pattern(j, "mtp_hybrid_override_pattern");
      else if (j.has("mtp_layers_block_type")) m.mtp_pattern = parse_block_types(j, "mtp_layers_block_type");
      else m.mtp_pattern = {LayerKind::attention, LayerKind::moe};
    }
  } else if (type == "llama") {
    read_attention(m, j);
    m.mlp_intermediate = positive64(j, "intermediate_size");
    m.mlp_gated = true;
    transformer_layers(m, positive(j, "num_hidden_layers"), LayerKind::mlp);
  } else if (type == "mixtral" || type == "qwen3_moe") {
    read_attention(m, j);
    m.moe_gated = true;
    if (type == "mixtral") {
      m.experts = positive(j, "num_local_experts");
      m.moe_intermediate = positive64(j, "intermediate_size");
    } else {
      m.experts = positive(j, "num_experts");
      m.moe_intermediate = positive64(j, "moe_intermediate_size");
      if (j.integer_or("decoder_sparse_step", 1) != 1 || (j.has("mlp_only_layers") && !j.json().at("mlp_only_layers").empty()))
        j.fail("decoder_sparse_step", "only all-MoE Qwen3 stacks are supported");
    }
    m.top_k = positive(j, "num_experts_per_tok");
    if (m.top_k > m.experts) j.fail("num_experts_per_tok", "exceeds the number of experts");
    transformer_layers(m, positive(j, "num_hidden_layers"), LayerKind::moe);
  } else {
    j.fail("model_type", "unsupported model_type \"" + type + "\" (supported: nemotron_h, llama, mixtral, qwen3_moe)");
  }
  if (m.layers.empty()) j.fail("num_hidden_layers", "the model has no layers");
  if (m.count(LayerKind::mamba) > 0 && m.mamba_heads % m.groups != 0) j.fail("n_groups", "must divide mamba_num_heads");
  return m;
}

ModelSpec parse_model_json(std::string_view json_text, const std::string& file) {
  const auto doc = parse_json(json_text, file);
  JsonReader j(doc, file);
  const std::string name = j.string("name");
  const std::string hf = j.object("hf_config").json().dump();
  ModelSpec m = import_hf_config(hf, file + ": hf_config", name);
  m.display_name = j.string_or("display_name", name);
  m.source = j.string("source");
  m.note = j.string_or("note", "");
  m.estimate = j.boolean_or("estimate", false);
  m.advertised_context = j.integer_or("advertised_context", 0);
  m.published_total_params = j.number_or("published_total_params", 0);
  m.published_active_params = j.number_or("published_active_params", 0);
  if (j.has("vision")) {
    const auto v = j.object("vision");
    m.has_vision = true;
    m.vision.name = v.string("name");
    m.vision.layers = int(v.integer("layers"));
    m.vision.hidden = int(v.integer("hidden"));
    m.vision.mlp_intermediate = int(v.integer("mlp_intermediate"));
    m.vision.heads = int(v.integer("heads"));
    m.vision.patch = int(v.integer("patch"));
    m.vision.tile_pixels = int(v.integer("tile_pixels"));
    m.vision.tokens_per_tile = int(v.integer("tokens_per_tile"));
    m.vision.max_tiles = int(v.integer("max_tiles"));
    m.vision.thumbnail = v.boolean_or("thumbnail", true);
    m.vision.projector_intermediate = v.integer_or("projector_intermediate", 0);
    m.vision.llm_hidden = m.hidden;
    if (m.vision.layers <= 0 || m.vision.hidden <= 0 || m.vision.heads <= 0 || m.vision.patch <= 0)
      v.fail("layers", "vision encoder sizes must be positive");
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Catalogue.

namespace {
struct Registry {
  std::vector<std::unique_ptr<ModelSpec>> models;
  Registry() {
    for (auto path : data::list("models/data/")) {
      if (!path.ends_with(".json")) continue;
      models.push_back(std::make_unique<ModelSpec>(parse_model_json(data::get(path), std::string(path))));
    }
  }
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const auto& m : registry().models) out.push_back(m->name);
  return out;
}

const ModelSpec& model(std::string_view name) {
  for (const auto& m : registry().models)
    if (text::iequals(m->name, name)) return *m;
  throw Error("--model", "", "unknown model \"" + std::string(name) + "\" (known: " + text::join(model_names()) + ")");
}

const ModelSpec& add_model_file(const std::string& path) {
  const std::string text = read_input_file(path, kMaxJsonFileBytes);
  const auto doc = parse_json(sanitize(text), path);
  ModelSpec m;
  if (doc.is_object() && doc.contains("hf_config")) {
    m = parse_model_json(text, path);
  } else {
    std::string stem = path.substr(path.find_last_of('/') + 1);
    if (stem.ends_with(".json")) stem.resize(stem.size() - 5);
    m = import_hf_config(text, path, stem);
  }
  auto& models = registry().models;
  for (auto& existing : models)
    if (text::iequals(existing->name, m.name)) {
      *existing = std::move(m);
      return *existing;
    }
  models.push_back(std::make_unique<ModelSpec>(std::move(m)));
  return *models.back();
}

}  // namespace servesim::models
