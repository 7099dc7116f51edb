// api: the artefacts that stand a planned configuration up and check it — `vllm serve`
// arguments per worker, a Dynamo (DynamoGraphDeployment) manifest for Kubernetes, the aiperf
// sweep that reproduces the predicted curve, and the nccl-tests all-reduce check with the bus
// bandwidth servesim expects (`servesim nccl`). Files are written atomically.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"

namespace servesim::api {
namespace {

std::string fmt(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string human_size(double bytes) {
  const char* u[] = {"B", "K", "M", "G"};
  int i = 0;
  while (bytes >= 1024 && i < 3) {
    bytes /= 1024;
    ++i;
  }
  return fmt(bytes, 0) + u[i];
}

// YAML from a JSON tree, block style; every string double-quoted with JSON escapes (valid YAML).
void yaml(std::ostringstream& o, const nlohmann::json& j, int indent) {
  const std::string pad(std::size_t(indent), ' ');
  auto scalar = [](const nlohmann::json& v) { return v.is_string() ? v.dump() : v.is_null() ? std::string("null") : v.dump(); };
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      const bool plain = !k.empty() && k.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-") == std::string::npos;
      const std::string key = plain ? k : nlohmann::json(k).dump();
      if ((v.is_object() && !v.empty()) || (v.is_array() && !v.empty())) {
        o << pad << key << ":\n";
        yaml(o, v, indent + 2);
      } else if (v.is_object()) {
        o << pad << key << ": {}\n";
      } else if (v.is_array()) {
        o << pad << key << ": []\n";
      } else {
        o << pad << key << ": " << scalar(v) << "\n";
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (v.is_object() && !v.empty()) {
        std::ostringstream inner;
        yaml(inner, v, indent + 2);
        std::string s = inner.str();
        s.replace(0, std::size_t(indent + 2), pad + "- ");
        o << s;
      } else if (v.is_array() && !v.empty()) {
        o << pad << "-\n";
        yaml(o, v, indent + 2);
      } else {
        o << pad << "- " << scalar(v) << "\n";
      }
    }
  }
}

std::string dns_name(std::string s) {
  s = text::lower(s);
  std::string o;
  for (char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) o += c;
    else if (!o.empty() && o.back() != '-') o += '-';
  }
  while (!o.empty() && o.back() == '-') o.pop_back();
  if (o.size() > 50) o.resize(50);
  while (!o.empty() && o.back() == '-') o.pop_back();
  return o.empty() ? "servesim" : o;
}

std::string shell_quote(const std::string& s) {
  if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,") == std::string::npos &&
      !s.empty())
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// Text for a '#' comment line of a script or manifest: control characters (a newline would end
// the comment and start a command or a YAML document) become '?'.
std::string comment(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}

const char* kNixl = R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})";

// MTP drafts a decode step of the deployment's decode-carrying workers (0: none; prefill workers
// never draft, as simulated).
int mtp_drafts(const nlohmann::json& d, const nlohmann::json& w) {
  const std::string role = w["role"];
  return role == "aggregated" || role == "decode" ? d.value("num_speculative_tokens", 0) : 0;
}

// Engine arguments of one worker role (vLLM's flag names).
std::vector<std::string> engine_args(const nlohmann::json& d, const nlohmann::json& w) {
  std::vector<std::string> a = {"--served-model-name", d["model"].get<std::string>(),
                                "--tensor-parallel-size", std::to_string(w["tp"].get<int>())};
  if (w.value("pp", 1) > 1) a.insert(a.end(), {"--pipeline-parallel-size", std::to_string(w["pp"].get<int>())});
  if (w.value("dp", 1) > 1) a.insert(a.end(), {"--data-parallel-size", std::to_string(w["dp"].get<int>())});
  if (w.value("ep", 1) > 1) a.push_back("--enable-expert-parallel");
  a.insert(a.end(), {"--max-num-seqs", std::to_string(d["max_num_seqs"].get<int>()),
                     "--max-num-batched-tokens", std::to_string(d["max_num_batched_tokens"].get<std::int64_t>()),
                     "--max-model-len", std::to_string(d["max_model_len"].get<std::int64_t>()),
                     "--gpu-memory-utilization", fmt(d["gpu_memory_utilization"].get<double>(), 2)});
  if (d.contains("checkpoint")) a.insert(a.end(), {"--quantization", d["precision"].get<std::string>()});   // on load, as simulated
  if (d["kv_cache_dtype"] == "fp8") a.insert(a.end(), {"--kv-cache-dtype", "fp8"});
  // Prefix caching as simulated (vLLM's default differs between model kinds, so it is said).
  if (d.contains("enable_prefix_caching") && d["enable_prefix_caching"].is_boolean())
    a.push_back(d["enable_prefix_caching"].get<bool>() ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  // MTP: the model's own MTP layer drafting K tokens (vLLM's speculative method "mtp").
  if (const int k = mtp_drafts(d, w); k > 0)
    a.insert(a.end(), {"--speculative-config", R"({"method":"mtp","num_speculative_tokens":)" + std::to_string(k) + "}"});
  a.push_back("--trust-remote-code");
  return a;
}

std::string join_args(const std::vector<std::string>& a) {
  std::string s;
  for (const auto& x : a) s += (s.empty() ? "" : " ") + shell_quote(x);
  return s;
}

struct Pod { int gpus = 0, nodes = 1, gpus_per_node = 0, efa = 0; };
Pod pod_of(const nlohmann::json& w) {
  const auto& inst = hw::Catalog::global().instance(w["instance"].get<std::string>());
  const int g = w["tp"].get<int>() * w.value("pp", 1) * w.value("dp", 1);
  Pod p;
  p.gpus = g;
  p.nodes = g > inst.gpus ? (g + inst.gpus - 1) / inst.gpus : 1;
  p.gpus_per_node = std::min(g, inst.gpus);
  // EFA devices in proportion to the GPUs the pod holds on its node (at least one).
  p.efa = inst.efa_devices > 0 ? std::max(1, inst.efa_devices * p.gpus_per_node / inst.gpus) : 0;
  return p;
}

std::string vllm_serve_script(const nlohmann::json& d) {
  // Every value from the deployment is shell-quoted or, in comments, stripped of control
  // characters: a model, GPU or instance name never runs as a command.
  const std::string model = d["model"].get<std::string>(), precision = d["precision"].get<std::string>();
  const std::string ckpt = d.value("checkpoint", precision);   // the published checkpoint loaded
  std::string s = "#!/usr/bin/env bash\n# vLLM engine of every worker of the planned deployment (" + comment(d["describe"].get<std::string>()) +
                  ").\n# MODEL: the " + comment(ckpt) + " checkpoint of " + comment(model) +
                  " (e.g. on the shared FSx for Lustre volume)" +
                  (ckpt != precision ? "; no " + comment(precision) + " checkpoint is published, so vLLM quantizes it to " +
                                           comment(precision) + " as it loads (--quantization " + comment(precision) + "), as simulated"
                                     : std::string()) + ".\n"
                  "# --max-model-len " + std::to_string(d["max_model_len"].get<std::int64_t>()) +
                  ": the context the prediction ran with, ISL + OSL + vision tokens + the answer-length spread (6 sd) + "
                  "1500 tokens of chat template, within the model's context.\n"
                  "set -euo pipefail\nDEFAULT_MODEL=" + shell_quote("/fsx/models/" + model + "-" + ckpt) +
                  "\nMODEL=\"${MODEL:-$DEFAULT_MODEL}\"\n";
  for (const auto& w : d["workers"]) {
    const std::string role = w["role"];
    const Pod p = pod_of(w);
    s += "\n# " + role + ": " + std::to_string(w["count"].get<std::int64_t>()) + " worker(s), each " + std::to_string(p.gpus) +
         " x " + comment(w["gpu"].get<std::string>()) + " on " + comment(w["instance"].get<std::string>()) +
         (p.nodes > 1 ? " (" + std::to_string(p.nodes) + " nodes)" : "") + "\n";
    std::vector<std::string> a = engine_args(d, w);
    if (role == "prefill" || role == "decode") a.insert(a.end(), {"--kv-transfer-config", kNixl});
    if (role == "encode") {
      s += "# (Dynamo's encode worker runs the vision encoder only: python3 -m dynamo.vllm --multimodal-encode-worker;\n"
           "#  the flag is UNVERIFIED against a Dynamo release)\n";
    }
    s += "vllm serve \"$MODEL\" " + join_args(a) + "\n";
  }
  return s;
}

// ---- SGLang and TensorRT-LLM workers (the deployment's "engine_kind") ---------------------------

std::string engine_kind(const nlohmann::json& d) { return d.value("engine_kind", std::string("vllm")); }

// GPUs a worker's MoE layers span, tp x dp: what SGLang's --tp-size and TensorRT-LLM's tp_size count
// under attention DP (each splits them into dp ranks; vLLM takes the per-rank TP and --data-parallel-size).
int moe_gpus(const nlohmann::json& w) { return w["tp"].get<int>() * w.value("dp", 1); }

// `python -m sglang.launch_server` flags of one worker role: --tp-size the worker's tp x dp GPUs,
// --dp-size its attention-DP ranks, --ep-size its expert groups (below --tp-size: MoE TP x EP).
std::vector<std::string> sglang_args(const nlohmann::json& d, const nlohmann::json& w) {
  std::vector<std::string> a = {"--served-model-name", d["model"].get<std::string>(), "--tp-size", std::to_string(moe_gpus(w))};
  if (w.value("pp", 1) > 1) a.insert(a.end(), {"--pp-size", std::to_string(w["pp"].get<int>())});
  if (w.value("dp", 1) > 1) a.insert(a.end(), {"--dp-size", std::to_string(w["dp"].get<int>()), "--enable-dp-attention"});
  if (w.value("ep", 1) > 1) a.insert(a.end(), {"--ep-size", std::to_string(w["ep"].get<int>())});
  a.insert(a.end(), {"--max-running-requests", std::to_string(d["max_num_seqs"].get<int>()),
                     "--chunked-prefill-size", std::to_string(d["max_num_batched_tokens"].get<std::int64_t>()),
                     "--context-length", std::to_string(d["max_model_len"].get<std::int64_t>())});
  const double f = d["gpu_memory_utilization"].get<double>();
  if (f > 0) a.insert(a.end(), {"--mem-fraction-static", fmt(f, 3)});   // 0: SGLang's own heuristic
  if (d.value("cuda_graph_max_bs", 0) > 0) a.insert(a.end(), {"--cuda-graph-max-bs", std::to_string(d["cuda_graph_max_bs"].get<int>())});
  if (d["kv_cache_dtype"] == "fp8") a.insert(a.end(), {"--kv-cache-dtype", "fp8_e4m3"});
  const std::string role = w["role"];
  if (role == "prefill" || role == "decode")
    a.insert(a.end(), {"--disaggregation-mode", role, "--disaggregation-transfer-backend", "mooncake",
                       "--disaggregation-bootstrap-port", "8998"});
  // MTP: SGLang runs the NextN / MTP layer as EAGLE with one draft a step and no tree (topk 1).
  if (const int k = mtp_drafts(d, w); k > 0)
    a.insert(a.end(), {"--speculative-algorithm", "EAGLE", "--speculative-num-steps", std::to_string(k), "--speculative-eagle-topk",
                       "1", "--speculative-num-draft-tokens", std::to_string(k + 1)});
  a.push_back("--trust-remote-code");
  return a;
}

// dynamo.trtllm / trtllm-serve flags of one worker role (the dynamo worker spells them with dashes):
// tp_size the worker's tp x dp GPUs (with enable_attention_dp in its options, one attention rank
// each), ep_size its expert groups (the MoE TP is tp_size / ep_size).
std::vector<std::string> trtllm_args(const nlohmann::json& d, const nlohmann::json& w, bool dynamo) {
  auto flag = [&](std::string s) {
    if (dynamo) std::replace(s.begin(), s.end(), '_', '-');
    return s;
  };
  std::vector<std::string> a = {flag("--tp_size"), std::to_string(moe_gpus(w))};
  if (dynamo) a = {"--served-model-name", d["model"].get<std::string>(), "--tensor-parallel-size", std::to_string(moe_gpus(w))};
  if (w.value("pp", 1) > 1) a.insert(a.end(), {dynamo ? "--pipeline-parallel-size" : "--pp_size", std::to_string(w["pp"].get<int>())});
  if (w.value("ep", 1) > 1) a.insert(a.end(), {dynamo ? "--expert-parallel-size" : "--ep_size", std::to_string(w["ep"].get<int>())});
  a.insert(a.end(), {flag("--max_batch_size"), std::to_string(d["max_num_seqs"].get<int>()),
                     flag("--max_num_tokens"), std::to_string(d["max_num_batched_tokens"].get<std::int64_t>()),
                     flag("--max_seq_len"), std::to_string(d["max_model_len"].get<std::int64_t>()),
                     dynamo ? "--free-gpu-memory-fraction" : "--kv_cache_free_gpu_memory_fraction",
                     fmt(d["gpu_memory_utilization"].get<double>(), 2)});
  const std::string role = w["role"];
  const std::string options = "trtllm-" + role + ".yaml";
  if (dynamo) {
    a.insert(a.end(), {"--extra-engine-args", "/config/" + options});
    if (role == "prefill" || role == "decode") a.insert(a.end(), {"--disaggregation-mode", role});
  } else {
    a.insert(a.end(), {"--backend", "pytorch", "--trust_remote_code", "--extra_llm_api_options", options});
  }
  return a;
}

// The LLM API options file of one TRT-LLM role (--extra_llm_api_options / --extra-engine-args).
std::string trtllm_options(const nlohmann::json& d, const nlohmann::json& w) {
  nlohmann::json o = nlohmann::json::object();
  o["enable_chunked_prefill"] = d.value("enable_chunked_prefill", false);
  if (d["kv_cache_dtype"] == "fp8") o["kv_cache_config"] = {{"dtype", "fp8"}};
  if (w.value("dp", 1) > 1) o["enable_attention_dp"] = true;
  if (d.value("cuda_graph_max_bs", 0) > 0) o["cuda_graph_config"] = {{"max_batch_size", d["cuda_graph_max_bs"]}, {"enable_padding", false}};
  const std::string role = w["role"];
  if (role == "prefill" || role == "decode") o["cache_transceiver_config"] = {{"backend", "DEFAULT"}};
  // MTP: one-model MTP with K next-token heads (the model's MTP layer reused).
  if (const int k = mtp_drafts(d, w); k > 0) o["speculative_config"] = {{"decoding_type", "MTP"}, {"num_nextn_predict_layers", k}};
  std::ostringstream s;
  s << "# TensorRT-LLM LLM API options of the " << role << " workers (" << d["describe"].get<std::string>() << ")\n";
  yaml(s, o, 0);
  return s.str();
}

std::string script_head(const nlohmann::json& d, const std::string& engine) {
  return "#!/usr/bin/env bash\n# " + engine + " of every worker of the planned deployment (" + d["describe"].get<std::string>() +
         ").\n# MODEL: the " + d["precision"].get<std::string>() + " checkpoint of " + d["model"].get<std::string>() +
         " (e.g. on the shared FSx for Lustre volume).\nset -euo pipefail\nMODEL=${MODEL:-/fsx/models/" +
         shell_quote(d["model"].get<std::string>() + "-" + d["precision"].get<std::string>()) + "}\n";
}

std::string worker_comment(const nlohmann::json& w) {
  const Pod p = pod_of(w);
  return "\n# " + w["role"].get<std::string>() + ": " + std::to_string(w["count"].get<int>()) + " worker(s), each " +
         std::to_string(p.gpus) + " x " + w["gpu"].get<std::string>() + " on " + w["instance"].get<std::string>() +
         (p.nodes > 1 ? " (" + std::to_string(p.nodes) + " nodes)" : "") + "\n";
}

std::string sglang_launch_script(const nlohmann::json& d) {
  std::string s = script_head(d, "SGLang server");
  for (const auto& w : d["workers"]) {
    s += worker_comment(w);
    s += "python -m sglang.launch_server --model-path \"$MODEL\" " + join_args(sglang_args(d, w)) + "\n";
  }
  if (d["kind"] == "disaggregated")
    s += "\n# Router: python -m sglang_router.launch_router --pd-disaggregation --prefill http://PREFILL:30000 8998 "
         "--decode http://DECODE:30000 (one --prefill / --decode per worker)\n";
  return s;
}

std::string trtllm_serve_script(const nlohmann::json& d) {
  std::string s = script_head(d, "trtllm-serve");
  for (const auto& w : d["workers"]) {
    s += worker_comment(w);
    s += "trtllm-serve \"$MODEL\" " + join_args(trtllm_args(d, w, false)) + "\n";
  }
  if (d["kind"] == "disaggregated")
    s += "\n# Proxy: trtllm-serve disaggregated -c disagg.yaml, listing the context (prefill) and generation (decode)\n"
         "# servers' URLs; it sends each request to a context server with max_tokens=1, then to a generation server.\n";
  return s;
}

// What the Dynamo manifest runs for an engine: its runtime image, worker module, service names
// and worker arguments.
struct DynamoEngine {
  std::string image, module, service;   // service: "Vllm" -> VllmWorker, VllmPrefillWorker, ...
  std::vector<std::string> (*args)(const nlohmann::json&, const nlohmann::json&);
};
std::vector<std::string> dynamo_sglang_args(const nlohmann::json& d, const nlohmann::json& w) {
  std::vector<std::string> a = {"--model-path", "/fsx/models/" + d["model"].get<std::string>() + "-" + d["precision"].get<std::string>()};
  for (const auto& x : sglang_args(d, w)) a.push_back(x);
  return a;
}
std::vector<std::string> dynamo_trtllm_args(const nlohmann::json& d, const nlohmann::json& w) {
  std::vector<std::string> a = {"--model-path", "/fsx/models/" + d["model"].get<std::string>() + "-" + d["precision"].get<std::string>()};
  for (const auto& x : trtllm_args(d, w, true)) a.push_back(x);
  return a;
}
DynamoEngine dynamo_engine(const nlohmann::json& d) {
  const std::string k = engine_kind(d);
  // 0.8.0: the one Dynamo release whose three runtime images measured runs name (AIConfigurator's
  // silicon sample records vllm-, sglang- and tensorrtllm-runtime:0.8.0 as the images it served).
  if (k == "sglang") return {"nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.8.0", "dynamo.sglang", "SGLang", dynamo_sglang_args};
  if (k == "trtllm") return {"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.0", "dynamo.trtllm", "Trtllm", dynamo_trtllm_args};
  return {"nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0", "dynamo.vllm", "Vllm", nullptr};
}

// The engine's own flags (those its launch script runs with), as opposed to the Dynamo layer's.
std::vector<std::string> own_engine_flags(const nlohmann::json& d, const nlohmann::json& w) {
  const std::string k = engine_kind(d);
  std::vector<std::string> a = k == "sglang" ? sglang_args(d, w) : k == "trtllm" ? trtllm_args(d, w, false) : engine_args(d, w);
  if (k == "vllm") a.push_back("--kv-transfer-config");
  if (k == "sglang") a.push_back("--model-path");
  return a;
}

// What the manifest names of the Dynamo layer, none of it pinned by a source servesim carries
// (its reference material names Dynamo's runtime images, not their CLI or the operator's schema):
// the schema fields, the modules run, every flag that is not the engine's own, the environment and
// the probes. Listed in the manifest's header as UNVERIFIED; tests/python/test_planner_emit.py
// checks that every flag of a written manifest is either the engine's or listed here.
std::string dynamo_unverified(const nlohmann::json& d, const nlohmann::json& services) {
  std::vector<std::string> engine, modules, flags;
  for (const auto& w : d["workers"])
    for (const auto& x : own_engine_flags(d, w)) engine.push_back(x);
  auto add = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const auto& [name, svc] : services.items()) {
    const bool worker = svc["componentType"] == "worker";   // the engine's flags only on its workers
    const auto& c = svc["extraPodSpec"]["mainContainer"];
    for (const char* key : {"command", "args"}) {
      if (!c.contains(key)) continue;
      const auto& a = c[key];
      for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string t = a[i].get<std::string>();
        if (std::string(key) == "command" && i > 0 && a[i - 1] == "-m") add(modules, t);
        if (t.rfind("--", 0) != 0) continue;
        const std::string f = t.substr(0, t.find('='));
        if (!worker || std::find(engine.begin(), engine.end(), f) == engine.end()) add(flags, f);
      }
    }
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
  };
  return "# UNVERIFIED Dynamo names: no source servesim carries pins them to a Dynamo release; check each against the\n"
         "# Dynamo you deploy (docs/dynamo.md, 'What the emitted Dynamo files rest on'):\n"
         "#   schema: apiVersion nvidia.com/v1alpha1, kind DynamoGraphDeployment, dynamoNamespace, componentType,\n"
         "#     subComponentType, extraPodSpec, mainContainer, multinode.nodeCount, resources gpu\n"
         "#   modules: " + join(modules) + "\n"
         "#   flags: " + join(flags) + "\n"
         "#   environment and probes: DYN_SYSTEM_ENABLED, DYN_SYSTEM_PORT, /live and /health on port 9090, /health on 8000\n"
         "# Attested: the image " + services["Frontend"]["extraPodSpec"]["mainContainer"]["image"].get<std::string>() +
         " (named by measured runs in AIConfigurator's silicon\n"
         "# sample); the engine's own flags, as its launch script in this folder runs them.\n";
}

// The Dynamo planner's service (`planner`: the bounds and rule `servesim planner` found; null: none).
nlohmann::json planner_service(const nlohmann::json& d, const nlohmann::json& p, const std::string& name, const std::string& image) {
  auto arg = [](const char* k, const nlohmann::json& v) {   // whole numbers without a ".0" (Dynamo's integer flags)
    const bool whole = v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
                       std::fabs(v.get<double>()) < 1e15;
    return std::string("--") + k + "=" +
           (v.is_string() ? v.get<std::string>() : whole ? std::to_string(std::int64_t(v.get<double>())) : v.dump());
  };
  const bool load = p["rule"] == "load";
  nlohmann::json args = nlohmann::json::array({arg("environment", "kubernetes"), arg("backend", d.value("engine_kind", std::string("vllm"))),
                                               arg("adjustment-interval", p["adjustment_interval_s"])});
  if (load) {
    args.push_back(arg("metric-pulling-interval", p["metric_interval_s"]));
    args.push_back(arg("prefill-queue-scale-up-threshold", p["queue_scale_up"]));
    args.push_back(arg("prefill-queue-scale-down-threshold", p["queue_scale_down"]));
    args.push_back(arg("decode-kv-scale-up-threshold", p["kv_scale_up"]));
    args.push_back(arg("decode-kv-scale-down-threshold", p["kv_scale_down"]));
  } else {
    args.push_back(arg("ttft", p["ttft_ms"]));
    args.push_back(arg("itl", p["itl_ms"]));
    args.push_back(arg("load-predictor", "constant"));
  }
  args.push_back(arg("min-endpoint", p["min_workers"]));
  args.push_back(arg("max-gpu-budget", p["max_gpu_budget"]));
  for (const auto& r : p["roles"]) {
    const std::string role = r["name"];
    if (role == "prefill" || role == "decode") args.push_back(arg((role + "-engine-num-gpu").c_str(), r["gpus_per_worker"]));
  }
  return {{"dynamoNamespace", name}, {"componentType", "planner"}, {"replicas", 1},
          {"extraPodSpec", {{"mainContainer", {{"image", image},
                                               {"command", {"python3", "-m", load ? "dynamo.planner.planner_load" : "dynamo.planner.planner_sla"}},
                                               {"args", args}}}}}};
}

std::string dynamo_manifest(const nlohmann::json& d, const nlohmann::json& planner = nullptr) {
  const std::string name = dns_name(d["name"].get<std::string>());
  const DynamoEngine eng = dynamo_engine(d);
  const std::string image = eng.image;
  nlohmann::json services = nlohmann::json::object();
  // The frontend routes as the simulation did: Dynamo's KV-aware router when it ran "kv".
  nlohmann::json frontend_cmd = {"python3", "-m", "dynamo.frontend", "--http-port", "8000"};
  if (d.value("router", std::string()) == "kv") frontend_cmd.push_back("--router-mode"), frontend_cmd.push_back("kv");
  // Probes: the frontend's HTTP port answers /health; a worker's system server (DYN_SYSTEM_ENABLED,
  // port 9090) answers /live and /health once its engine has loaded the weights, which the startup
  // probe waits for (up to 60 x 10 s).
  auto probe = [](const char* path, int port, int period_s, int failures) {
    return nlohmann::json{{"httpGet", {{"path", path}, {"port", port}}}, {"periodSeconds", period_s}, {"failureThreshold", failures}};
  };
  services["Frontend"] = {{"dynamoNamespace", name}, {"componentType", "frontend"}, {"replicas", 1},
                          {"extraPodSpec", {{"mainContainer", {{"image", image}, {"command", frontend_cmd},
                                                               {"livenessProbe", probe("/health", 8000, 10, 3)},
                                                               {"readinessProbe", probe("/health", 8000, 5, 3)}}}}}};
  const bool disagg = d["kind"] == "disaggregated";
  for (const auto& w : d["workers"]) {
    const std::string role = w["role"];
    const Pod p = pod_of(w);
    std::vector<std::string> args = {"--model", "/fsx/models/" + d["model"].get<std::string>() + "-" + d.value("checkpoint", d["precision"].get<std::string>())};
    if (eng.args) args = eng.args(d, w);   // SGLang / TRT-LLM: the role's flags are in their arguments
    else
      for (const auto& x : engine_args(d, w)) args.push_back(x);
    std::string svc = eng.service + "Worker";
    nlohmann::json s = {{"dynamoNamespace", name}, {"componentType", "worker"}, {"replicas", w["count"]}};
    if (role == "prefill") {
      svc = eng.service + "PrefillWorker";
      s["subComponentType"] = "prefill";
      if (!eng.args) args.push_back("--is-prefill-worker");
    } else if (role == "decode") {
      svc = eng.service + "DecodeWorker";
      s["subComponentType"] = "decode";
    } else if (role == "encode") {
      svc = eng.service + "EncodeWorker";
      args.push_back("--multimodal-encode-worker");
    }
    // Prefill and decode workers move the KV cache over NIXL, as vllm-serve.sh configures them.
    if (disagg && !eng.args && (role == "prefill" || role == "decode")) args.insert(args.end(), {"--kv-transfer-config", kNixl});
    // GPUs through the operator's resources (requested = limit); EFA adapters (an extended
    // resource) on the container.
    nlohmann::json limits = nlohmann::json::object();
    if (p.efa > 0) limits["vpc.amazonaws.com/efa"] = std::to_string(p.efa);
    const nlohmann::json gpus = {{"gpu", std::to_string(p.gpus_per_node)}};
    s["resources"] = {{"limits", gpus}, {"requests", gpus}};
    if (p.nodes > 1) s["multinode"] = {{"nodeCount", p.nodes}};
    nlohmann::json cmd = nlohmann::json::array({"python3", "-m", eng.module});
    nlohmann::json env = nlohmann::json::array({nlohmann::json{{"name", "DYN_SYSTEM_ENABLED"}, {"value", "true"}},
                                                nlohmann::json{{"name", "DYN_SYSTEM_PORT"}, {"value", "9090"}}});
    s["extraPodSpec"] = {{"nodeSelector", {{"node.kubernetes.io/instance-type", w["instance"]}}},
                         {"mainContainer", {{"image", image}, {"command", cmd}, {"args", args}, {"env", env},
                                            {"startupProbe", probe("/live", 9090, 10, 60)},
                                            {"livenessProbe", probe("/live", 9090, 10, 3)},
                                            {"readinessProbe", probe("/health", 9090, 10, 3)},
                                            {"resources", {{"limits", limits}, {"requests", limits}}}}}};
    services[svc] = s;
  }
  if (!planner.is_null()) services["Planner"] = planner_service(d, planner, name, image);
  nlohmann::json doc = {{"apiVersion", "nvidia.com/v1alpha1"},
                        {"kind", "DynamoGraphDeployment"},
                        {"metadata", {{"name", name}}},
                        {"spec", {{"services", services}}}};
  std::ostringstream o;
  o << "# Dynamo deployment of the planned configuration: " << comment(d["describe"].get<std::string>()) << "\n";
  o << "# " << d["kind"].get<std::string>() << "; " << d["copies"].get<std::int64_t>() << " cop" << (d["copies"].get<std::int64_t>() == 1 ? "y" : "ies")
    << " of the topology; workers per role below are totals. Weights are read from /fsx/models (FSx for Lustre PVC).\n";
  if (engine_kind(d) == "trtllm")
    o << "# The TRT-LLM workers read their LLM API options from /config/trtllm-<role>.yaml: mount the emitted\n"
      << "# trtllm-<role>.yaml files there (a ConfigMap).\n";
  if (!planner.is_null()) {
    o << "# Planner: " << comment(planner["rule"].get<std::string>()) << " rule every " << fmt(planner["adjustment_interval_s"].get<double>(), 0)
      << " s. Replicas below are the opening fleet; the planner keeps each role within the bounds servesim planner found\n"
      << "# over the simulated day (planner.json):";
    for (const auto& r : planner["roles"])
      o << " " << comment(r["name"].get<std::string>()) << " " << r["min_workers"].dump() << ".." << r["max_workers"].dump()
        << " workers of " << r["gpus_per_worker"].dump() << " GPU(s);";
    o << " at most " << planner["max_gpu_budget"].dump() << " GPUs.\n";
  }
  o << dynamo_unverified(d, services);
  if (d.value("vision", false) && !d.value("has_encode_workers", false))
    o << "# Vision model without encode workers: the " << (d["kind"] == "disaggregated" ? "prefill" : "aggregated")
      << " workers run the vision encoder.\n";
  yaml(o, doc, 0);
  return o.str();
}

// aiperf's request options shared by the closed- and the open-loop check: fixed lengths, no early
// end of answers, the images of the traffic.
std::string aiperf_request_options(const nlohmann::json& d, bool images = true, std::int64_t isl = 0) {
  std::string s = " --url \"$URL\" --endpoint-type chat --streaming \\\n"
                  "    --isl " + std::to_string(isl > 0 ? isl : d["isl"].get<std::int64_t>()) + " --isl-stddev 0 --osl " +
                  std::to_string(d["osl"].get<std::int64_t>()) + " --osl-stddev 0 \\\n"
                  "    --extra-inputs ignore_eos:true --extra-inputs '{\"nvext\":{\"ignore_eos\":true}}' \\\n";
  if (images && d.contains("images") && !d["images"].empty()) {
    const auto& im = d["images"][0];
    s += "    --image-width-mean " + std::to_string(im["width"].get<int>()) + " --image-height-mean " +
         std::to_string(im["height"].get<int>()) + " --batch-size-image " + std::to_string(im["count"].get<int>()) + " \\\n";
  }
  return s;
}

// Where a deployment's aiperf runs go, relative to the folder the script is run from: artifacts/ and
// the deployment's name, precision and instances (nemotron-3-nano-aggregated-bf16-1xp5.48xlarge), so
// that the checks of two deployments run from one folder (a plan's aggregated and disaggregated
// sets, recommend's best per GPU type) never write into each other's cN / rR folders. Letters,
// digits, '-' and a '.' between two of them only: no path separator, no "..", nothing a shell expands.
std::string artifacts_folder(const nlohmann::json& d) {
  std::string n = d["name"].get<std::string>() + "-" + d.value("precision", std::string());
  for (const auto& [inst, count] : d["instances"].items()) n += "-" + std::to_string(count.get<std::int64_t>()) + "x" + inst;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  std::string o;
  for (std::size_t i = 0; i < n.size() && o.size() < 120; ++i) {
    const char c = text::lower(std::string(1, n[i]))[0];
    if (alnum(c)) o += c;
    else if (c == '.' && !o.empty() && alnum(o.back()) && i + 1 < n.size() && alnum(text::lower(std::string(1, n[i + 1]))[0])) o += c;
    else if (!o.empty() && o.back() != '-') o += '-';
  }
  while (!o.empty() && (o.back() == '-' || o.back() == '.')) o.pop_back();
  return "artifacts/" + (o.empty() ? std::string("deployment") : o);
}

// The script's start: URL, its own folder, and OUT, the folder of this deployment's runs (ARTIFACTS
// overrides it). A non-empty OUT whose deployment.json is not this deployment's holds another
// deployment's runs (or runs of no known one): refused in one line, nothing sent.
std::string script_prologue(const nlohmann::json& d) {
  return "set -euo pipefail\nURL=${URL:-http://localhost:8000}\nHERE=$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\n"
         "OUT=${ARTIFACTS:-" + artifacts_folder(d) + "}\n"
         "if [ -f \"$HERE/deployment.json\" ]; then\n"
         "  if [ -d \"$OUT\" ] && [ -n \"$(ls -A \"$OUT\")\" ] && ! cmp -s \"$HERE/deployment.json\" \"$OUT/deployment.json\"; then\n"
         "    echo \"aiperf-sweep.sh: $OUT holds runs of another deployment (its deployment.json is not $HERE/deployment.json); \"\\\n"
         "\"move it away or set ARTIFACTS to a new folder\" >&2\n"
         "    exit 1\n"
         "  fi\n"
         "  mkdir -p \"$OUT\"; cp \"$HERE/deployment.json\" \"$OUT/deployment.json\"\n"
         "fi\n";
}

// The header line that says where the runs go.
std::string out_note(const nlohmann::json& d) {
  return "# OUT, where aiperf's folders go, under the folder this is run from (ARTIFACTS=DIR chooses another):\n#   " +
         artifacts_folder(d) + "\n# this deployment's own: another deployment's check run from the same folder writes elsewhere.\n";
}

// The script's end: where the runs are and the command that compares them with the prediction.
const char* kScriptEpilogue = "echo \"aiperf runs in $OUT; compare them with the prediction: servesim validate $OUT\"\n";

// The run's setup beside its aiperf folder (servesim_run.json), so that `servesim validate $OUT`
// reads each folder as it ran: the emitted scenario of the whole deployment (scenario-all-copies.json
// where the plan has several copies, else scenario.json) with this run's load in front of it, which
// validate puts over the scenario's workload (nothing when aiperf left no folder). `load` is a printf format of JSON fields and `args`
// its arguments (shell words).
std::string sidecar_shell(const std::string& folder, const std::string& load, const std::string& args) {
  return "  SC=\"$HERE/scenario-all-copies.json\"; [ -f \"$SC\" ] || SC=\"$HERE/scenario.json\"\n"
         "  if [ -f \"$SC\" ] && [ -d \"" + folder + "\" ]; then\n"
         "    { printf '{" + load + ",' " + args + "\n"
         "      tail -c +2 \"$SC\"; } > \"" + folder + "/servesim_run.json\"\n"
         "  fi\n";
}

// With images on a share f of requests, the open-loop runs go in pairs (the script's header says so).
std::string images_note(double f) {
  return "# Images on " + fmt(100 * f, 0) + " % of requests: two aiperf runs at once per rate, text-only at " + fmt(100 * (1 - f), 0) +
         " % of R and with images at " + fmt(100 * f, 0) + " % of R\n# (artifacts/rR-text, artifacts/rR-images): together the stream the plan "
         "simulated; `servesim validate artifacts` reads each pair as that one stream.\n";
}

// The open-loop runs at the rates of `list` (words), each as long as the plan's run (max(1000, 60 s x
// rate) after max(100, 10 s x rate)), with each folder's setup beside it.
std::string rate_loop(const nlohmann::json& d, const std::string& list) {
  std::string s = "for R in " + list + "; do\n"
       "  N=$(awk -v r=\"$R\" 'BEGIN { n = int(60 * r + 0.999); print (n > 1000 ? n : 1000) }')\n"
       "  W=$(awk -v r=\"$R\" 'BEGIN { n = int(10 * r + 0.999); print (n > 100 ? n : 100) }')\n";
  const double f = d.value("image_fraction", 1.0);
  const std::string model = shell_quote(d["model"].get<std::string>());
  if (d.contains("images") && !d["images"].empty() && f > 0 && f < 1) {
    // Images on a share f of the requests: aiperf's synthetic inputs give every request of one run
    // the same image options, so two runs at once, Poisson streams at (1 - f) R without images and
    // f R with them (together a Poisson stream at R with a share f of images, the traffic the plan
    // simulated), each with its share of the requests.
    const std::string fs = fmt(f, 6);
    s += "  RI=$(awk -v r=\"$R\" 'BEGIN { printf \"%.3f\", r * " + fs + " }'); RT=$(awk -v r=\"$R\" 'BEGIN { printf \"%.3f\", r * (1 - " + fs + ") }')\n"
         "  NI=$(awk -v n=\"$N\" 'BEGIN { print int(n * " + fs + " + 0.5) }'); NT=$((N - NI))\n"
         "  WI=$(awk -v n=\"$W\" 'BEGIN { print int(n * " + fs + " + 0.5) }'); WT=$((W - WI))\n"
         "  aiperf profile --model " + model + aiperf_request_options(d, false) +
         "    --request-rate \"$RT\" --request-count \"$NT\" --warmup-request-count \"$WT\" --random-seed 100 \\\n"
         "    --artifact-dir \"$OUT/r$R-text\" &\n  TEXT=$!\n"
         "  aiperf profile --model " + model + aiperf_request_options(d) +
         "    --request-rate \"$RI\" --request-count \"$NI\" --warmup-request-count \"$WI\" --random-seed 101 \\\n"
         "    --artifact-dir \"$OUT/r$R-images\" &\n  IMAGES=$!\n"
         "  wait \"$TEXT\"; wait \"$IMAGES\"\n";
    // Each half records the whole stream (rate, requests, warm-up: what the plan simulated) and its
    // own part of it; validate reads the pair as one measured stream.
    const std::string whole = "\"request_rate\": %s, \"arrival\": \"poisson\", \"requests\": %d, \"warmup_requests\": %d";
    s += sidecar_shell("$OUT/r$R-text", whole + ", \"stream\": {\"part\": \"text\", \"request_rate\": %s, \"requests\": %d, "
                                             "\"warmup_requests\": %d, \"with\": \"r%s-images\"}",
                       "\"$R\" \"$N\" \"$W\" \"$RT\" \"$NT\" \"$WT\" \"$R\"") +
         sidecar_shell("$OUT/r$R-images", whole + ", \"stream\": {\"part\": \"images\", \"request_rate\": %s, \"requests\": %d, "
                                               "\"warmup_requests\": %d, \"with\": \"r%s-text\"}",
                       "\"$R\" \"$N\" \"$W\" \"$RI\" \"$NI\" \"$WI\" \"$R\"") +
         "done\n";
    return s;
  }
  s += "  aiperf profile --model " + model + aiperf_request_options(d) +
       "    --request-rate \"$R\" --request-count \"$N\" --warmup-request-count \"$W\" --random-seed 100 \\\n"
       "    --artifact-dir \"$OUT/r$R\"\n" +
       sidecar_shell("$OUT/r$R", "\"request_rate\": %s, \"arrival\": \"poisson\", \"requests\": %d, \"warmup_requests\": %d",
                     "\"$R\" \"$N\" \"$W\"") +
       "done\n";
  return s;
}

// Open loop (the plan was sized at a target rate): send at the rates the plan simulated. Each
// predicted row is k copies sharing the target; on the deployed C copies the same per-copy rate is
// C x rate_per_copy(k). The rates within 0.75..1.5 x the target (the target always among them),
// each run as long as the plan's: a warm-up of max(100, 10 s x rate), then max(1000, 60 s x rate).
std::string aiperf_rate_script(const nlohmann::json& d) {
  const std::int64_t copies = d["copies"].get<std::int64_t>();
  const double per_copy = d["rate_per_copy"].get<double>(), target = per_copy * double(copies);
  std::vector<double> rates{target};
  const auto& p = d["predicted"];
  for (const auto& k : p["copies"]) {
    const double r = target / double(k.get<std::int64_t>()) * double(copies);   // per-copy rate of k copies, on C copies
    if (r >= 0.75 * target && r <= 1.5 * target && std::abs(r - target) > 1e-9 * target) rates.push_back(r);
  }
  std::sort(rates.begin(), rates.end());
  std::string list;
  for (const double r : rates) list += (list.empty() ? "" : " ") + fmt(r, 3);
  std::string s = "#!/usr/bin/env bash\n# aiperf open-loop check of the plan against the Dynamo frontend: requests sent at the planned\n"
                  "# rate, " + fmt(target, 3) + " requests/s over " + std::to_string(copies) + (copies == 1 ? " copy (" : " copies (") + fmt(per_copy, 3) +
                  " each), and at the rates whose per-copy share the plan\n# also simulated (predicted.csv: request_rate_on_deployed_copies) within 0.75-1.5 x the target. The plan assumed " +
                  d.value("arrival", std::string("poisson")) + " arrivals.\n"
                  "# UNVERIFIED aiperf names: --request-rate (and that its arrivals are Poisson when no other arrival option is\n"
                  "# given) are aiperf's as servesim understands them, not checked against an aiperf release; compare with\n"
                  "# `aiperf profile --help` before running. Then: `servesim validate OUT` closes the loop (each run's folder\n"
                  "# gets its setup, servesim_run.json: the rate, Poisson arrivals as aiperf sends them, the request counts).\n" + out_note(d);
  if (const double f = d.value("image_fraction", 1.0); d.contains("images") && !d["images"].empty() && f > 0 && f < 1)
    s += images_note(f);
  return s + script_prologue(d) + rate_loop(d, list) + kScriptEpilogue;
}

std::string aiperf_script(const nlohmann::json& d) {
  if (d.value("predicted_axis", std::string()) == "copies" && d.contains("rate_per_copy")) return aiperf_rate_script(d);
  const std::int64_t copies = d["copies"].get<std::int64_t>();
  std::string s = "#!/usr/bin/env bash\n# aiperf concurrency sweep that reproduces the predicted curve (predicted.csv) against the\n"
                  "# Dynamo frontend. Clients = clients of one copy x " + std::to_string(copies) +
                  " copies; the frontend spreads them over the copies.\n"
                  "# Then: `servesim validate OUT` closes the loop (each folder gets the run's setup, servesim_run.json).\n" + out_note(d);
  if (const double f = d.value("image_fraction", 1.0); d.contains("images") && !d["images"].empty() && f < 1)
    s += "# NOTE: the prediction has images on " + fmt(100 * f, 0) + " % of requests; aiperf's synthetic inputs here put one on\n"
         "# every request (a heavier load than predicted.csv): compare with a prediction at image fraction 1, or use\n"
         "# the open-loop check (--target-rps with --arrival), which sends the mix.\n";
  s += script_prologue(d);
  std::string conc;
  for (const auto& c : d["concurrency"]) conc += (conc.empty() ? "" : " ") + std::to_string(c.get<std::int64_t>() * copies);
  s += "for C in " + conc + "; do\n  aiperf profile --model " + shell_quote(d["model"].get<std::string>()) + aiperf_request_options(d);
  s += "    --concurrency \"$C\" --request-count $((C * 20)) --warmup-request-count $((C * 2)) --random-seed 100 \\\n"
       "    --artifact-dir \"$OUT/c$C\"\n";
  // The run's setup beside its folder (servesim_run.json: the emitted scenario with this run's clients
  // and request counts), so that `servesim validate $OUT` reads each folder as it ran. Not with
  // images on a share of the requests: this sweep sends one on every request, which the scenario does not.
  if (const double f = d.value("image_fraction", 1.0); !(d.contains("images") && !d["images"].empty() && f < 1))
    s += sidecar_shell("$OUT/c$C", "\"concurrency\": %d, \"requests\": %d, \"warmup_requests\": %d", "\"$C\" $((C * 20)) $((C * 2))");
  s += "done\n";
  // The first-token floor shows only on a short prompt at light load (<= 2,048 tokens, <= 8 clients), and
  // `calibrate e2e` fits it only where a run measures it (else it holds short prompts at the shipped
  // calibration's TTFT and says so): a sweep that has no such run gets one, 4 clients of a 1,024-token
  // prompt (the plan's, if shorter), with its own setup. Not with images (their tokens make the prompt long).
  std::int64_t fewest = INT64_MAX;
  for (const auto& c : d["concurrency"]) fewest = std::min(fewest, c.get<std::int64_t>() * copies);
  const std::int64_t isl = d["isl"].get<std::int64_t>();
  if ((isl > 2048 || fewest > 8) && !(d.contains("images") && !d["images"].empty())) {
    const std::int64_t short_isl = std::min<std::int64_t>(isl, 1024);
    s += "# One short prompt at light load (" + std::to_string(short_isl) + " tokens, 4 clients): the first-token floor, which `servesim\n"
         "# calibrate e2e` fits only where a run measures it. Not a row of predicted.csv; `servesim validate` predicts it too.\n"
         "C=4\naiperf profile --model " + shell_quote(d["model"].get<std::string>()) + aiperf_request_options(d, false, short_isl) +
         "    --concurrency \"$C\" --request-count $((C * 20)) --warmup-request-count $((C * 2)) --random-seed 100 \\\n"
         "    --artifact-dir \"$OUT/floor-c$C\"\n";
    s += sidecar_shell("$OUT/floor-c$C", "\"concurrency\": %d, \"requests\": %d, \"warmup_requests\": %d, \"isl\": " + std::to_string(short_isl),
                       "\"$C\" $((C * 20)) $((C * 2))");
  }
  if (d.contains("rate_per_copy")) {   // sized open loop (plan --target-rps --arrival): the planned rate, as long as the plan's run
    const double rate = d["rate_per_copy"].get<double>() * double(copies);
    s += "# Open loop at the planned rate, " + fmt(rate, 3) + " requests/s over the " + std::to_string(copies) +
         (copies == 1 ? " copy" : " copies") + " (" + d.value("arrival", std::string("poisson")) +
         " arrivals in the plan, Poisson from aiperf; UNVERIFIED aiperf names: compare with `aiperf profile --help`).\n";
    if (const double f = d.value("image_fraction", 1.0); d.contains("images") && !d["images"].empty() && f > 0 && f < 1)
      s += images_note(f);
    s += rate_loop(d, fmt(rate, 3));
  }
  return s + kScriptEpilogue;
}

std::string predicted_csv(const nlohmann::json& d) {
  const auto& p = d["predicted"];
  const std::int64_t copies = d["copies"].get<std::int64_t>();
  if (d.value("predicted_axis", std::string()) == "copies" && d.contains("rate_per_copy")) {
    // Open loop: each row is k copies sharing the target rate (k = 1, 2, 4, ... as the search tried
    // them), in ascending k; output tok/s is the k copies' together.
    const double rate = d["rate_per_copy"].get<double>() * double(copies);
    std::vector<std::size_t> order(p["copies"].size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return p["copies"][a].get<std::int64_t>() < p["copies"][b].get<std::int64_t>();
    });
    std::string s = "copies,request_rate,request_rate_per_copy,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,itl_p50_ms,itl_p90_ms,itl_p99_ms,"
                    "output_tps,output_tps_per_gpu,output_tps_per_user,request_rate_on_deployed_copies,overloaded\n";
    // overloaded: 1 where those copies fell behind the rate (served < offered, the queue grew), so its
    // latencies grow with the run's length; empty when the deployment does not say.
    const bool has_over = p.contains("overloaded") && p["overloaded"].is_array() && p["overloaded"].size() == order.size();
    for (const std::size_t i : order) {
      const std::int64_t k = p["copies"][i].get<std::int64_t>();
      s += std::to_string(k) + "," + fmt(rate, 3) + "," + fmt(rate / double(k), 3);
      for (const char* key : {"ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms"})
        s += "," + fmt(p[key][i].get<double>(), 3);
      // The same per-copy rate on the deployed copies: the rate aiperf-sweep.sh sends to check this row.
      s += "," + fmt(p["output_tps"][i].get<double>() * double(k), 1) + "," + fmt(p["output_tps_per_gpu"][i].get<double>(), 2) +
           "," + fmt(p["output_tps_per_user"][i].get<double>(), 2) + "," + fmt(rate / double(k) * double(copies), 3) + "," +
           (has_over && p["overloaded"][i].is_boolean() ? (p["overloaded"][i].get<bool>() ? "1" : "0") : "") + "\n";
    }
    return s;
  }
  std::string s = "clients,clients_per_copy,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,itl_p50_ms,itl_p90_ms,itl_p99_ms,output_tps,output_tps_per_gpu,output_tps_per_user\n";
  for (std::size_t i = 0; i < p["concurrency"].size(); ++i) {
    const std::int64_t c = p["concurrency"][i].get<std::int64_t>();
    s += std::to_string(c * copies) + "," + std::to_string(c);
    for (const char* k : {"ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms"})
      s += "," + fmt(p[k][i].get<double>(), 3);
    s += "," + fmt(p["output_tps"][i].get<double>() * double(copies), 1) + "," + fmt(p["output_tps_per_gpu"][i].get<double>(), 2) +
         "," + fmt(p["output_tps_per_user"][i].get<double>(), 2) + "\n";
  }
  return s;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) { write_file_atomic(path, text); }

nlohmann::json nccl(const std::string& instance, int nodes, double min_bytes, double max_bytes) {
  const auto& inst = hw::Catalog::global().instance(instance);
  if (nodes < 1 || nodes > 1024) throw Error("--nodes", "", "must be in 1..1024, got " + std::to_string(nodes));
  // Whole bytes, as nccl-tests sizes its messages: the rows are the sizes its command measures.
  const double most = 64.0 * (1ull << 30);
  for (const auto& [flag, v] : {std::pair{"--min-bytes", min_bytes}, std::pair{"--max-bytes", max_bytes}})
    if (!(v >= 1 && v <= most) || v != std::floor(v))
      throw Error(flag, "", "must be a whole number of bytes in 1..68719476736 (64 GiB), got " + fmt(v, v == std::floor(v) ? 0 : 3));
  if (max_bytes < min_bytes) throw Error("--max-bytes", "", "must be >= --min-bytes (" + fmt(min_bytes, 0) + ")");
  const int n = nodes * inst.gpus;
  nlohmann::json rows = nlohmann::json::array();
  for (double b = min_bytes; b <= max_bytes * (1 + 1e-9); b *= 2) {
    const auto t = op_time("collective", {{"gpu", inst.gpu}, {"op", "all-reduce"}, {"gpus", n}, {"nodes", nodes},
                                          {"instance", inst.name}, {"bytes", b}});
    const double s = t["seconds"].get<double>();
    const double algbw = s > 0 ? b / s : 0;
    rows.push_back({{"bytes", b}, {"size", human_size(b)}, {"time_us", s * 1e6}, {"algbw_gb_per_s", algbw / 1e9},
                    {"busbw_gb_per_s", algbw * 2.0 * (n - 1) / n / 1e9}, {"source", t.value("source", "")}});
  }
  auto size_arg = [](double b) { return b < 1024 ? fmt(b, 0) : human_size(b); };
  const std::string bin = "/opt/nccl-tests/build/all_reduce_perf -b " + size_arg(min_bytes) + " -e " + size_arg(max_bytes) +
                          " -f 2 -g 1 -c 1 -n 100";
  std::string cmd = "mpirun --allow-run-as-root -np " + std::to_string(n) + " -N " + std::to_string(inst.gpus) +
                    " --bind-to none -x FI_PROVIDER=efa -x FI_EFA_USE_DEVICE_RDMA=1 -x NCCL_DEBUG=WARN -x LD_LIBRARY_PATH " + bin;
  return {{"instance", inst.name}, {"gpu", inst.gpu}, {"nodes", nodes}, {"gpus", n},
          {"efa_devices_per_node", inst.efa_devices}, {"command", cmd},
          {"busbw_definition", "busbw = algbw x 2(n-1)/n, algbw = bytes / time (nccl-tests)"}, {"rows", rows}};
}

std::string nccl_table(const nlohmann::json& j) {
  std::string s = "NCCL all-reduce on " + std::to_string(j["nodes"].get<int>()) + " x " + j["instance"].get<std::string>() + " (" +
                  std::to_string(j["gpus"].get<int>()) + " x " + j["gpu"].get<std::string>() + "), as servesim expects it\n";
  s += "Run: " + j["command"].get<std::string>() + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%12s %8s %12s %14s %14s  %s\n", "bytes", "size", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "source");
  s += line;
  for (const auto& r : j["rows"]) {
    std::snprintf(line, sizeof line, "%12.0f %8s %12.1f %14.2f %14.2f  %s\n", r["bytes"].get<double>(),
                  r["size"].get<std::string>().c_str(), r["time_us"].get<double>(), r["algbw_gb_per_s"].get<double>(),
                  r["busbw_gb_per_s"].get<double>(), r["source"].get<std::string>().c_str());
    s += line;
  }
  return s;
}

namespace {

constexpr std::int64_t kMaxCount = 1000000000;   // copies, workers, nodes, clients: at most 10^9

// A deployment description as emit reads it, checked before anything is written: a hand-edited
// or programmatic one (Python's emit()) gets one line naming the field, never a script with
// negative clients or a zero TP size.
void check_deployment(const nlohmann::json& d, bool swept = true) {
  if (!d.is_object()) throw Error("emit", "deployment", "expected an object (a result's \"deployment\"), got " + brief(d));
  const JsonReader r(d, "emit", "deployment");
  auto whole = [](const JsonReader& x, const char* k, std::int64_t lo, std::int64_t hi) {
    if (!x.json().contains(k) || !x.json()[k].is_number_integer())
      x.fail(k, "expected a whole number in " + std::to_string(lo) + ".." + std::to_string(hi) +
                    (x.json().contains(k) ? ", got " + brief(x.json()[k]) : std::string(" (missing)")));
    const std::int64_t v = x.json()[k].is_number_unsigned() && x.json()[k].get<std::uint64_t>() > std::uint64_t(INT64_MAX)
                               ? INT64_MAX : x.json()[k].get<std::int64_t>();
    if (v < lo || v > hi) x.fail(k, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + brief(x.json()[k]));
    return v;
  };
  auto text_of = [](const JsonReader& x, const char* k) {
    if (!x.json().contains(k) || !x.json()[k].is_string()) x.fail(k, "expected a string");
    const std::string v = x.json()[k].get<std::string>();
    if (v.empty()) x.fail(k, "must not be empty");
    return v;
  };
  for (const char* k : {"name", "model", "precision", "kv_cache_dtype", "kind", "describe"}) text_of(r, k);
  if (d["kind"] != "aggregated" && d["kind"] != "disaggregated") r.fail("kind", "expected \"aggregated\" or \"disaggregated\"");
  whole(r, "max_model_len", 2, 100000000);
  whole(r, "max_num_seqs", 1, 1048576);
  whole(r, "max_num_batched_tokens", 1, 100000000);
  const double util = r.number("gpu_memory_utilization");
  // 0: SGLang's own mem_fraction_static heuristic (its profiles' default), as the engine profiles allow.
  if (!(util > 0 && util <= 1) && !(util == 0 && d.value("engine_kind", std::string()) == "sglang"))
    r.fail("gpu_memory_utilization", "must be in (0, 1] (0: SGLang's heuristic, engine_kind sglang only)");
  const std::int64_t copies = whole(r, "copies", 1, kMaxCount);
  whole(r, "isl", 1, 100000000);
  whole(r, "osl", 1, 100000000);
  const auto workers = r.array("workers");
  if (workers.empty()) r.fail("workers", "must list at least one worker role");
  for (const auto& w : workers) {
    const std::string role = text_of(w, "role");
    if (role != "aggregated" && role != "prefill" && role != "decode" && role != "encode")
      w.fail("role", "expected aggregated, prefill, decode or encode, got " + brief(w.json()["role"]));
    whole(w, "count", 1, kMaxCount);
    std::int64_t gpus = whole(w, "tp", 1, 1024);
    for (const char* k : {"pp", "ep", "dp"})
      if (w.has(k)) gpus *= k[0] == 'e' ? 1 : whole(w, k, 1, 1024);
    if (gpus > 65536) w.fail("tp", "tp x pp x dp must be at most 65536 GPUs per worker");
    hw::Catalog::global().instance(text_of(w, "instance"));   // a known instance (whose name is file-safe)
    text_of(w, "gpu");
  }
  const JsonReader inst = r.object("instances");
  if (inst.json().empty()) r.fail("instances", "must name at least one instance type");
  for (const auto& [k, v] : inst.json().items()) {
    hw::Catalog::global().instance(k);
    whole(inst, k.c_str(), 1, kMaxCount);
  }
  if (r.has("shared_prefix_tokens")) whole(r, "shared_prefix_tokens", 0, std::int64_t{1} << 30);
  if (r.has("calibration")) text_of(r, "calibration");   // a profile's file name, as a scenario names it
  if (r.has("checkpoint") && text_of(r, "checkpoint") != "bf16")   // vLLM quantizes a BF16 checkpoint on load
    r.fail("checkpoint", "expected \"bf16\" (the checkpoint vLLM quantizes as it loads), got " + brief(d["checkpoint"]));
  if (r.has("checkpoint") && d["precision"] != "fp8")
    r.fail("checkpoint", "applies to an fp8 deployment (vLLM's --quantization fp8 on a BF16 checkpoint)");
  if (r.has("enable_prefix_caching") && !d["enable_prefix_caching"].is_boolean())
    r.fail("enable_prefix_caching", "expected true or false, got " + brief(d["enable_prefix_caching"]));
  if (r.has("num_speculative_tokens")) {
    whole(r, "num_speculative_tokens", 0, 16);
    if (r.has("mtp_acceptance"))
      for (const auto& v : d["mtp_acceptance"].is_array() ? d["mtp_acceptance"] : nlohmann::json::array({d["mtp_acceptance"]}))
        if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1))
          r.fail("mtp_acceptance", "expected acceptance rates in [0, 1], got " + brief(v));
  }
  if (!swept) return;   // the planner's deployment: no predicted concurrency sweep
  // Open loop (predicted_axis "copies"): the predicted rows are copy counts sharing the target rate
  // (rate_per_copy); closed loop: client counts per copy, with the swept list in `concurrency`.
  const bool by_copies = d.value("predicted_axis", std::string()) == "copies";
  if (by_copies) {
    const double rate = r.number("rate_per_copy");
    if (!(rate > 0) || !std::isfinite(rate)) r.fail("rate_per_copy", "must be a request rate > 0");
  } else {
    const auto conc = r.json().contains("concurrency") && r.json()["concurrency"].is_array() ? r.json()["concurrency"] : nlohmann::json();
    if (!conc.is_array() || conc.empty()) r.fail("concurrency", "expected a non-empty array of client counts");
    for (const auto& c : conc)
      if (!c.is_number_integer() || c.get<std::int64_t>() < 1 || c.get<std::int64_t>() > 1000000)
        r.fail("concurrency", "expected client counts in 1..1000000, got " + brief(c));
    if (double(conc.back().get<std::int64_t>()) * double(copies) > double(kMaxCount))
      r.fail("copies", "clients x copies exceed 10^9");
  }
  if (r.has("images"))
    for (const auto& im : r.array("images"))
      for (const char* k : {"width", "height", "count"}) whole(im, k, 1, 100000);
  const JsonReader p = r.object("predicted");
  const char* axis = by_copies ? "copies" : "concurrency";
  const std::int64_t most = by_copies ? kMaxCount : 1000000;
  const std::size_t n = p.has(axis) && p.json()[axis].is_array() ? p.json()[axis].size() : 0;
  if (n == 0) p.fail(axis, by_copies ? "expected the copy counts the prediction tried" : "expected the predicted sweep's client counts");
  for (const auto& c : p.json()[axis])
    if (!c.is_number_integer() || c.get<std::int64_t>() < 1 || c.get<std::int64_t>() > most)
      p.fail(axis, std::string(by_copies ? "expected copy counts" : "expected client counts") + " in 1.." + std::to_string(most) +
                       ", got " + brief(c));
  for (const char* k : {"ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "output_tps",
                        "output_tps_per_gpu", "output_tps_per_user"}) {
    if (!p.has(k) || !p.json()[k].is_array() || p.json()[k].size() != n)
      p.fail(k, "expected an array of " + std::to_string(n) + " numbers (one per predicted point)");
    for (const auto& v : p.json()[k])
      if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
        p.fail(k, "expected finite numbers >= 0, got " + brief(v));
  }
}

// One copy of the deployment as a scenario `simulate --scenario` re-runs: the topology with each
// role's TP, attention DP and EP, the engine knobs, and the traffic at one copy's operating point
// (open loop: its share of the rate; closed loop: its highest swept client count).
// whole: every copy at the whole rate (an open-loop plan's deployment as it is deployed, behind
// one router); else one copy at its share.
nlohmann::json copy_scenario(const nlohmann::json& d, bool whole = false) {
  const std::int64_t copies = whole ? 1 : std::max<std::int64_t>(1, d["copies"].get<std::int64_t>());
  const double share = whole ? double(std::max<std::int64_t>(1, d["copies"].get<std::int64_t>())) : 1.0;
  const nlohmann::json* agg = nullptr;
  const nlohmann::json *pre = nullptr, *dec = nullptr, *enc = nullptr;
  for (const auto& w : d["workers"]) {
    const std::string role = w["role"];
    (role == "aggregated" ? agg : role == "prefill" ? pre : role == "decode" ? dec : enc) = &w;
  }
  const nlohmann::json& main = agg ? *agg : *dec;
  nlohmann::json s;
  s["model"] = d["model"];
  s["gpu"] = main["gpu"];
  s["precision"] = d["precision"];
  s["kv_cache_dtype"] = d["kv_cache_dtype"];
  s["tensor_parallel_size"] = main["tp"];
  if (main["pp"].get<int>() > 1) s["pipeline_parallel_size"] = main["pp"];
  if (main["dp"].get<int>() > 1) s["data_parallel_size"] = main["dp"];
  if (main["ep"].get<int>() > 1) s["expert_parallel_size"] = main["ep"];
  if (d.contains("engine")) s["engine_profile"] = d["engine"];
  s["engine"] = {{"max_num_seqs", d["max_num_seqs"]}, {"max_num_batched_tokens", d["max_num_batched_tokens"]}};
  if (d.contains("max_model_len")) s["engine"]["max_model_len"] = d["max_model_len"];   // the prediction's context (else: the model's maximum)
  if (d.contains("enable_prefix_caching") && d["enable_prefix_caching"].is_boolean())
    s["engine"]["enable_prefix_caching"] = d["enable_prefix_caching"];
  if (d.value("num_speculative_tokens", 0) > 0) {   // MTP as predicted
    s["engine"]["num_speculative_tokens"] = d["num_speculative_tokens"];
    if (d.contains("mtp_acceptance")) s["engine"]["acceptance_rate"] = d["mtp_acceptance"];
  }
  if (d.contains("router")) s["router"] = d["router"];
  if (d.contains("calibration")) s["calibration"] = d["calibration"];   // the profile the prediction ran with
  nlohmann::json t = {{"kind", agg ? "agg" : "disagg"}, {"instance", main["instance"]}};
  if (agg) {
    t["replicas"] = (*agg)["count"].get<std::int64_t>() / copies;
  } else {
    t["instance"] = (*pre)["instance"];
    t["prefill_workers"] = (*pre)["count"].get<std::int64_t>() / copies;
    t["prefill_tp"] = (*pre)["tp"];
    t["decode_workers"] = (*dec)["count"].get<std::int64_t>() / copies;
    t["decode_tp"] = (*dec)["tp"];
    for (const auto& [role, w] : {std::pair<const char*, const nlohmann::json*>{"prefill", pre}, {"decode", dec}}) {
      t[std::string(role) + "_dp"] = (*w)["dp"];   // each role's own, never the other's (the scenario's are decode's)
      t[std::string(role) + "_ep"] = (*w)["ep"];
    }
    if ((*dec)["instance"] != (*pre)["instance"]) t["decode_instance"] = (*dec)["instance"];
    if (enc) t["encode_workers"] = (*enc)["count"].get<std::int64_t>() / copies, t["encode_tp"] = (*enc)["tp"];
  }
  s["topology"] = t;
  nlohmann::json w = {{"isl", d["isl"]}, {"osl", d["osl"]}, {"seed", d.value("seed", 0)}};
  if (d.contains("shared_prefix_tokens") && d["shared_prefix_tokens"].is_number_integer())
    w["shared_prefix_tokens"] = d["shared_prefix_tokens"];
  if (d.contains("rate_per_copy")) {
    const double rate = d["rate_per_copy"].get<double>() * share;
    w["request_rate"] = rate;
    w["arrival"] = d.value("arrival", std::string("poisson"));
    w["warmup_requests"] = std::max<std::int64_t>(100, std::int64_t(std::ceil(10 * rate)));
    w["requests"] = std::max<std::int64_t>(1000, std::int64_t(std::ceil(60 * rate)));
  } else {
    const std::int64_t c = d["concurrency"].back().get<std::int64_t>() * std::int64_t(share);   // the whole fleet: every copy's clients
    w["concurrency"] = c;
    w["warmup_requests"] = 32 * c;
    w["requests"] = std::max<std::int64_t>(1000, 8 * c);
  }
  if (d.contains("images") && !d["images"].empty()) {
    w["multimodal"] = {{"images", d["images"]}};
    if (d.value("image_fraction", 1.0) < 1) w["multimodal"]["fraction"] = d["image_fraction"];
  }
  s["workload"] = w;
  return s;
}

// The files servesim writes into an --emit folder (an earlier set there is replaced whole).
bool is_artefact(const std::string& f) {
  return f == "vllm-serve.sh" || f == "sglang-launch.sh" || f == "trtllm-serve.sh" || f == "scenario.json" ||
         f == "scenario-all-copies.json" ||
         f == "dynamo-deployment.yaml" || f == "aiperf-sweep.sh" || f == "predicted.csv" || f == "deployment.json" ||
         f == "planner.json" ||
         (f.rfind("trtllm-", 0) == 0 && f.ends_with(".yaml")) ||
         (f.rfind("nccl-", 0) == 0 && (f.ends_with(".sh") || f.ends_with("-expected.csv")));
}

// Whether `path` is the index.json of a nested emitted set (recommend --emit).
bool is_emitted_index(const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(read_input_file(path, 1 << 24));
    return j.is_object() && j.contains("emitted_by") && j.contains("folders");
  } catch (const std::exception&) {
    return false;
  }
}

// Whether `path` is the deployment.json of an emitted set: servesim's deployment description.
bool is_emitted_deployment(const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(read_input_file(path, 1 << 24));
    return j.is_object() && j.contains("workers") && j.contains("describe") && j.contains("copies");
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

DeploymentSet::DeploymentSet(std::string flag) : flag_(std::move(flag)) {}

DeploymentSet::~DeploymentSet() {
  if (committed_) return;
  files_.discard();   // temporaries first, then the folders this set created (only if left empty)
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) std::filesystem::remove(*it, ec);
}

void DeploymentSet::prepare(const std::string& dir, bool nested) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw Error(flag_, "", "give a folder name");
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (fs::is_symlink(st) && !fs::exists(fs::status(dir, ec)))
    throw Error(flag_, "", dir + ": is a symbolic link to a missing target (" + fs::read_symlink(dir, ec).string() +
                               "); give a new or empty folder, or create the target first");
  if (fs::exists(st) && !fs::is_directory(fs::status(dir, ec)))
    throw Error(flag_, "", dir + ": is a file, not a folder; give a new or empty folder");
  if (!fs::exists(st)) {
    // Create the missing folders one by one, remembering them for the rollback.
    std::vector<fs::path> missing;
    for (fs::path p = fs::path(dir); !p.empty() && !fs::exists(fs::symlink_status(p, ec)); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (!fs::create_directory(*it, ec) && ec)
        throw Error(flag_, "", "cannot create the folder " + it->string() + ": " + ec.message());
      created_.push_back(it->string());
    }
    return;
  }
  if (::access(dir.c_str(), W_OK) != 0) throw Error(flag_, "", dir + ": folder not writable (" + std::strerror(errno) + ")");
  // An existing folder: empty, or an earlier emitted set (whose stale files go on commit). A
  // folder holding anything else is refused, so no user file sits beside a deployment it is not part of.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (nested && e.is_directory(ec)) {   // recommend / plan: the subfolders are checked one by one
      // An earlier emitted set's folder this run may not rewrite: removed on commit when it holds
      // nothing but servesim's files beside its deployment.json.
      if (!e.is_symlink(ec) && is_emitted_deployment((e.path() / "deployment.json").string())) stale_dirs_.push_back(e.path().string());
      continue;
    }
    if (nested && f == "index.json" && is_emitted_index(e.path().string())) {
      stale_.push_back(e.path().string());
      continue;
    }
    if (!is_artefact(f) && !(f.size() > 1 && f[0] == '.' && f.find(".tmp.") != std::string::npos))
      throw Error(flag_, "", dir + ": the folder holds '" + f + "', which servesim did not write; give a new or empty folder");
    stale_.push_back(e.path().string());
  }
  if (ec) throw Error(flag_, "", dir + ": cannot list the folder: " + ec.message());
  // Files named like ours are an earlier set only beside its deployment.json: a user's own
  // vllm-serve.sh or scenario.json in the folder is never replaced.
  std::string named;
  for (const auto& f : stale_) {
    const std::string n = fs::path(f).filename().string();
    if (n[0] != '.' && n != "index.json") named = n;   // a nested set's index.json was checked above
  }
  if (!named.empty() && !is_emitted_deployment((fs::path(dir) / "deployment.json").string()))
    throw Error(flag_, "", dir + ": the folder holds '" + named +
                               "', with no deployment.json of an earlier emitted set beside it: servesim did not write it; give a new or empty folder");
}

void DeploymentSet::put(const std::string& dir, const std::string& name, const std::string& text, bool exec) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  files_.write(path, text);
  if (exec) exec_.push_back(path);
  stale_.erase(std::remove(stale_.begin(), stale_.end(), path), stale_.end());
  paths_.push_back(path);
}

void DeploymentSet::put_engine(const nlohmann::json& d, const std::string& dir) {
  const std::string kind = engine_kind(d);
  if (kind == "sglang") {
    put(dir, "sglang-launch.sh", sglang_launch_script(d), true);
  } else if (kind == "trtllm") {
    put(dir, "trtllm-serve.sh", trtllm_serve_script(d), true);
    for (const auto& w : d["workers"]) put(dir, "trtllm-" + w["role"].get<std::string>() + ".yaml", trtllm_options(d, w));
  } else {
    put(dir, "vllm-serve.sh", vllm_serve_script(d), true);
  }
}

void DeploymentSet::put_index(const std::string& dir, const nlohmann::json& index) {
  put(dir, "index.json", index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void DeploymentSet::add(const nlohmann::json& d, const std::string& dir) {
  check_deployment(d);
  const auto& cat = hw::Catalog::global();
  prepare(dir, false);
  added_dirs_.push_back(std::filesystem::path(dir).lexically_normal().string());
  auto put = [&](const std::string& name, const std::string& text, bool exec = false) { this->put(dir, name, text, exec); };
  put_engine(d, dir);
  put("dynamo-deployment.yaml", dynamo_manifest(d));
  put("aiperf-sweep.sh", aiperf_script(d), true);
  put("predicted.csv", predicted_csv(d));
  // One cluster check per instance type, over every node of that type the deployment uses (at
  // most 1024 nodes, nccl-tests' own practical limit and `servesim nccl`'s).
  for (const auto& [name, n] : d["instances"].items()) {
    const std::string inst = cat.instance(name).name;   // the catalogue's (file-safe) name
    const std::int64_t all = n.get<std::int64_t>();
    const int nodes = int(std::min<std::int64_t>(all, 1024));
    const auto t = nccl(inst, nodes);
    put("nccl-" + inst + ".sh", "#!/usr/bin/env bash\n# Cluster check: NCCL all-reduce over " + std::to_string(t["gpus"].get<int>()) +
                                    " GPUs and EFA adapters of " + std::to_string(nodes) + " x " + inst +
                                    (all > nodes ? " (of the deployment's " + std::to_string(all) + ")" : std::string()) +
                                    "; compare busbw with nccl-" + inst + "-expected.csv\nset -euo pipefail\n" +
                                    t["command"].get<std::string>() + "\n", true);
    std::string csv = "bytes,size,time_us,algbw_gb_per_s,busbw_gb_per_s,source\n";
    for (const auto& r : t["rows"])
      csv += fmt(r["bytes"].get<double>(), 0) + "," + r["size"].get<std::string>() + "," + fmt(r["time_us"].get<double>(), 2) + "," +
             fmt(r["algbw_gb_per_s"].get<double>(), 3) + "," + fmt(r["busbw_gb_per_s"].get<double>(), 3) + "," +
             r["source"].get<std::string>() + "\n";
    put("nccl-" + inst + "-expected.csv", csv);
  }
  put("deployment.json", d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  const nlohmann::json sc = copy_scenario(d);
  if (!sc.is_null()) put("scenario.json", sc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!sc.is_null() && d["copies"].get<std::int64_t>() > 1)   // the whole fleet too (what aiperf-sweep.sh sends to)
    put("scenario-all-copies.json", copy_scenario(d, true).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void DeploymentSet::add_planner(const nlohmann::json& d, const nlohmann::json& planner, const std::string& dir) {
  check_deployment(d, false);
  if (!planner.is_object() || !planner.contains("roles") || !planner["roles"].is_array() || planner["roles"].empty())
    throw Error("emit", "planner", "expected the planner's rule and per-role bounds");
  prepare(dir, false);
  put_engine(d, dir);
  put(dir, "dynamo-deployment.yaml", dynamo_manifest(d, planner));
  put(dir, "planner.json", planner.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  put(dir, "deployment.json", d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

nlohmann::json DeploymentSet::commit() {
  // An earlier set's folder this set does not rewrite goes on commit; one holding files servesim did
  // not write (measurements from its aiperf-sweep.sh, notes) would stay beside the new set as if it
  // were part of it: refused before anything is written.
  for (const auto& d : stale_dirs_) {
    if (std::find(added_dirs_.begin(), added_dirs_.end(), std::filesystem::path(d).lexically_normal().string()) != added_dirs_.end())
      continue;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec))
      if (!e.is_regular_file(ec) || !is_artefact(e.path().filename().string()))
        throw Error(flag_, "", d + ": an earlier emitted deployment this set does not replace holds '" + e.path().filename().string() +
                                   "', which servesim did not write, so it would stay beside the new set; move it out or give a new folder");
  }
  // Executable bits before the rename, so a script never appears without them.
  files_.commit();
  std::error_code ec;
  for (const auto& p : exec_)
    std::filesystem::permissions(p, std::filesystem::perms::owner_exec | std::filesystem::perms::group_exec |
                                        std::filesystem::perms::others_exec, std::filesystem::perm_options::add, ec);
  for (const auto& p : stale_) std::filesystem::remove(p, ec);   // the earlier set's files this one does not rewrite
  for (const auto& d : stale_dirs_) {   // an earlier set's folders this one does not rewrite: only servesim's files go
    if (std::find(added_dirs_.begin(), added_dirs_.end(), std::filesystem::path(d).lexically_normal().string()) != added_dirs_.end())
      continue;
    bool ours = true;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) ours = ours && e.is_regular_file(ec) && is_artefact(e.path().filename().string());
    if (!ours || ec) continue;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) std::filesystem::remove(e.path(), ec);
    std::filesystem::remove(d, ec);
  }
  committed_ = true;
  return paths_;
}

nlohmann::json emit_deployment(const nlohmann::json& d, const std::string& dir) {
  DeploymentSet set;
  set.add(d, dir);
  return set.commit();
}

}  // namespace servesim::api
