#include "hwmodels/catalog.hpp"

#include <cctype>
#include <cstdio>
#include <map>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::hw {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp8: return "fp8";
    case Precision::nvfp4: return "nvfp4";
    case Precision::int8: return "int8";
    case Precision::fp8_block: return "fp8_block";
    case Precision::mxfp4: return "mxfp4";
    case Precision::int4: return "int4";
  }
  return "?";
}

const std::vector<Precision>& all_precisions() {
  static const std::vector<Precision> all{Precision::bf16,      Precision::fp8,   Precision::nvfp4, Precision::int8,
                                          Precision::fp8_block, Precision::mxfp4, Precision::int4};
  return all;
}

Precision parse_precision(std::string_view s, const std::string& where) {
  for (Precision p : all_precisions())
    if (text::iequals(s, to_string(p))) return p;
  throw Error(where, "", "unknown precision '" + std::string(s) + "' (known: bf16, fp8, fp8_block, nvfp4, mxfp4, int4, int8)");
}

Precision math_precision(Precision p) {
  switch (p) {
    case Precision::fp8_block: return Precision::fp8;
    case Precision::mxfp4:
    case Precision::int4: return Precision::bf16;
    default: return p;
  }
}

Precision storage_family(Precision p) {
  if (p == Precision::fp8_block) return Precision::fp8;
  if (p == Precision::mxfp4) return Precision::nvfp4;
  return p;
}

double EfficiencyPriors::gemm(Precision p) const {
  p = math_precision(p);
  switch (p) {
    case Precision::bf16: return gemm_bf16;
    case Precision::fp8: return gemm_fp8;
    case Precision::nvfp4: return gemm_nvfp4;
    case Precision::int8: return gemm_fp8;  // no separate int8 figure: same tensor-core path width as fp8
    default: return gemm_bf16;
  }
}

double GpuSpec::dense_flops(Precision p) const {
  if (p == Precision::mxfp4 || p == Precision::int4) return 0;  // weight-only: no 4-bit math
  switch (math_precision(p)) {
    case Precision::bf16: return bf16_flops;
    case Precision::fp8: return fp8_flops;
    case Precision::nvfp4: return nvfp4_flops;
    case Precision::int8: return int8_ops;
    default: return 0;
  }
}

namespace {

// Every number must be finite and >= 0; strictly positive where `positive`.
double nonneg(const JsonReader& r, std::string_view key, bool positive = false) {
  double v = r.number(key);
  if (v < 0 || (positive && v <= 0)) r.fail(key, positive ? "must be > 0" : "must be >= 0");
  return v;
}

// A datasheet figure within physical reason: values far outside (1e-300 B/s, 1e300 bytes) would
// pass "> 0" and turn every time into NaN or inf, or overflow the block counts. 0 is allowed
// where `zero_ok` (a format the GPU lacks).
double datasheet(const JsonReader& r, std::string_view key, double lo, double hi, const char* unit, bool zero_ok = false) {
  const double v = r.number(key);
  if (zero_ok && v == 0) return v;
  if (!(v >= lo && v <= hi)) {
    char b[160];
    std::snprintf(b, sizeof b, "must be between %g and %g %s%s, got %g", lo, hi, unit, zero_ok ? " (or 0)" : "", v);
    r.fail(key, b);
  }
  return v;
}

std::map<std::string, std::string> read_sources(const JsonReader& r) {
  std::map<std::string, std::string> out;
  if (!r.has("sources")) return out;
  JsonReader s = r.object("sources");
  for (const auto& [k, v] : s.json().items()) {
    if (!v.is_string()) s.fail(k, "expected a citation string");
    out[k] = v.get<std::string>();
  }
  return out;
}

// A GPU or instance name: it becomes a file name (nccl-<instance>.sh, recommend's DIR/<instance>/), a
// Kubernetes node selector and a word of emitted shell scripts, so only letters, digits and ". _ + -"
// (starting with a letter or digit, at most 64 characters): never "/", "..", a space, a quote or a
// control character.
void check_name(const JsonReader& r) {
  const std::string n = r.string("name");
  bool ok = !n.empty() && n.size() <= 64 && std::isalnum(static_cast<unsigned char>(n[0]));
  for (char ch : n) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '+' || ch == '-');
  if (!ok)
    r.fail("name", "must be 1-64 characters of letters, digits and . _ + - starting with a letter or digit (it names files "
                   "and goes into emitted scripts and manifests), got " + nlohmann::json(n).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
}

GpuSpec read_gpu(const JsonReader& r) {
  GpuSpec g;
  check_name(r);
  g.name = r.string("name");
  g.arch = r.string("arch");
  g.hbm_nominal_bytes = datasheet(r, "hbm_nominal_bytes", 1e8, 1e14, "bytes");
  g.hbm_usable_bytes = datasheet(r, "hbm_usable_bytes", 1e8, 1e14, "bytes");
  g.hbm_bw_bytes_per_s = datasheet(r, "hbm_bw_bytes_per_s", 1e9, 1e15, "bytes/s");
  g.bf16_flops = datasheet(r, "bf16_flops", 1e11, 1e18, "FLOP/s");
  g.fp8_flops = datasheet(r, "fp8_flops", 1e11, 1e18, "FLOP/s", true);
  g.nvfp4_flops = datasheet(r, "nvfp4_flops", 1e11, 1e18, "FLOP/s", true);
  g.int8_ops = datasheet(r, "int8_ops", 1e11, 1e18, "OP/s", true);
  g.nvlink_bw_bytes_per_s = datasheet(r, "nvlink_bw_bytes_per_s", 1e8, 1e15, "bytes/s");
  g.nvlink_domain = static_cast<int>(r.integer("nvlink_domain"));
  if (g.nvlink_domain < 1 || g.nvlink_domain > (1 << 16)) r.fail("nvlink_domain", "must be between 1 and 65536");
  g.sms = static_cast<int>(r.integer("sms"));
  if (g.sms < 0 || g.sms > (1 << 20)) r.fail("sms", "must be between 0 and 1048576");
  g.l2_bytes = datasheet(r, "l2_bytes", 0, 1e11, "bytes");
  g.tdp_watts = datasheet(r, "tdp_watts", 0, 1e6, "W");
  g.sources = read_sources(r);
  if (r.has("efficiency_priors")) {
    JsonReader p = r.object("efficiency_priors");
    auto frac = [&](std::string_view k, bool needed) {
      double v = nonneg(p, k);
      if (v > 1 || (needed && v <= 0)) p.fail(k, "must be a fraction in (0, 1]");
      return v;
    };
    g.priors.gemm_bf16 = frac("gemm_bf16", true);
    g.priors.gemm_fp8 = frac("gemm_fp8", g.fp8_flops > 0);
    g.priors.gemm_nvfp4 = frac("gemm_nvfp4", g.nvfp4_flops > 0);
    g.priors.memory = frac("memory", true);
    g.priors.nccl_busbw = frac("nccl_busbw", true);
    g.priors.nccl_latency_s = datasheet(p, "nccl_latency_s", 1e-9, 1, "s");
  } else {
    // A user GPU without priors: the kernel model then assumes H200's achieved fractions
    // (filled in by the caller, which knows the H200 entry), and says so in the sources.
    g.sources["efficiency_priors"] = "not given in " + r.file() + ": H200's priors assumed";
  }
  return g;
}

InstanceSpec read_instance(const JsonReader& r) {
  InstanceSpec i;
  check_name(r);
  i.name = r.string("name");
  i.gpu = r.string("gpu");
  i.gpus = static_cast<int>(r.integer("gpus"));
  if (i.gpus < 1 || i.gpus > 1024) r.fail("gpus", "must be between 1 and 1024");
  i.efa_devices = static_cast<int>(r.integer("efa_devices"));
  if (i.efa_devices < 0 || i.efa_devices > 4096) r.fail("efa_devices", "must be between 0 and 4096");
  i.efa_total_bytes_per_s = datasheet(r, "efa_total_bytes_per_s", 1e6, 1e15, "bytes/s", true);
  i.efa_per_gpu_bytes_per_s = r.has("efa_per_gpu_bytes_per_s") ? datasheet(r, "efa_per_gpu_bytes_per_s", 1e6, 1e15, "bytes/s", true)
                                                                : i.efa_total_bytes_per_s / i.gpus;
  i.efa_latency_s = datasheet(r, "efa_latency_s", 0, 1, "s");
  i.host_memory_bytes = datasheet(r, "host_memory_bytes", 0, 1e15, "bytes");
  if (r.has("usd_per_hour")) i.usd_per_hour = datasheet(r, "usd_per_hour", 0, 1e6, "$/hour");
  i.nvlink_domain_gpus = static_cast<int>(r.integer_or("nvlink_domain_gpus", i.gpus));
  if (i.nvlink_domain_gpus < 1 || i.nvlink_domain_gpus > (1 << 16)) r.fail("nvlink_domain_gpus", "must be between 1 and 65536");
  i.sources = read_sources(r);
  return i;
}

template <class T>
void upsert(std::vector<T>& v, T item) {
  for (auto& x : v)
    if (text::iequals(x.name, item.name)) { x = std::move(item); return; }
  v.push_back(std::move(item));
}

template <class T>
std::vector<std::string> names(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const auto& x : v) out.push_back(x.name);
  return out;
}

}  // namespace

void Catalog::load_json(std::string_view text, const std::string& file) {
  nlohmann::json j = parse_json(text, file);
  JsonReader root(j, file);
  if (!root.has("gpus") && !root.has("instances"))
    throw Error(file, "(top level)", "expected a \"gpus\" and/or an \"instances\" array");
  // Parse everything before changing the catalogue, so a bad file leaves it untouched.
  std::vector<GpuSpec> gpus;
  std::vector<InstanceSpec> instances;
  if (root.has("gpus"))
    for (const auto& g : root.array("gpus")) gpus.push_back(read_gpu(g));
  if (root.has("instances"))
    for (const auto& i : root.array("instances")) instances.push_back(read_instance(i));
  const GpuSpec* h200 = nullptr;
  for (const auto& g : gpus_) if (text::iequals(g.name, "H200")) h200 = &g;
  for (auto& g : gpus) {
    if (g.priors.gemm_bf16 <= 0 && h200) g.priors = h200->priors;
    upsert(gpus_, std::move(g));
  }
  for (size_t k = 0; k < instances.size(); ++k) {
    bool known = false;
    for (const auto& g : gpus_) known = known || text::iequals(g.name, instances[k].gpu);
    if (!known)
      throw Error(file, "instances[" + std::to_string(k) + "].gpu",
                  "unknown GPU '" + instances[k].gpu + "' (known: " + text::join(gpu_names()) + ")");
    upsert(instances_, std::move(instances[k]));
  }
}

void Catalog::add_file(const std::string& path) {
  nlohmann::json j = read_json_file(path);  // syntax errors name the file
  load_json(j.dump(), path);
}

void Catalog::set_price(std::string_view instance, double usd_per_hour, const std::string& source) {
  for (auto& i : instances_)
    if (text::iequals(i.name, instance)) {
      i.usd_per_hour = usd_per_hour;
      i.sources["usd_per_hour"] = source;
      return;
    }
  throw Error("--price", std::string(instance), "unknown instance (known: " + text::join(instance_names()) + ")");
}

Catalog& Catalog::global() {
  static Catalog* c = [] {
    auto* cat = new Catalog;
    cat->load_json(data::get("hwmodels/data/gpus.json"), "hwmodels/data/gpus.json");
    cat->load_json(data::get("hwmodels/data/instances.json"), "hwmodels/data/instances.json");
    return cat;
  }();
  return *c;
}

const GpuSpec& Catalog::gpu(std::string_view name) const {
  for (const auto& g : gpus_)
    if (text::iequals(g.name, name)) return g;
  throw Error("--gpu", "", "unknown GPU '" + std::string(name) + "' (known: " + text::join(gpu_names()) + ")");
}

const InstanceSpec& Catalog::instance(std::string_view name) const {
  for (const auto& i : instances_)
    if (text::iequals(i.name, name)) return i;
  throw Error("--instance", "", "unknown instance '" + std::string(name) + "' (known: " +
                                    text::join(instance_names()) + ")");
}

std::vector<std::string> Catalog::gpu_names() const { return names(gpus_); }
std::vector<std::string> Catalog::instance_names() const { return names(instances_); }

}  // namespace servesim::hw
