#include "sim/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "sim/engine/engine_profile.hpp"

namespace servesim::sim {

namespace {
const char* const kNames[] = {"gemm_scale", "moe_scale", "attention_scale", "communication_scale", "prefill_scale", "decode_scale",
                              "decode_attention_scale", "custom_allreduce_scale", "mixer_scale", "step_cpu_factor", "step_gpu_ms", "forward_floor_ms", "step_overhead_factor", "request_overhead_ms",
                              "request_latency_ms", "first_token_floor_ms", "spread_factor", "handoff_scale"};
bool known(const std::string& n) {
  for (const char* k : kNames)
    if (n == k) return true;
  return false;
}
}  // namespace

std::string calibration_parameter_names() {
  std::string s;
  for (const char* k : kNames) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

const CalibratedParameter* CalibrationProfile::parameter(const std::string& name) const {
  for (const auto& p : parameters)
    if (p.name == name) return &p;
  return nullptr;
}

CalibrationProfile parse_calibration(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw Error(file, "", "expected a JSON object (a profile `servesim calibrate e2e` writes)");
  const JsonReader r(j, file);
  // The format version: a profile of another version names fields this reader would misread.
  // Every profile servesim writes carries it; a file without it is not one (or not one this reader knows).
  if (!r.has("servesim_calibration"))
    r.fail("servesim_calibration", "missing: a profile `servesim calibrate e2e --output` writes starts with "
                                   "\"servesim_calibration\": 1, its format version (this servesim reads 1)");
  if (const double v = r.number("servesim_calibration"); v != 1)
    r.fail("servesim_calibration", "format version " + compact(v) + " is not one this servesim reads (1); write it again with "
                                   "`servesim calibrate e2e --output`");
  CalibrationProfile p;
  p.file = file;
  // The profile's names are printed on every run it applies to: at most 128 characters of UTF-8
  // without control characters (a newline would start a line of its own in the output).
  auto label = [](const JsonReader& x, const char* key, std::string v) {
    if (v.size() > 128) x.fail(key, "must be at most 128 characters, got " + std::to_string(v.size()));
    for (const char ch : v)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
        x.fail(key, "must not contain control characters (byte " + std::to_string(static_cast<unsigned char>(ch)) + ")");
    if (const auto at = text::invalid_utf8_at(v); at != std::string::npos) x.fail(key, "is not valid UTF-8 (byte " + std::to_string(at) + ")");
    return v;
  };
  const JsonReader on = r.object("fitted_on");
  p.gpu = text::lower(label(on, "gpu", on.string("gpu")));
  p.engine = text::lower(label(on, "engine", on.string("engine")));
  p.engine_profile = label(on, "engine_profile", on.string_or("engine_profile", ""));
  p.model = text::lower(label(on, "model", on.string_or("model", "")));
  p.points = static_cast<int>(on.integer_or("points", 0));
  if (on.has("precisions")) {
    const auto& list = on.json().at("precisions");
    if (!list.is_array()) on.fail("precisions", "expected a list of weight precisions (bf16, fp8, nvfp4, ...)");
    for (const auto& x : list) {
      if (!x.is_string()) on.fail("precisions", "expected a list of weight precisions (bf16, fp8, nvfp4, ...)");
      const std::string v = x.get<std::string>();
      try {
        p.precisions.push_back(std::string(hw::to_string(hw::parse_precision(v, file))));
      } catch (const Error& e) {
        on.fail("precisions", e.reason());
      }
    }
    std::sort(p.precisions.begin(), p.precisions.end());
    p.precisions.erase(std::unique(p.precisions.begin(), p.precisions.end()), p.precisions.end());
  }
  if (on.has("releases")) {
    const auto& list = on.json().at("releases");
    if (!list.is_array()) on.fail("releases", "expected a list of engine releases (\"0.18.0\", ...)");
    for (const auto& x : list) {
      if (!x.is_string()) on.fail("releases", "expected a list of engine releases (\"0.18.0\", ...)");
      p.releases.push_back(label(on, "releases", x.get<std::string>()));
    }
    std::sort(p.releases.begin(), p.releases.end());
    p.releases.erase(std::unique(p.releases.begin(), p.releases.end()), p.releases.end());
  }
  if (p.points < 0) on.fail("points", "must be the count of measured points the profile was fitted on (0 or more)");
  for (const auto& x : r.array("parameters")) {
    CalibratedParameter c;
    c.name = x.string("name");
    if (!known(c.name))
      x.fail("name", "unknown parameter '" + c.name + "'; known: " + calibration_parameter_names());
    c.prior = x.number("prior");
    c.value = x.number("value");
    c.sd = x.number_or("sd", 0);
    if (!(c.sd >= 0)) x.fail("sd", "must be a standard deviation (0 or more)");
    const bool ms = c.name.size() > 3 && c.name.compare(c.name.size() - 3, 3, "_ms") == 0;
    c.unit = label(x, "unit", x.string_or("unit", ms ? "ms" : "x"));
    if (p.parameter(c.name))   // which of two values applies would be a guess
      x.fail("name", "'" + c.name + "' appears twice in parameters; keep one");
    c.scope = x.string_or("scope", "");
    if (!c.scope.empty() && c.scope != "gpu+engine")   // a profile applies on its GPU and engine build only
      x.fail("scope", "'" + c.scope + "' is not a scope a profile has; known: gpu+engine (it applies on the GPU and engine "
                      "build it was fitted on, nowhere else)");
    // value and prior within the range a fit can reach; sd (its uncertainty, printed with it) no wider than that range.
    auto in_range = [ms](double v) { return std::isfinite(v) && (ms ? (v >= 0 && v <= kMaxMs) : (v >= kMinFactor && v <= kMaxFactor)); };
    const char* range = ms ? "must be 0..10000 ms" : "must be a factor from 0.05 to 20";
    if (!in_range(c.value)) x.fail("value", range);
    if (!in_range(c.prior)) x.fail("prior", range);
    if (!(c.sd <= (ms ? kMaxMs : kMaxFactor)))
      x.fail("sd", ms ? "must be a standard deviation from 0 to 10000 ms (the range of the value)"
                      : "must be a standard deviation from 0 to 20 (the range of the factor)");
    p.parameters.push_back(std::move(c));
  }
  auto val = [&](const char* n, double d) {
    const auto* c = p.parameter(n);
    return c ? c->value : d;
  };
  p.kernels = {val("gemm_scale", 1), val("moe_scale", 1), val("attention_scale", 1), val("communication_scale", 1),
               val("prefill_scale", 1), val("decode_attention_scale", 1), val("decode_scale", 1), val("custom_allreduce_scale", 1),
               val("mixer_scale", 1)};
  p.step_cpu_factor = val("step_cpu_factor", 1);
  p.step_overhead_factor = val("step_overhead_factor", 1);
  p.step_gpu_ms = val("step_gpu_ms", 0);
  p.forward_floor_ms = val("forward_floor_ms", 0);
  p.request_overhead_ms = val("request_overhead_ms", 0);
  p.request_latency_ms = val("request_latency_ms", 0);
  p.first_token_floor_ms = val("first_token_floor_ms", 0);
  p.spread_factor = val("spread_factor", 1);
  p.handoff_scale = val("handoff_scale", 1);
  if (j.contains("cross_validation")) p.cross_validation = j["cross_validation"];
  if (j.contains("bands") && !j["bands"].is_null()) p.bands = validate::parse_bands(j["bands"], file + ": bands");
  return p;
}

nlohmann::json to_json(const CalibrationProfile& p) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& c : p.parameters)
    params.push_back({{"name", c.name}, {"prior", c.prior}, {"value", c.value}, {"sd", c.sd}, {"unit", c.unit}, {"scope", c.scope}});
  nlohmann::json j = {{"servesim_calibration", 1},
                      {"fitted_on",
                       {{"gpu", p.gpu}, {"engine", p.engine}, {"engine_profile", p.engine_profile}, {"model", p.model},
                        {"precisions", p.precisions}, {"releases", p.releases}, {"points", p.points}}},
                      {"parameters", params},
                      {"cross_validation", p.cross_validation}};
  j["bands"] = p.bands.cells.empty() ? nlohmann::json(nullptr) : validate::to_json(p.bands);
  return j;
}

CalibrationProfile load_calibration(const std::string& path) { return parse_calibration(read_json_file(path), path); }

std::string measured_releases(const CalibrationProfile& p) {
  if (p.releases.empty()) return "";
  return std::string(" (measured: release") + (p.releases.size() > 1 ? "s " : " ") + text::join(p.releases, ", ") + ")";
}

bool precision_bound(const std::string& n) {
  return n == "gemm_scale" || n == "moe_scale" || n == "prefill_scale" || n == "decode_scale";
}

AppliedCalibration applicable(const CalibrationProfile& p, const std::string& gpu, const std::string& engine_profile,
                              const std::string& model, const std::string& precision) {
  AppliedCalibration a;
  std::string engine = text::lower(engine_profile), build = engine;
  try {
    const EngineProfile& e = sim::engine_profile(engine_profile.empty() ? std::string(kNewestEngine) : engine_profile);
    engine = e.engine, build = e.name;
  } catch (const Error&) {   // an engine name without a profile: compared as it is
  }
  const bool same_gpu = text::lower(gpu) == p.gpu;
  const bool same_engine = engine == p.engine && (p.engine_profile.empty() || build == text::lower(p.engine_profile));
  // Every parameter belongs to the cluster it was measured on: its GPU (and that node's host CPUs)
  // and its engine build. Another model on them takes them all (they are per kernel family and per
  // request, not per model); another GPU or engine takes none.
  // A weight precision it was not fitted on keeps the host and per-request parts, the attention and
  // communication factors, and leaves out the factors of the kernels that precision picks.
  std::string run_precision;
  try {
    if (!precision.empty()) run_precision = std::string(hw::to_string(hw::parse_precision(precision)));
  } catch (const Error&) {   // a name without a precision: not checked
  }
  const bool other_precision = !run_precision.empty() && !p.precisions.empty() &&
                               std::find(p.precisions.begin(), p.precisions.end(), run_precision) == p.precisions.end();
  std::vector<std::string> by_precision;
  for (const auto& c : p.parameters) {
    const bool ok = same_gpu && same_engine && !(other_precision && precision_bound(c.name));
    (ok ? a.applied : same_gpu && same_engine ? by_precision : a.dropped).push_back(c.name);
    if (!ok) continue;
    a.any = true;
    if (c.name == "gemm_scale") a.kernels.gemm = c.value;
    else if (c.name == "moe_scale") a.kernels.moe = c.value;
    else if (c.name == "attention_scale") a.kernels.attention = c.value;
    else if (c.name == "communication_scale") a.kernels.communication = c.value;
    else if (c.name == "prefill_scale") a.kernels.prefill = c.value;
    else if (c.name == "decode_attention_scale") a.kernels.decode_attention = c.value;
    else if (c.name == "decode_scale") a.kernels.decode = c.value;
    else if (c.name == "custom_allreduce_scale") a.kernels.custom_allreduce = c.value;
    else if (c.name == "mixer_scale") a.kernels.mixer = c.value;
    else if (c.name == "step_cpu_factor") a.step_cpu_factor = c.value;
    else if (c.name == "step_overhead_factor") a.step_overhead_factor = c.value;
    else if (c.name == "step_gpu_ms") a.step_gpu_ms = c.value;
    else if (c.name == "forward_floor_ms") a.forward_floor_ms = c.value;
    else if (c.name == "request_overhead_ms") a.request_overhead_ms = c.value;
    else if (c.name == "request_latency_ms") a.request_latency_ms = c.value;
    else if (c.name == "first_token_floor_ms") a.first_token_floor_ms = c.value;
    else if (c.name == "spread_factor") a.spread_factor = c.value;
    else if (c.name == "handoff_scale") a.handoff_scale = c.value;
  }
  a.bands = same_gpu && same_engine && !other_precision && !p.bands.cells.empty();
  a.head = "calibration " + (p.file.empty() ? std::string("(inline)") : p.file) + " (fitted on " + p.model + ", " +
           (p.precisions.empty() ? std::string() : text::join(p.precisions, "/") + ", ") + p.gpu + ", " +
           (p.engine_profile.empty() ? p.engine : p.engine_profile) + measured_releases(p) + ", " + std::to_string(p.points) + " points)";
  std::string s;
  if (a.applied.empty()) s += "nothing applies";
  else {   // each with its value: a floor of 300 ms or a factor of 20 shows in the run that carries it
    const auto three = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.3g", v);
      return std::string(b);
    };
    // The parameters cross-validation or the gate held at their priors change nothing: named after the moved ones.
    std::vector<std::string> moved, at_prior;
    for (const auto& n : a.applied) {
      const CalibratedParameter* c = p.parameter(n);
      if (c->value == c->prior) at_prior.push_back(n);
      else moved.push_back(n + (n.size() > 3 && n.compare(n.size() - 3, 3, "_ms") == 0 ? " " + three(c->value) + " ms" : " x" + three(c->value)));
    }
    s += moved.empty() ? "applies its priors alone (" + text::join(at_prior) + ")"
                       : "applies " + text::join(moved) + (at_prior.empty() ? "" : "; at their priors " + text::join(at_prior));
  }
  if (!a.dropped.empty()) {
    s += "; left out";
    for (std::size_t i = 0; i < a.dropped.size(); ++i) s += (i ? ", " : " ") + a.dropped[i];
    s += !same_gpu ? " (fitted on another GPU; this run is on " + text::lower(gpu) + ")"
                   : " (fitted on " + (p.engine_profile.empty() ? p.engine : p.engine_profile) + "; this run is on " + build + ")";
  }
  if (!by_precision.empty()) {
    s += "; left out";
    for (std::size_t i = 0; i < by_precision.size(); ++i) s += (i ? ", " : " ") + by_precision[i];
    s += " (fitted on " + text::join(p.precisions, "/") + " weights; this run is " + run_precision + ")";
    a.dropped.insert(a.dropped.end(), by_precision.begin(), by_precision.end());
  }
  if (!model.empty() && text::lower(model) != p.model && a.any) s += "; fitted on another model, bands of this kind are the shipped ones";
  else if (other_precision && a.any) s += "; bands of this kind are the shipped ones";
  if (a.bands && !model.empty() && text::lower(model) != p.model) a.bands = false;
  a.what = s;
  a.summary = a.head + ": " + s;
  return a;
}

void apply_to_engine(const AppliedCalibration& a, EngineConfig& e) {
  e.kernel_scales = a.kernels;
  e.step_overhead_s *= a.step_cpu_factor;
  e.step_overhead_per_seq_s *= a.step_overhead_factor;
  e.step_gpu_s += a.step_gpu_ms * 1e-3;
  e.forward_floor_s = std::max(e.forward_floor_s, a.forward_floor_ms * 1e-3);
  e.closed_loop_osl_spread_tokens *= a.spread_factor;
}

nlohmann::json to_json(const AppliedCalibration& a, const CalibrationProfile& p) {
  return {{"file", p.file},
          {"fitted_on", {{"gpu", p.gpu}, {"engine", p.engine}, {"engine_profile", p.engine_profile}, {"model", p.model},
                         {"precisions", p.precisions}, {"releases", p.releases}, {"points", p.points}}},
          {"applied", a.applied},
          {"left_out", a.dropped},
          {"bands_from_profile", a.bands},
          {"summary", a.summary}};
}

}  // namespace servesim::sim
