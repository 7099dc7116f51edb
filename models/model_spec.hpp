// Architecture of a served LLM: the layer pattern of a hybrid Mamba-2 / attention / MoE /
// dense-MLP stack and the widths of each block, plus an optional vision encoder. Specs come
// from the embedded catalogue (models/data/*.json) or from a Hugging Face config.json.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servesim::models {

// One residual block of the stack (vLLM nemotron_h.py: "M", "*", "-", "E"), plus the mixers of
// other families: multi-head latent attention (DeepSeek-V3 style, "mla"), sliding-window or
// chunked-local attention ("sliding_attention": KV capped at ModelSpec::sliding_window tokens) and
// Gated DeltaNet linear attention ("linear_attention": a recurrent state per sequence, as Mamba).
enum class LayerKind { mamba, attention, mlp, moe, mla, sliding_attention, linear_attention };
std::string_view to_string(LayerKind k);
// Every kind, in enum order; the one-character codes of a layer pattern: M mamba, * attention,
// - mlp, E moe, L mla (latent attention), S sliding_attention, G linear_attention (Gated DeltaNet).
const std::vector<LayerKind>& all_layer_kinds();
char pattern_char(LayerKind k);
// Softmax attention that keeps a KV cache: attention, sliding_attention, mla.
bool keeps_kv(LayerKind k);
// Token mixers (one per transformer layer): every kind but mlp and moe.
bool is_mixer(LayerKind k);

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
  // Attention (GQA). Flags: per-head RMSNorm of q and k (qwen3, QK-norm), biases on q/k/v/o
  // (gpt-oss), a learned sink logit per head (gpt-oss), a sigmoid output gate as wide as q
  // (qwen3.5 attn_output_gate); qk_norm_width: 0 = per head (head_dim), else the whole projection
  // (MiniMax-M2's per_layer QK-norm).
  int heads = 0, kv_heads = 0, head_dim = 0;
  bool qk_norm = false, qk_norm_per_layer = false, attention_bias = false, attention_sinks = false, attn_output_gate = false;
  // Sliding-window / chunked-local attention layers (LayerKind::sliding_attention): KV per sequence
  // capped at sliding_window tokens. chunked: Llama-4's chunked local attention (a token sees its
  // chunk only), costed and cached like a window of the chunk size.
  std::int64_t sliding_window = 0;
  bool chunked_attention = false;
  // Multi-head latent attention (LayerKind::mla, DeepSeek-V3 / Kimi-K2 / GLM-5): q through a
  // q_lora_rank bottleneck (0: direct q_proj), k/v through the compressed latent of kv_lora_rank
  // plus a shared rope key of qk_rope_head_dim. Cached per token and layer: kv_lora_rank +
  // qk_rope_head_dim elements, the same on every TP rank. DSA indexer (GLM-5, DeepSeek-V3.2):
  // index_heads x index_head_dim scores pick index_topk tokens per query.
  int q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int index_heads = 0, index_head_dim = 0, index_topk = 0;
  // Gated DeltaNet (LayerKind::linear_attention, qwen3_next / qwen3.5): key_dim = lin_key_heads x
  // lin_key_head_dim, value_dim = lin_value_heads x lin_value_head_dim; state per sequence and
  // layer: a conv state of (lin_conv_kernel - 1) x (2 key_dim + value_dim) and a recurrent state
  // of lin_value_heads x lin_key_head_dim x lin_value_head_dim (fp32 when lin_state_fp32).
  int lin_key_heads = 0, lin_value_heads = 0, lin_key_head_dim = 0, lin_value_head_dim = 0, lin_conv_kernel = 4;
  bool lin_state_fp32 = true;
  // Mamba-2 mixer: d_inner = mamba_heads * mamba_head_dim.
  int mamba_heads = 0, mamba_head_dim = 0, d_state = 0, groups = 0, conv_kernel = 4, chunk_size = 128;
  // Dense MLP (gated: gate+up+down, e.g. SwiGLU; non-gated: up+down, e.g. ReLU²).
  std::int64_t mlp_intermediate = 0;
  bool mlp_gated = false;
  // MLP widths per block where they differ (nemotron-nas: each layer's block_configs ffn_mult): one
  // entry per entry of `layers`, 0 where the block is not an MLP; mlp_intermediate is then the
  // widest. Empty: every MLP block is mlp_intermediate wide.
  std::vector<std::int64_t> layer_mlp_widths;
  // MoE: routed experts (each an MLP of moe_intermediate, gated like the dense MLP flag says),
  // shared experts in the full hidden width, optional latent projection (LatentMoE).
  int experts = 0, top_k = 0, shared_experts = 0;
  std::int64_t moe_intermediate = 0, shared_intermediate = 0, moe_latent = 0;
  bool moe_gated = false;
  bool moe_bias = false;            // routed experts carry biases (gpt-oss)
  bool shared_expert_gate = false;  // a sigmoid gate (hidden -> 1) on the shared expert (qwen3_next / qwen3.5)
  int mtp_layers = 0;               // multi-token-prediction layers (weights loaded only for speculative decoding)
  std::vector<LayerKind> mtp_pattern;  // blocks of one MTP layer (Nemotron 3: attention + MoE)
  std::int64_t vocab = 0;
  // Sampling defaults vLLM takes from the checkpoint's generation_config.json (--generation-config
  // auto, the default) for requests that set none, as aiperf's do: they pick the sampler's work
  // each step (hw::sampler). Without a file vLLM's own: temperature 1, top_k and top_p off.
  struct Sampling {
    double temperature = 1.0;
    int top_k = 0;       // <= 0: off
    double top_p = 1.0;  // 1: off
    std::string source;  // the generation_config.json the values come from ("" : vLLM's defaults)
  } sampling;
  // What a streaming client sees of an answer: the tokens the model emits before its first
  // visible text. gpt-oss answers in OpenAI's harmony format: the assistant turn opens with the
  // header <|channel|>analysis<|message|> (3 tokens), which vLLM's harmony parser turns into no
  // text, so a client's first token (aiperf's TTFT: the first chunk with text) is the 4th sampled.
  struct ResponseFormat {
    std::string name = "plain";
    int preamble_tokens = 0;
  } response;
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
  // What the publisher's active-parameter figure counts: "all" (embeddings and LM head, as
  // active_params), "no_input_embedding" (the lookup table excluded: OpenAI, DeepSeek, Moonshot)
  // or "no_embeddings" (neither the input embedding nor the LM head: Z.ai, MiniMax).
  std::string published_active_counts = "all";
  double published_params_rounding = 0;  // the published figures are rounded to this (e.g. "A17B": 0.5e9)
  // Weight format the checkpoint declares (HF quantization_config / hf_quant_config.json):
  // "bf16", "fp8", "nvfp4", "mxfp4" or "int4"; the default weight precision when none is asked.
  std::string checkpoint_precision = "bf16";
  // "bf16", "fp8" (per tensor/channel), "fp8_block" (128x128 block scales), "nvfp4", "mxfp4", "int4"
  // (weight-only, W4A16) or "int8": hw::parse_precision reads it. INT4: values per scale group.
  int checkpoint_group_size = 0;
  // Only the routed experts are quantised (gpt-oss MXFP4, Kimi-K2.5 INT4): attention, dense MLPs,
  // shared experts, router, embeddings stay BF16.
  bool quantized_experts_only = false;
  // Published checkpoints in another format that quantise only the routed experts, with the file
  // that says so (NVIDIA's NVFP4 of MiniMax-M2.5: hf_quant_config.json excludes every self_attn and
  // router): format ("nvfp4") -> source.
  std::vector<std::pair<std::string, std::string>> experts_only_checkpoints;
  // MLA projections a checkpoint keeps in BF16 where the rest of its linear layers are quantised
  // (hf_quant_config.json exclude_modules: NVIDIA's NVFP4 DeepSeek-V3.1 / V3.2 list q_a_proj,
  // q_b_proj, kv_a_proj_with_mqa and kv_b_proj of every layer; o_proj is NVFP4).
  struct MlaBf16Projections {
    bool q_a = false, q_b = false, kv_a = false, kv_b = false, o = false;
    std::string source;  // the file that says so
    bool any() const { return q_a || q_b || kv_a || kv_b || o; }
  };
  // Format ("nvfp4") -> the projections that format's checkpoint keeps in BF16.
  std::vector<std::pair<std::string, MlaBf16Projections>> mla_bf16_checkpoints;
  std::string checkpoint_kv_precision;   // "fp8" when hf_quant_config declares FP8 KV, else ""
  std::vector<std::string> checkpoint_precisions;  // catalogue: the published checkpoints' formats
  std::vector<std::string> hf_ids;       // Hugging Face repository ids that name this model

  int count(LayerKind k) const;
  std::int64_t mamba_d_inner() const { return std::int64_t(mamba_heads) * mamba_head_dim; }
  std::int64_t mamba_conv_dim() const { return mamba_d_inner() + 2LL * groups * d_state; }
  std::int64_t moe_width() const { return moe_latent > 0 ? moe_latent : hidden; }  // routed experts' in/out width
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }           // MLA query/key head width
  std::int64_t mla_latent_dim() const { return std::int64_t(kv_lora_rank) + qk_rope_head_dim; }  // cached per token and layer
  std::int64_t lin_key_dim() const { return std::int64_t(lin_key_heads) * lin_key_head_dim; }
  std::int64_t lin_value_dim() const { return std::int64_t(lin_value_heads) * lin_value_head_dim; }
  std::int64_t lin_conv_dim() const { return 2 * lin_key_dim() + lin_value_dim(); }
  int kv_layers() const;            // layers that keep a KV cache (attention, sliding, mla)
  // The width of the MLP block at `layer` (an index into layers).
  std::int64_t mlp_width(std::size_t layer) const { return layer_mlp_widths.empty() ? mlp_intermediate : layer_mlp_widths[layer]; }
  // The MLP blocks' distinct widths and how many blocks have each (one entry when uniform).
  std::vector<std::pair<std::int64_t, int>> mlp_width_counts() const;
};

// Parameter counts of the language model (embeddings + LM head included, MTP excluded).
double total_params(const ModelSpec& m);
double active_params(const ModelSpec& m);   // per token: top_k routed experts + everything dense
// active_params counted as the publisher counts it (published_active_counts).
double active_params_as_published(const ModelSpec& m);
double mtp_params(const ModelSpec& m);      // all MTP layers (shared-weight heads count once)
// Per-block parameter counts (weights + small vectors), for one layer of that kind.
double layer_params(const ModelSpec& m, LayerKind k);

// The catalogue: the embedded models/data/*.json plus what add_model_file() added. Lookup is
// case-insensitive; an unknown name throws Error listing the known ones. Commands read model
// files with load_model_file (not added); add_model_file is for callers that resolve names
// afterwards (servesim validate --model-file). A Hugging Face id a catalogue entry lists, or one
// whose name reduces to a catalogue name (find_model), names that entry too.
const ModelSpec& model(std::string_view name);
std::vector<std::string> model_names();
// Reads a servesim model JSON or a Hugging Face config.json without adding it to the catalogue:
// the spec lives in a cache keyed by the file's path (stable address), named after the file's
// "name" or, for an HF config, the folder or file stem. A sibling hf_quant_config.json (same
// folder, or <stem minus "config">hf_quant_config.json) sets the checkpoint precision.
const ModelSpec& load_model_file(const std::string& path);
// Reads a model file (as load_model_file) and adds it to the catalogue under its name.
const ModelSpec& add_model_file(const std::string& path);
// The catalogue entry whose hf_ids list `hf_id` (case-insensitive; a trailing "/" or a
// "-FP8"/"-NVFP4"/"-FP4" quantised-repo suffix is also tried), or nullptr.
const ModelSpec* model_by_hf_id(std::string_view hf_id);
// The names a model id may stand for, most specific first: the id, its last path component
// lower-cased, that without the "meta-" of Meta's older repository names, then without each
// checkpoint or release suffix in turn (-Instruct, -FP8, -NVFP4, -FP4, -BF16, -HF, -Dynamic, -Base,
// -8K, -Thinking, -Chat, -W8A8, -W4A16, -AWQ, -INT4, a four-digit release date such as -2507):
// "meta-llama/Meta-Llama-3.1-70B-Instruct" -> ..., "llama-3.1-70b".
std::vector<std::string> model_name_candidates(std::string_view id);
// The catalogue entry a name or a Hugging Face id names: a catalogue name, an hf_ids entry
// (model_by_hf_id), then model_name_candidates as catalogue names; nullptr when none does.
const ModelSpec* find_model(std::string_view name_or_id);
// The checkpoint format a quantised repository's id names, or "" when it names none: "-FP8"
// (also "-FP8-Dynamic" and the like) the model's FP8 checkpoint (fp8_block where the model
// publishes only that, else per-tensor fp8), "-NVFP4" / "-FP4" nvfp4.
std::string id_checkpoint_precision(std::string_view id, const ModelSpec& m);

// Hugging Face config.json import: nemotron_h (hybrid_override_pattern or layers_block_type),
// llama, mixtral, qwen3, qwen3_moe, gpt_oss, minimax_m2, deepseek_v3 / kimi_k2 / glm_moe_dsa /
// deepseek_v32 (MLA), qwen3_next / qwen3_5 / qwen3_5_moe (Gated DeltaNet), llama4; vision-language
// configs through their text_config (Qwen3-VL, Qwen3.5, Kimi-K2.5, Llama 4). `file` names the
// source in errors; anything else fails with one line naming the unsupported feature.
// `hf_quant_json`: the sibling hf_quant_config.json's text, or empty.
ModelSpec import_hf_config(std::string_view json_text, const std::string& file, const std::string& name,
                           std::string_view hf_quant_json = {});
// servesim's own model JSON (models/data/*.json): {"name", "hf_config": {...}, "vision": {...}, ...}.
ModelSpec parse_model_json(std::string_view json_text, const std::string& file);

// One replica's parallel layout, as `vllm serve` takes it. tp: tensor parallel within each
// attention data-parallel rank; pp: pipeline stages; dp: attention data-parallel ranks (each runs
// its own requests through attention and the dense layers, with its own KV cache; the MoE layers
// span all tp x dp GPUs); ep: 1 = routed experts tensor-sharded over tp x dp, ep == tp x dp =
// whole experts per GPU (vLLM's --enable-expert-parallel), 1 < ep < tp x dp = ep groups of
// experts, each group's experts tensor-sharded over its tp x dp / ep GPUs (MoE TP x EP:
// TensorRT-LLM's moe_tensor_parallel_size x moe_expert_parallel_size, SGLang's --ep-size below its
// --tp-size; vLLM has no such layout). The replica has tp x pp x dp GPUs.
// What an MoE layer under attention DP runs in a step that carries prefill work, whose ranks hold
// unequal token counts (a decode-only step's ranks are balanced, and every engine pads them to the
// busiest rank's share for its CUDA graphs):
enum class DpPrefillMoe {
  padded,     // every rank padded to the busiest rank's tokens (vLLM: the model runner's DP padding)
  gathered,   // the ranks' own tokens, all-gathered with per-rank sizes and reduce-scattered back (TensorRT-LLM)
  summed,     // the ranks' own tokens in one buffer of their sum, gathered and reduced by two all-reduces
              // (SGLang's SUM_LEN padding mode, which extend batches take)
};
std::string_view to_string(DpPrefillMoe p);

struct Parallelism {
  int tp = 1;
  int pp = 1;
  int ep = 1;
  int dp = 1;
  // How an MoE layer under attention DP exchanges tokens: false, every rank all-gathers the DP
  // group's hidden states and reduce-scatters the outputs (vLLM's allgather_reducescatter, SGLang's
  // moe_a2a_backend none, TensorRT-LLM's default: the engines' defaults); true, each rank sends
  // its tokens only to the ranks of their top-k experts and gets the outputs back, two all-to-alls
  // (vLLM's deepep_* / pplx all2all backends, SGLang's deepep, TensorRT-LLM's WIDEEP).
  bool moe_all_to_all = false;
  DpPrefillMoe dp_prefill_moe = DpPrefillMoe::padded;
  int gpus() const { return tp * pp * dp; }
  int moe_group() const { return tp * dp; }  // GPUs an MoE layer spans
  int expert_groups() const { return ep > 1 ? ep : 1; }  // ways the routed experts are split by expert
  int moe_tp() const { return moe_group() / expert_groups(); }  // ways each routed expert is tensor-sharded
  // MoE TP x EP: the experts split by expert and each one sharded too (1 < ep < tp x dp).
  bool hybrid_ep() const { return ep > 1 && ep < moe_group(); }
  // "TP4", "TP2 PP2", "TP2 DP4 EP8", "TP8 EP4 (MoE TP2)": as servesim prints a layout.
  std::string label() const {
    std::string s = "TP" + std::to_string(tp);
    if (pp > 1) s += " PP" + std::to_string(pp);
    if (dp > 1) s += " DP" + std::to_string(dp);
    if (ep > 1) s += " EP" + std::to_string(ep);
    if (hybrid_ep()) s += " (MoE TP" + std::to_string(moe_tp()) + ")";
    return s;
  }
};

}  // namespace servesim::models
