#include "sim/resolve.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/text.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "models/model_spec.hpp"

namespace servesim::sim {

std::string Resolved::describe() const {
  if (notes.empty()) return "";
  return "defaults: " + text::join(notes, "; ");
}

std::string resolve_gpu(const std::string& gpu, const std::string& instance, const std::string& fallback) {
  const auto& cat = hw::Catalog::global();
  if (!instance.empty()) {
    const auto& inst = cat.instance(instance);
    if (!gpu.empty() && !text::iequals(cat.gpu(gpu).name, inst.gpu))
      throw Error("--gpu", "", "--gpu " + cat.gpu(gpu).name + " and --instance " + inst.name + " (" + inst.gpu +
                                   ") disagree; give one of them");
    return inst.gpu;
  }
  return gpu.empty() ? fallback : cat.gpu(gpu).name;
}

Resolved resolve(const ResolveInput& in) { return resolve(models::model(in.model), in); }

Resolved resolve(const models::ModelSpec& m, const ResolveInput& in) {
  Resolved r;
  r.model = m.name;
  r.gpu = resolve_gpu(in.gpu, in.instance, "H200");
  if (in.gpu.empty() && in.instance.empty()) r.notes.push_back("GPU H200 (none named)");
  // The checkpoint's declared precision (an HF config's quantization_config, a model JSON's
  // checkpoint_precision; BF16 when none is declared) unless --precision names one.
  // A quantised repository's Hugging Face id names its checkpoint (models::id_checkpoint_precision).
  const bool given = !in.precision.empty() && !text::iequals(in.precision, "auto");
  const std::string named = given ? std::string() : models::id_checkpoint_precision(in.model, m);
  r.precision = models::resolve_weight_precision(m, given ? in.precision : named, "--precision");
  if (!given)
    r.notes.push_back("precision " + std::string(hw::to_string(r.precision)) +
                      (named.empty() ? " (the checkpoint's)" : " (the checkpoint " + in.model + " names)"));
  const auto& gpu = hw::Catalog::global().gpu(r.gpu);
  if (in.tp) {   // a given TP keeps vLLM's PP default of 1
    r.tp = *in.tp;
    r.pp = in.pp ? *in.pp : 1;
  } else {
    const auto mg = models::min_gpus(m, gpu, r.precision);
    if (mg.min_gpus == 0)
      throw Error("--model", "", m.name + " does not fit on " + gpu.name + " at " + std::string(hw::to_string(r.precision)) +
                                     ": " + mg.note);
    r.tp = mg.par.tp;
    r.pp = in.pp ? *in.pp : mg.par.pp;
    r.notes.push_back("TP" + std::to_string(r.tp) + (r.pp > 1 ? " x PP" + std::to_string(r.pp) : "") +
                      " (servesim min-gpus: the smallest shape of " + m.name + " on " + gpu.name +
                      " whose KV cache holds twice its weights, whatever the workload; --tp sets one, recommend"
                      " sizes it for the workload)");
  }
  if (in.gpus) {
    r.gpus = *in.gpus;
  } else {
    r.gpus = r.tp * r.pp * std::max(1, in.dp);
    if (!in.one_replica) r.notes.push_back(std::to_string(r.gpus) + (r.gpus == 1 ? " GPU" : " GPUs") + " (one replica)");
  }
  return r;
}

}  // namespace servesim::sim
