// One rule for what a run uses when flags leave it open, shared by the subcommands: the model's
// checkpoint precision, the GPU named (or the instance's GPU, or H200), and the smallest
// tensor x pipeline shape that serves the model on that GPU (models/min_gpus, the default
// serving policy). Each resolved value says where it came from, so the header can print it.
// Contradictory flags (a --gpu that is not the --instance's GPU) are refused.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"

namespace servesim::sim {

struct ResolveInput {
  std::string model;                       // required
  std::string gpu, instance, precision;    // "" = not given
  std::optional<int> tp, pp, gpus;
  int dp = 1;                              // attention data-parallel ranks: a replica is tp x pp x dp GPUs
  bool one_replica = false;                // memory / step: no GPU count to resolve
};

struct Resolved {
  std::string model, gpu;
  hw::Precision precision = hw::Precision::bf16;
  int tp = 1, pp = 1, gpus = 1;
  std::vector<std::string> notes;          // "precision bf16: the checkpoint's", ...
  std::string describe() const;            // the notes joined: "defaults: ...; ..." ("" when all given)
};

// The GPU a --gpu / --instance pair names; throws Error when both are given and disagree.
std::string resolve_gpu(const std::string& gpu, const std::string& instance, const std::string& fallback);

Resolved resolve(const ResolveInput& in);
// The same for a model given as a spec (a --model-file); `in.model` is ignored.
Resolved resolve(const models::ModelSpec& m, const ResolveInput& in);

}  // namespace servesim::sim
