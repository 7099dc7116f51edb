// `servesim validate` for the bindings: measured runs read, simulated and compared
// (sim/validate/), returned as the CLI's --format json prints it.
#include <algorithm>
#include <optional>
#include <cmath>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "sim/calibration.hpp"
#include "sim/validate/transfer.hpp"
#include "sim/validate/calibrate_e2e.hpp"
#include "sim/validate/validate.hpp"

namespace servesim::api {
namespace {

// A string or a list of strings (Python: "vllm" or ["vllm", "sglang"]).
std::vector<std::string> names(const nlohmann::json& j, const std::string& key) {
  if (!j.contains(key) || j[key].is_null()) return {};
  if (j[key].is_string()) return option_list(j[key].get<std::string>(), "validate(): " + key);
  if (!j[key].is_array()) throw Error("validate()", key, "expected a string or a list of strings");
  std::vector<std::string> out;
  for (const auto& x : j[key]) {
    if (!x.is_string()) throw Error("validate()", key, "expected a string or a list of strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

}  // namespace

nlohmann::json validate(const nlohmann::json& args) {
  namespace v = sim::validate;
  static const std::vector<std::string> known{"path", "backend", "mode", "gpu", "model", "engine_any", "scenario",
                                              "requests_per_client", "warmup_per_client", "statistic", "threads", "seed",
                                              "model_file", "harness", "resent_prompts", "osl_spread_pct", "seeds", "lock_fraction",
                                              "calibration", "leave_one_out"};
  if (!args.is_object()) throw Error("validate()", "", "expected keyword arguments");
  for (const auto& [k, _] : args.items())
    if (std::find(known.begin(), known.end(), k) == known.end())
      throw Error("validate()", k, "unknown argument; known: " + text::join(known));
  const JsonReader r(args, "validate()");
  v::Options o;
  o.backends = names(args, "backend");
  o.modes = names(args, "mode");
  o.gpus = names(args, "gpu");
  o.models = names(args, "model");
  o.engine_any = r.boolean_or("engine_any", false);
  o.lock_fraction = r.boolean_or("lock_fraction", false);
  if (args.contains("scenario") && !args["scenario"].is_null()) {
    if (!args["scenario"].is_object()) r.fail("scenario", "expected a dict in the scenario layout");
    o.base = args["scenario"];
  }
  // Range-checked as 64-bit values, before any narrowing (2**31 must not wrap to a negative).
  const std::int64_t rpc = r.integer_or("requests_per_client", o.requests_per_client);
  const std::int64_t wpc = r.integer_or("warmup_per_client", o.warmup_per_client);
  if (rpc < 1 || rpc > 100000) r.fail("requests_per_client", "must be in 1..100000, got " + std::to_string(rpc));
  if (wpc < 0 || wpc > 100000) r.fail("warmup_per_client", "must be in 0..100000, got " + std::to_string(wpc));
  o.requests_per_client = static_cast<int>(rpc);
  o.warmup_per_client = static_cast<int>(wpc);
  o.statistic = text::lower(r.string_or("statistic", "avg"));
  if (o.statistic != "avg" && o.statistic != "p50") r.fail("statistic", "unknown '" + o.statistic + "'; known: avg, p50");
  const std::int64_t threads = r.integer_or("threads", 0), seed = r.integer_or("seed", 1);
  if (threads < 0 || threads > 4096) r.fail("threads", "must be in 0..4096 (0: all cores), got " + std::to_string(threads));
  if (seed < 0) r.fail("seed", "must be >= 0, got " + std::to_string(seed));
  o.threads = static_cast<int>(threads);
  o.seed = static_cast<std::uint64_t>(seed);
  o.harness = text::lower(r.string_or("harness", o.harness));
  o.infer_resent_prompts = r.boolean_or("resent_prompts", true);
  if (o.harness != "aic" && o.harness != "serve") r.fail("harness", "unknown '" + o.harness + "'; known: aic, serve");
  o.osl_spread_pct = r.number_or("osl_spread_pct", 0.0);
  if (!std::isfinite(o.osl_spread_pct) || o.osl_spread_pct < 0 || o.osl_spread_pct > 50)
    r.fail("osl_spread_pct", "must be a percentage from 0 to 50");
  if (r.has("calibration")) {   // a profile file applied to every point where it transfers
    const std::string cal = r.string("calibration");
    (void)sim::load_calibration(cal);
    if (!o.base.is_object()) o.base = nlohmann::json::object();
    o.base["calibration"] = cal;
  }
  std::optional<v::GroupBy> loo;
  if (r.has("leave_one_out")) loo = v::parse_group_by(r.string("leave_one_out"), "validate(): leave_one_out");
  for (const auto& f : names(args, "model_file")) {
    models::load_model_file(f);   // read now: a bad file fails before the run
    o.model_files.push_back(f);
  }
  v::check_base_scenario(o, "scenario");
  const std::string path = r.string("path");
  v::CsvReadStats csv;
  auto points = v::read_measured(path, v::BenchSetup{}, o.statistic, &csv);   // bench results too, as calibrate e2e reads them
  const auto seeds = r.integer_or("seeds", 1);
  if (seeds < 1 || seeds > 100) r.fail("seeds", "must be 1..100 runs");
  if (loo && (seeds > 1 || o.lock_fraction)) r.fail("leave_one_out", "not combined with seeds or lock_fraction");
  std::optional<v::TransferReport> tr;
  if (loo) tr = v::leave_one_out(points, o, *loo);
  v::Report rep = tr ? tr->out_of_fit : v::run(seeds > 1 ? points : std::move(points), o);
  rep.csv = csv;
  nlohmann::json j = v::to_json(rep, o);
  j["source"] = path;
  if (tr) j["transfer"] = v::to_json(*tr);
  if (seeds > 1) j["across_seeds"] = v::across_seeds(points, o, int(seeds), j["by_gpu"]);
  return j;
}

}  // namespace servesim::api
