// _servesim: the pybind11 face of servesim. Every function takes and returns plain Python data
// (dicts, lists, floats); the data comes from sim/api, the same code the CLI's --format json
// prints. The pure-Python package python/servesim/ wraps it (signatures, DataFrames, Dask,
// plots). Long runs (simulate, sweep, plan) release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "sim/api/api.hpp"
#include "sim/studies/planner.hpp"

namespace py = pybind11;
using nlohmann::json;

namespace {

// ---- Python <-> JSON --------------------------------------------------------------------------

py::object to_py(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return py::none();
    case json::value_t::boolean: return py::bool_(j.get<bool>());
    case json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case json::value_t::number_float: return py::float_(j.get<double>());
    case json::value_t::string: return py::str(j.get_ref<const std::string&>());
    case json::value_t::array: {
      py::list l(j.size());
      std::size_t i = 0;
      for (const auto& x : j) l[i++] = to_py(x);
      return std::move(l);
    }
    case json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_py(v);
      return std::move(d);
    }
    default: return py::none();
  }
}

json to_json(py::handle h, const std::string& where, std::size_t depth = 0, const std::string& path = "") {
  if (h.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(h)) return h.cast<bool>();
  if (py::isinstance<py::int_>(h)) {
    try {
      return h.cast<std::int64_t>();
    } catch (const py::cast_error&) {
      throw servesim::Error(where, path, "whole number out of range: " + py::str(h).cast<std::string>());
    }
  }
  if (py::isinstance<py::float_>(h)) {
    const double d = h.cast<double>();
    // NaN and inf are not JSON: they would turn into null, i.e. silently into the default.
    if (!std::isfinite(d)) throw servesim::Error(where, path, "expected a finite number, got " + py::str(h).cast<std::string>());
    return d;
  }
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  const bool container = py::isinstance<py::dict>(h) || py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h);
  if (container && depth >= servesim::kMaxJsonDepth)
    throw servesim::Error(where, "", "nested deeper than " + std::to_string(servesim::kMaxJsonDepth) + " levels");
  if (py::isinstance<py::dict>(h)) {
    json o = json::object();
    for (auto [k, v] : h.cast<py::dict>()) {
      if (!py::isinstance<py::str>(k)) throw servesim::Error(where, py::str(k).cast<std::string>(), "keys must be strings");
      const std::string key = k.cast<std::string>();
      o[key] = to_json(v, where, depth + 1, path.empty() ? key : path + "." + key);
    }
    return o;
  }
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    json a = json::array();
    for (auto v : h) a.push_back(to_json(v, where, depth + 1, path + "[" + std::to_string(a.size()) + "]"));
    return a;
  }
  // numpy scalars and other number-likes
  if (py::hasattr(h, "__index__")) return to_json(py::reinterpret_borrow<py::object>(h).attr("__index__")(), where, depth, path);
  if (py::hasattr(h, "__float__")) return to_json(py::float_(py::reinterpret_borrow<py::object>(h)), where, depth, path);
  throw servesim::Error(where, "", "cannot pass a " + py::str(py::type::of(h).attr("__name__")).cast<std::string>() +
                                       " (plain Python data only: dict, list, str, int, float, bool, None)");
}

// A scenario given as a dict or as JSON text.
json scenario_json(py::handle h) {
  if (py::isinstance<py::str>(h)) return servesim::parse_json(h.cast<std::string>(), "scenario");
  return to_json(h, "scenario");
}

// ---- keyword arguments into the api's argument structs ------------------------------------------

// Reads each key of `j` into a field; None keeps the default. finish() rejects what was not read,
// listing the arguments the function knows.
class Args {
 public:
  Args(std::string fn, const json& j) : fn_(std::move(fn)), j_(j) {
    if (!j_.is_object()) throw servesim::Error(fn_, "", "arguments must be a dict");
  }
  template <class T>
  Args& opt(const char* key, T& out) {
    known_.push_back(key);
    if (j_.contains(key) && !j_[key].is_null()) read(key, j_[key], out);
    return *this;
  }
  template <class T>
  Args& req(const char* key, T& out) {
    if (!j_.contains(key) || j_[key].is_null()) throw servesim::Error(fn_, key, "required");
    return opt(key, out);
  }
  void finish() const {
    for (const auto& [k, v] : j_.items())
      if (std::find(known_.begin(), known_.end(), k) == known_.end())
        throw servesim::Error(fn_, k, "unknown argument; known: " + servesim::text::join(known_, ", "));
  }

 private:
  void read(const char* k, const json& v, std::string& out) const {
    if (!v.is_string()) throw servesim::Error(fn_, k, "expected a string, got " + servesim::brief(v));
    out = v.get<std::string>();
  }
  void read(const char* k, const json& v, double& out) const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw servesim::Error(fn_, k, "expected a number, got " + servesim::brief(v));
    out = v.get<double>();
  }
  void read(const char* k, const json& v, std::int64_t& out) const {
    double d = 0;
    read(k, v, d);
    if (d != std::floor(d) || std::fabs(d) > 9e15) throw servesim::Error(fn_, k, "expected a whole number, got " + servesim::brief(v));
    out = static_cast<std::int64_t>(d);
  }
  void read(const char* k, const json& v, int& out) const {
    std::int64_t i = 0;
    read(k, v, i);
    if (i < -(1LL << 30) || i > (1LL << 30)) throw servesim::Error(fn_, k, "out of range: " + servesim::brief(v));
    out = static_cast<int>(i);
  }
  template <class T>
  void read(const char* k, const json& v, std::optional<T>& out) const {
    T x{};
    read(k, v, x);
    out = x;
  }
  // A list of strings or numbers for CSV flags (precisions, gpus, concurrency).
  // One whole number stands for a list of one (search(tp=1) as search(tp=[1])).
  // `fractions`: a list of rates (numbers, as their shortest round-trip digits), where other lists
  // take whole numbers only.
  void read_csv(const char* k, const json& v, std::string& out, bool fractions = false) const {
    if (v.is_number_integer() || (fractions && v.is_number_float())) {   // its exact digits (a huge one is refused by the flag's range, never wrapped)
      out = v.dump();
      return;
    }
    if (v.is_boolean() && std::string_view(k) == "prefix_caching") {   // prefix_caching=True: on
      out = v.get<bool>() ? "on" : "off";
      return;
    }
    if (v.is_number_float() || v.is_boolean())
      throw servesim::Error(fn_, k, "expected a whole number, a list or a comma-separated string, got " + servesim::brief(v));
    if (!v.is_array()) return read(k, v, out);
    std::vector<std::string> parts;
    for (const auto& x : v) {
      if (x.is_string()) parts.push_back(x.get<std::string>());
      else if (x.is_number_integer() || (fractions && x.is_number_float())) parts.push_back(x.dump());
      else throw servesim::Error(fn_, k, std::string(fractions ? "expected numbers" : "expected strings or whole numbers") + ", got " +
                                             servesim::brief(x));
    }
    out = servesim::text::join(parts, ",");
  }

 public:
  Args& flag(const char* key, bool& out) {
    known_.push_back(key);
    if (j_.contains(key) && !j_[key].is_null()) {
      if (!j_[key].is_boolean()) throw servesim::Error(fn_, key, "expected True or False, got " + j_[key].dump());
      out = j_[key].get<bool>();
    }
    return *this;
  }
  Args& csv(const char* key, std::string& out) {
    known_.push_back(key);
    if (j_.contains(key) && !j_[key].is_null()) read_csv(key, j_[key], out);
    return *this;
  }
  Args& rates(const char* key, std::string& out) {   // a comma-separated list of fractions (mtp_acceptance)
    known_.push_back(key);
    if (j_.contains(key) && !j_[key].is_null()) read_csv(key, j_[key], out, true);
    return *this;
  }

 private:
  std::string fn_;
  const json& j_;
  std::vector<std::string> known_;
};

servesim::api::MemoryArgs memory_args(const json& j) {
  servesim::api::MemoryArgs a;
  Args r("memory()", j);
  r.opt("model", a.model).opt("model_file", a.model_file).opt("gpu", a.gpu).opt("precision", a.precision)
      .opt("kv_cache_dtype", a.kv_cache_dtype).opt("tp", a.tp).opt("pp", a.pp).opt("ep", a.ep).opt("dp", a.dp).opt("context", a.context)
      .opt("gpu_memory_utilization", a.gpu_memory_utilization).opt("max_num_seqs", a.max_num_seqs)
      .opt("max_num_batched_tokens", a.max_num_batched_tokens).opt("num_speculative_tokens", a.num_speculative_tokens)
      .opt("block_size", a.block_size).opt("engine", a.engine).opt("kv_offload", a.kv_offload).opt("images", a.images).finish();
  return a;
}

servesim::api::MinGpusArgs min_gpus_args(const json& j) {
  servesim::api::MinGpusArgs a;
  Args r("min_gpus()", j);
  r.opt("model", a.model).opt("model_file", a.model_file).csv("precisions", a.precisions).csv("gpus", a.gpus).opt("policy", a.policy)
      .opt("concurrency", a.concurrency).opt("context", a.context).finish();
  return a;
}

servesim::api::StepArgs step_args(const json& j) {
  servesim::api::StepArgs a;
  Args r("step()", j);
  r.opt("model", a.model).opt("model_file", a.model_file).opt("gpu", a.gpu).opt("precision", a.precision)
      .opt("kv_cache_dtype", a.kv_cache_dtype)
      .opt("tp", a.tp).opt("pp", a.pp).opt("ep", a.ep).opt("dp", a.dp).opt("batch", a.batch).opt("context", a.context)
      .opt("chunk", a.chunk).opt("vision_tiles", a.vision_tiles).opt("engine", a.engine)
      .flag("moe_all_to_all", a.moe_all_to_all).finish();
  return a;
}

servesim::api::PlanArgs plan_args(const json& j) {
  servesim::api::PlanArgs a;
  Args r("plan()", j);
  r.opt("model", a.model).opt("model_file", a.model_file).opt("instance", a.instance).opt("nodes", a.nodes).opt("precision", a.precision)
      .opt("kv_cache_dtype", a.kv_cache_dtype).opt("topology", a.topology).opt("tp", a.tp).opt("pp", a.pp).opt("ep", a.ep)
      .opt("replicas", a.replicas).opt("prefill_workers", a.prefill_workers).opt("decode_workers", a.decode_workers)
      .opt("encode_workers", a.encode_workers).opt("prefill_tp", a.prefill_tp).opt("decode_tp", a.decode_tp)
      .opt("dp", a.dp).opt("prefill_dp", a.prefill_dp).opt("decode_dp", a.decode_dp)
      .opt("prefill_instance", a.prefill_instance).opt("decode_instance", a.decode_instance)
      .opt("prefill_nodes", a.prefill_nodes).opt("decode_nodes", a.decode_nodes)
      .opt("isl", a.isl).opt("osl", a.osl).csv("concurrency", a.concurrency).opt("requests", a.requests).opt("seed", a.seed)
      .opt("router", a.router).opt("max_num_seqs", a.max_num_seqs).opt("max_num_batched_tokens", a.max_num_batched_tokens)
      .opt("gpu_memory_utilization", a.gpu_memory_utilization).opt("num_speculative_tokens", a.num_speculative_tokens)
      .rates("mtp_acceptance", a.mtp_acceptance).opt("ttft_ms", a.ttft_ms).opt("itl_ms", a.itl_ms).opt("gap_ms", a.gap_ms)
      .opt("statistic", a.statistic).opt("target_tps", a.target_tps).opt("target_rps", a.target_rps).opt("headroom", a.headroom)
      .opt("arrival", a.arrival).opt("burstiness", a.burstiness).opt("threads", a.threads)
      .opt("calibration", a.calibration).opt("engine", a.engine).csv("images", a.images).opt("image_fraction", a.image_fraction).finish();
  return a;
}

servesim::api::SearchArgs search_args(const json& j, const char* fn) {
  servesim::api::SearchArgs a;
  Args r(fn, j);
  r.opt("model", a.model).opt("model_file", a.model_file).csv("gpus", a.gpus).csv("precision", a.precisions).opt("topology", a.topology).csv("tp", a.tp)
      .csv("pp", a.pp).csv("dp", a.dp).csv("decode_dp", a.decode_dp).csv("ep", a.ep).csv("pd_ratios", a.pd_ratios).csv("max_num_seqs", a.max_num_seqs)
      .csv("max_num_batched_tokens", a.max_num_batched_tokens).csv("concurrency", a.concurrency)
      .csv("kv_cache_dtype", a.kv_cache_dtypes).opt("statistic", a.statistic).opt("router", a.router).csv("images", a.images)
      .csv("prefix_caching", a.prefix_caching).opt("shared_prefix_tokens", a.shared_prefix_tokens)
      .csv("num_speculative_tokens", a.num_speculative_tokens).rates("mtp_acceptance", a.mtp_acceptance)
      .opt("isl", a.isl).opt("osl", a.osl).opt("seed", a.seed).opt("requests", a.requests).opt("ttft_ms", a.ttft_ms)
      .opt("itl_ms", a.itl_ms).opt("gap_ms", a.gap_ms).opt("total_gpus", a.total_gpus).opt("target_tps", a.target_tps).opt("target_rps", a.target_rps)
      .opt("headroom", a.headroom).opt("gpu_memory_utilization", a.gpu_memory_utilization).opt("threads", a.threads).csv("engine", a.engines)
      .flag("prune", a.prune).flag("expert_parallel", a.expert_parallel).flag("mixed_gpus", a.mixed_gpus)
      .opt("calibration", a.calibration).opt("image_fraction", a.image_fraction).opt("arrival", a.arrival)
      .opt("burstiness", a.burstiness).finish();
  return a;
}

}  // namespace

PYBIND11_MODULE(_servesim, m) {
  m.doc() = "servesim: simulate LLM serving clusters and plan GPU capacity";
  m.attr("__version__") = "0.1.0";
  static py::exception<servesim::Error> error_type(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const servesim::Error& e) {
      // A CLI flag ("--max-num-seqs") is named as the Python argument ("max_num_seqs").
      if (e.where().rfind("--", 0) == 0) {
        std::string arg = e.where().substr(2);
        std::replace(arg.begin(), arg.end(), '-', '_');
        error_type((arg + (e.field().empty() ? "" : ": " + e.field()) + ": " + e.reason()).c_str());
      } else {
        error_type(e.what());
      }
    } catch (const json::exception& e) {   // a malformed value deep inside a document
      error_type(e.what());
    }
  });
  namespace api = servesim::api;

  m.def("gpus", [] { return to_py(api::gpus()); }, "The GPU catalogue: a list of dicts");
  m.def("instances", [] { return to_py(api::instances()); }, "The instance catalogue: a list of dicts");
  m.def("models", [] { return to_py(api::models()); }, "The model catalogue: a list of dicts");
  m.def("model", [](const std::string& name) { return to_py(api::model(name)); }, py::arg("name"),
        "One model's architecture and parameter counts");
  m.def("model_file", [](const std::string& path) { return to_py(api::model_file(path)); }, py::arg("path"),
        "The architecture and parameter counts of a servesim model JSON or HF config.json (not added to the catalogue)");
  m.def("memory", [](py::dict kw) { return to_py(api::memory(memory_args(to_json(kw, "memory()")))); }, py::arg("args"),
        "Per-GPU memory plan of one replica (dict of `servesim memory` flags)");
  m.def("min_gpus", [](py::dict kw) { return to_py(api::min_gpus(min_gpus_args(to_json(kw, "min_gpus()")))); },
        py::arg("args"), "Minimum-GPU table (dict of `servesim min-gpus` flags)");
  m.def("op_time", [](const std::string& kind, py::dict kw) { return to_py(api::op_time(kind, to_json(kw, "op " + kind))); },
        py::arg("op"), py::arg("args"), "Predicted time of one kernel or collective (`servesim op`)");
  m.attr("op_kinds") = api::op_kinds();
  m.def("step", [](py::dict kw) { return to_py(api::step(step_args(to_json(kw, "step()")))); }, py::arg("args"),
        "One decode and one prefill step explained (`servesim step`)");
  m.def("parse_json", [](const std::string& text) { return to_py(servesim::parse_json(text, "scenario")); },
        py::arg("text"), "JSON text parsed as servesim parses files (nesting depth limited, duplicate keys refused)");
  m.def("default_scenario", [] { return to_py(api::default_scenario()); }, "The embedded default scenario");
  m.def("simulate", [](py::object scenario) {
        const json s = scenario_json(scenario);
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::simulate(s);
        }
        return to_py(r);
      }, py::arg("scenario"), "Simulate one scenario: aiperf-layout dict plus 'summary'");
  m.def("sweep", [](py::object scenario, const std::string& axis, const std::vector<double>& values, int threads) {
        const json s = scenario_json(scenario);
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::sweep(s, axis, values, threads);
        }
        return to_py(r);
      }, py::arg("scenario"), py::arg("axis"), py::arg("values"), py::arg("threads") = 0,
      "The scenario over concurrency or request_rate values: {column: [...]}");
  m.def("plan", [](py::dict kw) {
        const auto a = plan_args(to_json(kw, "plan()"));
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::plan(a);
        }
        return to_py(r);
      }, py::arg("args"), "SLO capacity plan (`servesim plan`)");
  m.def("validate", [](py::dict kw) {
        const json a = to_json(kw, "validate()");
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::validate(a);
        }
        return to_py(r);
      }, py::arg("args"), "Predictions against measured runs (`servesim validate`)");
  m.def("calibrate_e2e", [](py::dict kw) {
        nlohmann::json args = to_json(kw, "calibrate_e2e()");
        nlohmann::json out;
        {
          py::gil_scoped_release release;
          out = api::calibrate_e2e(args);
        }
        return to_py(out);
      }, py::arg("args"), "calibrate e2e: fit a calibration profile on measured runs (see servesim.calibrate_e2e)");
  m.def("plan_points", [](py::dict kw) { return api::plan_points(plan_args(to_json(kw, "plan()"))); }, py::arg("args"),
        "Number of (topology, concurrency) points of a plan");
  m.def("plan_point", [](py::dict kw, int index) {
        const auto a = plan_args(to_json(kw, "plan()"));
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::plan_point(a, index);
        }
        return to_py(r);
      }, py::arg("args"), py::arg("index"), "One point of a plan's sweep (a row for plan_finish)");
  m.def("plan_finish", [](py::dict kw, py::list rows) {
        return to_py(api::plan_finish(plan_args(to_json(kw, "plan()")), to_json(rows, "plan_finish()")));
      }, py::arg("args"), py::arg("rows"), "The plan from all points' rows, in index order");

  m.def("search", [](py::dict kw) {
        const auto a = search_args(to_json(kw, "search()"), "search()");
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::search(a);
        }
        return to_py(r);
      }, py::arg("args"), "Configuration search (`servesim search`)");
  m.def("recommend", [](py::dict kw) {
        const auto a = search_args(to_json(kw, "recommend()"), "recommend()");
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::recommend(a);
        }
        return to_py(r);
      }, py::arg("args"), "Pre-purchase table (`servesim recommend`)");
  m.def("search_run", [](py::dict kw, int index) {
        const auto a = search_args(to_json(kw, "search()"), "search()");
        json r;
        {
          py::gil_scoped_release nogil;
          r = api::search_run(a, index);
        }
        return to_py(r);
      }, py::arg("args"), py::arg("index"), "One search candidate's sweep rows (for SearchSession.add)");
  m.def("recommend_table", [](py::dict rep) { return to_py(api::recommend_table(to_json(rep, "recommend_table()"))); },
        py::arg("report"), "The pre-purchase table of a per-instance search report");
  py::class_<api::SearchSession>(m, "SearchSession", "A search run round by round on another executor")
      .def(py::init([](py::dict kw, bool per_instance) {
             return std::make_unique<api::SearchSession>(search_args(to_json(kw, "search()"), "search()"), per_instance);
           }), py::arg("args"), py::arg("per_instance") = false)
      .def("next_round", [](api::SearchSession& s) {
             std::vector<int> r;
             {
               py::gil_scoped_release nogil;
               r = s.next_round();
             }
             return r;
           }, "Indices of the candidates to simulate next (empty: done)")
      .def("add", [](api::SearchSession& s, int index, py::list rows) { s.add(index, to_json(rows, "SearchSession.add()")); },
           py::arg("index"), py::arg("rows"))
      .def("run", [](const api::SearchSession& s, int index) {
             json r;
             {
               py::gil_scoped_release nogil;
               r = s.run(index);
             }
             return to_py(r);
           }, py::arg("index"), "One candidate's sweep rows (for add), without the bounds")
      .def("configurations", &api::SearchSession::configurations, "Number of candidates enumerated")
      .def("report", [](const api::SearchSession& s) { return to_py(s.report()); });
  // Arguments taken as any Python object and checked here: a wrong type or range is one
  // servesim.Error naming the argument, never a pybind TypeError or a silent truncation.
  m.def("nccl", [](py::object instance, py::object nodes) {
        if (!py::isinstance<py::str>(instance))
          throw servesim::Error("nccl()", "instance", "expected an instance name (a str), got " +
                                                         py::str(py::type::of(instance).attr("__name__")).cast<std::string>());
        const json n = to_json(nodes, "nccl()", 0, "nodes");
        if (!n.is_number_integer() || py::isinstance<py::bool_>(nodes) || n.get<std::int64_t>() < 1 || n.get<std::int64_t>() > 1024)
          throw servesim::Error("nccl()", "nodes", "expected a whole number of instances in 1..1024, got " + servesim::brief(n));
        return to_py(api::nccl(instance.cast<std::string>(), int(n.get<std::int64_t>())));
      },
        py::arg("instance"), py::arg("nodes"), "NCCL all-reduce check (`servesim nccl`)");
  // ---- Dynamo layer (sim/studies/planner.hpp): a day of load through replicas the SLA planner scales.
  m.def("planner", [](py::object scenario, py::dict kw) {
        const json s = scenario_json(scenario);
        const json a = to_json(kw, "planner()");
        json r;
        {
          py::gil_scoped_release nogil;
          const servesim::sim::Scenario sc = servesim::sim::parse_scenario(s.dump(), "scenario");
          const servesim::sim::PlannerSpec spec = servesim::sim::planner_spec(a, "planner()");
          servesim::sim::check_planner_roles(sc, spec);
          r = servesim::sim::to_json(servesim::sim::run_planner(sc, spec), spec);
          r["input_config"] = servesim::sim::planner_input_config(sc, a);
        }
        return to_py(r);
      }, py::arg("scenario"), py::arg("args"),
      "servesim planner: workers, SLO attainment and GPU-hours over a load profile against a fixed fleet");
  m.def("reserved_split", [](std::vector<double> seconds_at_gpus, double reserved, double on_demand) {
        if (!(reserved > 0) || !(on_demand > 0))
          throw servesim::Error("reserved_split()", "price", "reserved and on-demand prices per GPU-hour must be > 0");
        for (double x : seconds_at_gpus)
          if (!(x >= 0)) throw servesim::Error("reserved_split()", "seconds_at_gpus", "times must be >= 0");
        return to_py(servesim::sim::to_json(servesim::sim::price_reserved_split(seconds_at_gpus, reserved, on_demand)));
      }, py::arg("seconds_at_gpus"), py::arg("reserved_usd_per_gpu_hour"), py::arg("on_demand_usd_per_gpu_hour"),
      "The cheapest reserved GPUs + on-demand GPU-hours for a planner day's fleet (its seconds_at_gpus)");
  // ---- end of the Dynamo layer block.
  m.def("emit", [](py::object deployment, py::object dir) {
        if (!py::isinstance<py::dict>(deployment))
          throw servesim::Error("emit()", "deployment", "expected a dict (a result's \"deployment\"), got " +
                                                           py::str(py::type::of(deployment).attr("__name__")).cast<std::string>());
        if (!py::isinstance<py::str>(dir) && !py::hasattr(dir, "__fspath__"))
          throw servesim::Error("emit()", "directory", "expected a folder name (a str or path), got " +
                                                          py::str(py::type::of(dir).attr("__name__")).cast<std::string>());
        const std::string folder = py::str(py::module_::import("os").attr("fspath")(dir)).cast<std::string>();
        return to_py(api::emit_deployment(to_json(deployment, "emit()"), folder));
      }, py::arg("deployment"), py::arg("directory"), "Write a deployment's artefacts into a folder");
}
