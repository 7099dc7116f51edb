// calibrate_e2e(): the Python face of `servesim calibrate e2e` (sim/validate/calibrate_e2e.hpp).
#include <filesystem>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "sim/validate/calibrate_e2e.hpp"

namespace servesim::api {

nlohmann::json calibrate_e2e(const nlohmann::json& args) {
  namespace v = sim::validate;
  static const std::vector<std::string> known{"inputs", "output", "model", "model_file", "gpu", "tp", "precision", "engine",
                                              "parameters", "folds", "train_fraction", "shrink", "threads", "seed", "harness"};
  if (!args.is_object()) throw Error("calibrate_e2e()", "", "expected keyword arguments");
  for (const auto& [k, _] : args.items())
    if (std::find(known.begin(), known.end(), k) == known.end())
      throw Error("calibrate_e2e()", k, "unknown argument; known: " + text::join(known));
  const JsonReader r(args, "calibrate_e2e()");
  std::vector<std::string> inputs;
  if (!args.contains("inputs") || !args["inputs"].is_array() || args["inputs"].empty())
    r.fail("inputs", "expected a non-empty list of files or folders");
  for (const auto& x : args["inputs"]) {
    if (!x.is_string()) r.fail("inputs", "expected paths (strings)");
    inputs.push_back(x.get<std::string>());
  }
  std::vector<std::string> model_files;
  if (args.contains("model_file")) {
    if (!args["model_file"].is_array()) r.fail("model_file", "expected a list of paths");
    for (const auto& f : args["model_file"]) {
      if (!f.is_string()) r.fail("model_file", "expected a list of paths");
      models::load_model_file(f.get<std::string>());   // read now: a bad file fails before the run
      model_files.push_back(f.get<std::string>());
    }
  }
  v::BenchSetup setup;
  setup.model = r.string_or("model", "");
  setup.gpu = r.string_or("gpu", "");
  setup.precision = r.string_or("precision", "");
  setup.engine = r.string_or("engine", "");
  const auto tp = r.integer_or("tp", 0);
  if (tp < 0 || tp > 1024) r.fail("tp", "must be 1..1024");
  setup.tp = static_cast<int>(tp);
  v::Options o;
  o.model_files = model_files;
  o.threads = static_cast<int>(r.integer_or("threads", 0));
  const auto seed = r.integer_or("seed", 1);
  if (seed < 0) r.fail("seed", "must be >= 0");
  o.seed = static_cast<std::uint64_t>(seed);
  o.harness = text::lower(r.string_or("harness", "aic"));
  if (o.harness != "aic" && o.harness != "serve") r.fail("harness", "unknown '" + o.harness + "'; known: aic, serve");
  v::E2eOptions e;
  const auto folds = r.integer_or("folds", 5);
  if (folds < 1 || folds > 50) r.fail("folds", "must be 1..50");
  e.folds = static_cast<int>(folds);
  e.train_fraction = r.number_or("train_fraction", 0);
  if (!(e.train_fraction >= 0 && e.train_fraction < 1)) r.fail("train_fraction", "must be in [0, 1)");
  e.shrink = r.boolean_or("shrink", true);
  e.only = option_list(r.string_or("parameters", ""), "calibrate_e2e(): parameters");
  // An empty list would read as "not given", i.e. silently as the default set.
  if (r.has("parameters") && e.only.empty())
    r.fail("parameters", "empty: name the parameters to fit (" + sim::calibration_parameter_names() + "), or leave it out for the default set");
  const std::string output = r.string_or("output", "");
  if (!output.empty()) check_writable_target(output, "calibrate_e2e(): output");
  std::vector<v::MeasuredPoint> pts;
  for (const auto& in : inputs) {
    auto p = v::read_measured(in, setup);
    pts.insert(pts.end(), std::make_move_iterator(p.begin()), std::make_move_iterator(p.end()));
  }
  v::E2eResult res = v::calibrate_e2e(pts, o, e);
  nlohmann::json j = res.report;
  if (!output.empty()) {
    res.profile.file = std::filesystem::path(output).filename().string();
    write_file_atomic(output, sim::to_json(res.profile).dump(2) + "\n");
    j["output"] = output;
  }
  j["profile"] = sim::to_json(res.profile);
  j["text"] = res.text;
  return j;
}

}  // namespace servesim::api
