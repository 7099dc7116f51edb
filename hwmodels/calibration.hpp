// Measured kernel timings of one GPU (hwmodels/calibration/<gpu>/*.json or a user folder),
// reduced to roofline terms and fitted per op family, with cross-validated errors.
#pragma once
#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hwmodels/catalog.hpp"
#include "hwmodels/fit.hpp"
#include "hwmodels/work.hpp"

namespace servesim::hw {

// Work of one collective as nccl-tests counts it: bus bytes = bytes × the algorithm's factor
// (all-reduce 2(n−1)/n, all-gather / reduce-scatter / all-to-all (n−1)/n, send/recv 1).
double bus_factor(std::string_view nccl_op, int gpus);

struct FamilyCalibration {
  std::string family;         // "gemm_bf16", "mamba_step", "nccl_all_reduce", ...
  std::string file;           // where its points came from
  // "vllm": measured production kernels (vLLM's own layers, NCCL); "torch": this project's PyTorch
  // runs. A vLLM family shadows a PyTorch one of the same name, which stays as "<name>_torch".
  std::string origin = "torch";
  std::string runtime;        // "vLLM 0.24.0", "NCCL 2.29.2", "torch 2.11.0+cu130"
  std::vector<std::string> kernels;  // kernel names the points' Sample::kernel index into
  bool declared = false;      // the file names its method: fitted at load, cross-validated on demand
  FitMethod fit_method = FitMethod::nearest_log;  // the declared method
  bool pooled = false;        // validate() filled cv / cv_other (five folds pooled) and, if declared, fit_max_error
  std::vector<Sample> samples;
  // Fused MoE: every (hidden, inter, top-k, experts, gated) its rows timed, at any layout, sorted
  // (KernelTables::moe_same_kernel asks whether a table timed a layer's shape at all).
  std::vector<std::array<double, 5>> moe_shapes;
  double prior_compute = 0.7, prior_memory = 0.7;  // the measured GPU's priors for this family
  FitOptions options;         // robust plane (kRobustPlaneFamilies), size envelope (collectives): calibration.cpp
  FamilyFit fit;              // the chosen method, fitted on every point
  CrossValidation cv;         // of the chosen method
  CrossValidation cv_other;   // of the best method not chosen, for the report
  FitMethod other_method = FitMethod::nearest_log;  // the method cv_other is of
  // Largest |surface − meas| / meas over every point, the surface evaluated without returning the
  // stored measurement (FamilyFit::predict surface_only): the bound it reproduces them to.
  double fit_max_error = 0;
  double eager_overhead_s = -1;  // median eager − graph time over launch-bound points; < 0 if none
  // Non-empty: the file's "rejected_kernels" names this family's kernel with the reason its
  // timings are not used (KernelModel skips the family; `calibrate report` shows why).
  std::string rejected;
};

// CPU launch cost measured alongside the kernels: what an engine pays per kernel launched
// eagerly from Python, and the smallest GPU time of a kernel replayed from a CUDA graph.
struct LaunchOverhead {
  double eager_per_kernel_s = 0;
  double graph_per_kernel_s = 0;
  std::string source;
};

class Calibration {
 public:
  // The embedded folder of `gpu`: hwmodels/calibration/<lower(gpu.name)>/ and its vllm/ (this
  // project's runs and the vLLM 0.24 tables), or, given `release` ("vllm-0.19.0"), that release's
  // folder hwmodels/calibration/<gpu>/<release>/. Empty when there is none. Read lazily: a family's
  // file is parsed, and the family fitted, the first time family() asks for it (thread-safe).
  static Calibration embedded(const GpuSpec& gpu, std::string_view release = {});
  // The release folders embedded for `gpu` ("sglang-0.5.14", "vllm-0.19.0", ...), sorted.
  static std::vector<std::string> embedded_releases(const GpuSpec& gpu);
  // Every *.json in a directory on disk, measured on `gpu` (read and fitted at once).
  static Calibration from_dir(const std::string& dir, const GpuSpec& gpu);

  Calibration(Calibration&&) noexcept;
  Calibration& operator=(Calibration&&) noexcept;
  Calibration(const Calibration&) = delete;
  Calibration& operator=(const Calibration&) = delete;
  ~Calibration();

  const GpuSpec& gpu() const { return *gpu_; }
  bool empty() const;
  const FamilyCalibration* family(std::string_view name) const;  // nullptr when not measured
  // Names of the families starting with `prefix`, without fitting them; `usable_only`: leaving out
  // those whose kernel the data rejects (FamilyCalibration::rejected).
  std::vector<std::string> family_names(std::string_view prefix, bool usable_only = false) const;
  // Every family, each read and fitted.
  const std::map<std::string, FamilyCalibration, std::less<>>& families() const;
  // The family as read from its file, fitted or not: its name, file, origin, runtime, kernels and
  // rejected reason are set, its samples and fit only once family() or families() fitted it.
  // What a provenance line needs, without the cost of fitting (nullptr when not measured).
  const FamilyCalibration* header(std::string_view name) const;
  // Every family as header() gives it: every file read, nothing fitted that was not already.
  const std::map<std::string, FamilyCalibration, std::less<>>& headers() const;
  // The engine's CPU launch cost per eager kernel (the Mamba state update's eager minus graph time
  // when measured, else the smallest family median); `graph_floor`: also the smallest measured
  // time of any point (reads every family).
  LaunchOverhead launch_overhead(bool graph_floor = true) const;
  // The held-out error of every family, five folds pooled (load only picks undeclared families'
  // method, on one fold, and skips declared ones to keep start-up fast); `calibrate report` calls it.
  void validate();
  const std::vector<std::string>& env() const;  // "file: gpu, torch, date" per file

 private:
  struct Lazy;
  explicit Calibration(const GpuSpec& gpu);
  void add_file(const std::string& path, std::string_view text);
  const GpuSpec* gpu_;
  std::unique_ptr<Lazy> lazy_;
};

// The embedded kernel tables read once at build time (hwmodels/precompute/pack_tables.cpp): for
// every embedded calibration file in the reducer's layout, its header's text, each row's family
// name and every value as RowReader reads it, packed in per-column dictionaries (a value is a
// 1, 2 or 4-byte index). Calibration::embedded() reads a file's rows from the pack instead of
// splitting and parsing its text; the samples and fits are the same bits (test
// `PackedTables.GiveTheSamplesAndFitsOfTheText`). A file the pack lacks is read from its text.
std::string pack_embedded_tables();
// The pack compiled into the binary (empty in the generator itself).
std::string_view packed_tables();
// Embedded paths the compiled pack holds.
std::vector<std::string> packed_table_files();
// Off: Calibration::embedded() reads every file from its text (tests compare the two paths).
void read_packed_tables(bool on);

// A parsed family file whose "points" are rows of values under a top-level "columns" list gets
// them rewritten in place as objects (null values left out); object points are left as they are.
// A row of the wrong length throws Error(file, "points[i]", ...).
void expand_point_rows(nlohmann::json& doc, const std::string& file);

// Shape-series key of a list of fields (FNV-1a over their bits).
std::uint64_t shape_key(std::initializer_list<double> fields);

// A fused-MoE quantisation as AIC's tables name it ("bf16", "fp8", "fp8_block", "nvfp4", "int4_wo",
// "mxfp4_w4a16", "mxfp4_w4a8"): the weight format its bytes stream at and the precision of its math.
struct MoeDtype {
  Precision weights = Precision::bf16;  // fp8_block, int4 (group 32), mxfp4, nvfp4 with their scales
  Precision math = Precision::bf16;
};
MoeDtype moe_dtype(std::string_view name, const std::string& where);
// The dtype of a fused-MoE calibration family "moe_<dtype>[_<library>]" (bf16 for a name matching none).
MoeDtype moe_family_dtype(std::string_view family);
// The kernel library of a vLLM fused-MoE kernel_source name, the suffix of its calibration family
// (moe_<dtype>_<library>): "oai_triton" (OpenAI triton_kernels), "marlin", "trtllm" (FlashInfer
// TRTLLM-gen, monolithic and modular), "cutlass" (FlashInfer CUTLASS; TensorRT-LLM's CUTLASS MoE),
// "triton" (vLLM fused_moe, SGLang fused_moe_triton); "" for a name matching none.
std::string moe_kernel_library(std::string_view kernel_source);

// Group key of an attention point: KV-cache bytes per element and sliding window (0 = full).
std::uint64_t attention_group(double kv_bytes, double window);
// Group key of an encoder-attention point: its head size. The kernels are built per head size and
// their times do not interpolate across it (B300: head_dim 72 takes 1.27x the time of 64, and 80
// only 1.16x): a measured head size is predicted from its own rows, another from every row.
std::uint64_t encoder_attention_group(double head_dim);

}  // namespace servesim::hw
