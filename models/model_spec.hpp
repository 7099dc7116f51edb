// Architecture of a served LLM: the layer pattern of a hybrid Mamba-2 / attention / MoE /
// dense-MLP stack and the widths of each block, plus an optional vision encoder. Specs come
// from the embedded catalogue (models/data/*.json) or from a Hugging Face config.json.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::models {

// One residual block of the stack (vLLM nemotron_h.py: "M", "*", "-", "E").
enum class LayerKind { mamba, attention, mlp, moe };
std::string_view to_string(LayerKind k);

// A ViT image encoder (RADIO ViT-H/16 for the Nemotron VL models) and its projector into the LLM.
struct VisionEncoderSpec {
  std::string name;                 // "RADIO ViT-H/16"
  int layers = 0, hidden = 0, mlp_intermediate = 0, heads = 0, patch = 16;
  int tile_pixels = 512;            // square tile side
  int tokens_per_tile = 256;        // LLM tokens per tile after pixel-shuffle downsampling
  int max_tiles = 12;               // per image, plus a thumbnail when more than one tile
  bool thumbnail = true;
  std::int64_t projector_intermediate = 0;  // MLP projector hidden width (0: none)
  std::int64_t llm_hidden = 0;      // projector output width (the LLM's hidden size)
  int patches_per_tile() const { return (tile_pixels / patch) * (tile_pixels / patch); }
  double params() const;            // ViT blocks + patch embed + projector
};

struct ModelSpec {
  std::string name;                 // catalogue key, e.g. "nemotron-3-super"
  std::string display_name;         // "NVIDIA Nemotron 3 Super 120B-A12B"
  std::string hf_model_type;        // "nemotron_h", "llama", "mixtral", "qwen3_moe"
  std::vector<LayerKind> layers;    // in order
  std::int64_t hidden = 0;
  // Attention (GQA).
  int heads = 0, kv_heads = 0, head_dim = 0;
  // Mamba-2 mixer: d_inner = mamba_heads * mamba_head_dim.
  int mamba_heads = 0, mamba_head_dim = 0, d_state = 0, groups = 0, conv_kernel = 4, chunk_size = 128;
  // Dense MLP (gated: gate+up+down, e.g. SwiGLU; non-gated: up+down, e.g. ReLU²).
  std::int64_t mlp_intermediate = 0;
  bool mlp_gated = false;
  // MoE: routed experts (each an MLP of moe_intermediate, gated like the dense MLP flag says),
  // shared experts in the full hidden width, optional latent projection (LatentMoE).
  int experts = 0, top_k = 0, shared_experts = 0;
  std::int64_t moe_intermediate = 0, shared_intermediate = 0, moe_latent = 0;
  bool moe_gated = false;
  int mtp_layers = 0;               // multi-token-prediction layers (weights loaded only for speculative decoding)
  std::vector<LayerKind> mtp_pattern;  // blocks of one MTP layer (Nemotron 3: attention + MoE)
  std::int64_t vocab = 0;
  bool tied_embeddings = false;
  std::int64_t max_context = 0;     // max_position_embeddings
  std::int64_t advertised_context = 0;  // what the model card advertises (0: max_context)
  bool ssm_state_fp32 = true;       // mamba_ssm_cache_dtype float32
  bool has_vision = false;
  VisionEncoderSpec vision;
  bool estimate = false;            // architecture not published: a best estimate
  std::string note;                 // why / what is estimated
  std::string source;               // where the figures come from
  double published_total_params = 0, published_active_params = 0;  // for checks (0: none)

  int count(LayerKind k) const;
  std::int64_t mamba_d_inner() const { return std::int64_t(mamba_heads) * mamba_head_dim; }
  std::int64_t mamba_conv_dim() const { return mamba_d_inner() + 2LL * groups * d_state; }
  std::int64_t moe_width() const { return moe_latent > 0 ? moe_latent : hidden; }  // routed experts' in/out width
};

// Parameter counts of the language model (embeddings + LM head included, MTP excluded).
double total_params(const ModelSpec& m);
double active_params(const ModelSpec& m);   // per token: top_k routed experts + everything dense
double mtp_params(const ModelSpec& m);      // all MTP layers (shared-weight heads count once)
// Per-block parameter counts (weights + small vectors), for one layer of that kind.
double layer_params(const ModelSpec& m, LayerKind k);

// The catalogue: embedded models/data/*.json plus whatever add_model_file() loaded. Lookup is
// case-insensitive; an unknown name throws Error listing the known ones.
const ModelSpec& model(std::string_view name);
std::vector<std::string> model_names();
// Adds a model from a servesim model JSON or a Hugging Face config.json (detected by model_type).
const ModelSpec& add_model_file(const std::string& path);

// Hugging Face config.json import: nemotron_h (hybrid_override_pattern or layers_block_type),
// llama, mixtral, qwen3_moe. `file` names the source in errors.
ModelSpec import_hf_config(std::string_view json_text, const std::string& file, const std::string& name);
// servesim's own model JSON (models/data/*.json): {"name", "hf_config": {...}, "vision": {...}, ...}.
ModelSpec parse_model_json(std::string_view json_text, const std::string& file);

struct Parallelism { int tp = 1; int pp = 1; int ep = 1; };   // ep: 1 = experts TP-sharded; ep == tp*dp = expert parallel

}  // namespace servesim::models
