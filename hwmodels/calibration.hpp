// Measured kernel timings of one GPU (hwmodels/calibration/<gpu>/*.json or a user folder),
// reduced to roofline terms and fitted per op family, with cross-validated errors.
#pragma once
#include <map>
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
  std::vector<Sample> samples;
  double prior_compute = 0.7, prior_memory = 0.7;  // the measured GPU's priors for this family
  FamilyFit fit;              // the chosen method, fitted on every point
  CrossValidation cv;         // of the chosen method
  CrossValidation cv_other;   // of the best method not chosen, for the report
  // Largest |surface − meas| / meas over every point, the surface evaluated without returning the
  // stored measurement (FamilyFit::predict surface_only): the bound it reproduces them to.
  double fit_max_error = 0;
  double eager_overhead_s = -1;  // median eager − graph time over launch-bound points; < 0 if none
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
  // The embedded folder hwmodels/calibration/<lower(gpu.name)>/ (empty when there is none).
  static Calibration embedded(const GpuSpec& gpu);
  // Every *.json in a directory on disk, measured on `gpu`.
  static Calibration from_dir(const std::string& dir, const GpuSpec& gpu);

  const GpuSpec& gpu() const { return *gpu_; }
  bool empty() const { return families_.empty(); }
  const FamilyCalibration* family(std::string_view name) const;  // nullptr when not measured
  const std::map<std::string, FamilyCalibration, std::less<>>& families() const { return families_; }
  LaunchOverhead launch_overhead() const;
  const std::vector<std::string>& env() const { return env_; }  // "file: gpu, torch, date" per file

 private:
  explicit Calibration(const GpuSpec& gpu) : gpu_(&gpu) {}
  void add_document(std::string_view text, const std::string& file);
  void finish();
  const GpuSpec* gpu_;
  std::map<std::string, FamilyCalibration, std::less<>> families_;
  std::vector<std::string> env_;
};

// A parsed family file whose "points" are rows of values under a top-level "columns" list gets
// them rewritten in place as objects (null values left out); object points are left as they are.
// A row of the wrong length throws Error(file, "points[i]", ...).
void expand_point_rows(nlohmann::json& doc, const std::string& file);

// Shape-series key of a list of fields (FNV-1a over their bits).
std::uint64_t shape_key(std::initializer_list<double> fields);

}  // namespace servesim::hw
