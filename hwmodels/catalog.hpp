// GPU and instance catalogues: datasheet figures with a source for each, loaded from the
// embedded JSON in hwmodels/data/ and from user files. Names are case-insensitive.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::hw {

// Weight precision and the checkpoint format that carries it (how vLLM's quantisation method reads
// the HF config's quantization_config, vllm-engine.md §5):
//   bf16       unquantised
//   fp8        FP8 E4M3 with per-tensor scales (ModelOpt FP8, compressed-tensors static per-tensor)
//   nvfp4      FP4 E2M1 + one FP8 scale per 16 values (ModelOpt / compressed-tensors NVFP4)
//   int8       INT8 W8A8
//   fp8_block  FP8 E4M3 with one FP32 scale per 128x128 block (quant_method fp8 + weight_block_size:
//              DeepSeek-V3, MiniMax-M2.5, Qwen3-FP8)
//   mxfp4      FP4 E2M1 + one E8M0 scale per 32 values (quant_method mxfp4: gpt-oss)
//   int4       INT4 weight-only (W4A16), one BF16 scale per group of 32 (compressed-tensors
//              pack-quantized int4 group 32: Kimi-K2 / K2.5); BF16 activations and math
enum class Precision { bf16, fp8, nvfp4, int8, fp8_block, mxfp4, int4 };
std::string_view to_string(Precision p);
// Parses "bf16" | "fp8" | "nvfp4" | "int8" | "fp8_block" | "mxfp4" | "int4" (case-insensitive);
// `where` names the flag/file for errors.
Precision parse_precision(std::string_view s, const std::string& where = "--precision");
// Every precision, in enum order.
const std::vector<Precision>& all_precisions();
// The precision the tensor cores compute in: fp8_block -> fp8; the weight-only formats (int4,
// mxfp4) -> bf16 (vLLM's Marlin / Triton / TRTLLM mxfp4 x bf16 kernels dequantise in the kernel);
// nvfp4 -> nvfp4 (on a GPU without FP4 tensor cores vLLM runs it weight-only, see GpuSpec::native).
Precision math_precision(Precision p);
// The same element type (fp8 and fp8_block; nvfp4 and mxfp4 are both FP4 E2M1): what an AIC
// deployment label such as "fp8" or "fp4" may name.
Precision storage_family(Precision p);

// Achieved fractions of peak measured on this GPU by others (hardware.md §2): they carry the
// H200-fitted efficiency surfaces over to GPUs without their own calibration folder.
struct EfficiencyPriors {
  double gemm_bf16 = 0, gemm_fp8 = 0, gemm_nvfp4 = 0;  // large-GEMM fraction of dense peak
  double memory = 0;                                  // memory-bound fraction of HBM peak
  double nccl_busbw = 0;                              // all-reduce busbw / NVLink per-direction bw
  double nccl_latency_s = 0;                          // small-message all-reduce latency, 2 GPUs
  double gemm(Precision p) const;                     // the GEMM fraction for a weight precision (its math precision)
};

struct GpuSpec {
  std::string name;                 // "H200"
  std::string arch;                 // "hopper", "blackwell", "blackwell-ultra"
  double hbm_nominal_bytes = 0;     // datasheet capacity
  double hbm_usable_bytes = 0;      // what the driver reports (nvidia-smi total)
  double hbm_bw_bytes_per_s = 0;    // peak HBM bandwidth
  double bf16_flops = 0, fp8_flops = 0, nvfp4_flops = 0, int8_ops = 0;  // dense peaks; 0 = not native
  double nvlink_bw_bytes_per_s = 0; // per GPU, per direction
  int nvlink_domain = 8;            // GPUs in one NVLink/NVSwitch domain
  int sms = 0;
  double l2_bytes = 0;
  double tdp_watts = 0;
  EfficiencyPriors priors;
  std::map<std::string, std::string> sources;  // field name -> citation

  double dense_flops(Precision p) const;       // 0 when the precision is not native
  bool native(Precision p) const { return dense_flops(p) > 0; }
};

struct InstanceSpec {
  std::string name;                 // "p5en.48xlarge"
  std::string gpu;                  // GPU name in the catalogue
  int gpus = 8;
  int efa_devices = 0;
  double efa_total_bytes_per_s = 0;     // all EFA NICs, one direction
  double efa_per_gpu_bytes_per_s = 0;   // the NIC share of one GPU, one direction
  double efa_latency_s = 0;             // small-message inter-node latency prior
  double host_memory_bytes = 0;
  std::optional<double> usd_per_hour;   // on-demand, when a source gives one
  int nvlink_domain_gpus = 8;           // GPUs reachable over NVLink (72 on an NVL72 UltraServer)
  std::map<std::string, std::string> sources;
};

class Catalog {
 public:
  // The embedded catalogue (hwmodels/data/*.json) plus whatever add_file() loaded since.
  static Catalog& global();

  // Adds GPUs and/or instances from a user JSON file (same layout as hwmodels/data/).
  void add_file(const std::string& path);
  // Sets an instance's $/hour (`servesim --price INSTANCE=USD`); `source` is cited for it.
  void set_price(std::string_view instance, double usd_per_hour, const std::string& source);

  const GpuSpec& gpu(std::string_view name) const;            // throws Error listing known names
  const InstanceSpec& instance(std::string_view name) const;  // throws Error listing known names
  const std::vector<GpuSpec>& gpus() const { return gpus_; }
  const std::vector<InstanceSpec>& instances() const { return instances_; }

  // Parses one catalogue document ({"gpus": [...], "instances": [...]}); `file` names it in errors.
  // An entry whose name is already known replaces it.
  void load_json(std::string_view text, const std::string& file);
  // Names of all GPUs / instances, in catalogue order.
  std::vector<std::string> gpu_names() const;
  std::vector<std::string> instance_names() const;

 private:
  std::vector<GpuSpec> gpus_;
  std::vector<InstanceSpec> instances_;
};

}  // namespace servesim::hw
