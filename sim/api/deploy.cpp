// api: the artefacts that stand a planned configuration up and check it — `vllm serve`
// arguments per worker, a Dynamo (DynamoGraphDeployment) manifest for Kubernetes, the aiperf
// sweep that reproduces the predicted curve, and the nccl-tests all-reduce check with the bus
// bandwidth servesim expects (`servesim nccl`). Files are written atomically.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
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

const char* kNixl = R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})";

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
  if (d["kv_cache_dtype"] == "fp8") a.insert(a.end(), {"--kv-cache-dtype", "fp8"});
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
  std::string s = "#!/usr/bin/env bash\n# vLLM engine of every worker of the planned deployment (" + d["describe"].get<std::string>() +
                  ").\n# MODEL: the " + d["precision"].get<std::string>() +
                  " checkpoint of " + d["model"].get<std::string>() + " (e.g. on the shared FSx for Lustre volume).\n"
                  "set -euo pipefail\nMODEL=${MODEL:-/fsx/models/" + d["model"].get<std::string>() + "-" +
                  d["precision"].get<std::string>() + "}\n";
  for (const auto& w : d["workers"]) {
    const std::string role = w["role"];
    const Pod p = pod_of(w);
    s += "\n# " + role + ": " + std::to_string(w["count"].get<int>()) + " worker(s), each " + std::to_string(p.gpus) +
         " x " + w["gpu"].get<std::string>() + " on " + w["instance"].get<std::string>() +
         (p.nodes > 1 ? " (" + std::to_string(p.nodes) + " nodes)" : "") + "\n";
    std::vector<std::string> a = engine_args(d, w);
    if (role == "prefill" || role == "decode") a.insert(a.end(), {"--kv-transfer-config", kNixl});
    if (role == "encode") {
      s += "# (Dynamo's encode worker runs the vision encoder only: python3 -m dynamo.vllm --multimodal-encode-worker)\n";
    }
    s += "vllm serve \"$MODEL\" " + join_args(a) + "\n";
  }
  return s;
}

// ---- SGLang and TensorRT-LLM workers (the deployment's "engine_kind") ---------------------------

std::string engine_kind(const nlohmann::json& d) { return d.value("engine_kind", std::string("vllm")); }

// `python -m sglang.launch_server` flags of one worker role.
std::vector<std::string> sglang_args(const nlohmann::json& d, const nlohmann::json& w) {
  std::vector<std::string> a = {"--served-model-name", d["model"].get<std::string>(), "--tp-size", std::to_string(w["tp"].get<int>())};
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
  a.push_back("--trust-remote-code");
  return a;
}

// dynamo.trtllm / trtllm-serve flags of one worker role (the dynamo worker spells them with dashes).
std::vector<std::string> trtllm_args(const nlohmann::json& d, const nlohmann::json& w, bool dynamo) {
  auto flag = [&](std::string s) {
    if (dynamo) std::replace(s.begin(), s.end(), '_', '-');
    return s;
  };
  std::vector<std::string> a = {flag("--tp_size"), std::to_string(w["tp"].get<int>())};
  if (dynamo) a = {"--served-model-name", d["model"].get<std::string>(), "--tensor-parallel-size", std::to_string(w["tp"].get<int>())};
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
  if (k == "sglang") return {"nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.9.0", "dynamo.sglang", "SGLang", dynamo_sglang_args};
  if (k == "trtllm") return {"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.9.0", "dynamo.trtllm", "Trtllm", dynamo_trtllm_args};
  return {"nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.0", "dynamo.vllm", "Vllm", nullptr};
}

std::string dynamo_manifest(const nlohmann::json& d) {
  const std::string name = dns_name(d["name"].get<std::string>());
  const DynamoEngine eng = dynamo_engine(d);
  const std::string image = eng.image;
  nlohmann::json services = nlohmann::json::object();
  services["Frontend"] = {{"dynamoNamespace", name}, {"componentType", "frontend"}, {"replicas", 1},
                          {"extraPodSpec", {{"mainContainer", {{"image", image},
                                                                {"command", {"python3", "-m", "dynamo.frontend", "--http-port", "8000"}}}}}}};
  const bool disagg = d["kind"] == "disaggregated";
  for (const auto& w : d["workers"]) {
    const std::string role = w["role"];
    const Pod p = pod_of(w);
    std::vector<std::string> args = {"--model", "/fsx/models/" + d["model"].get<std::string>() + "-" + d["precision"].get<std::string>()};
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
    (void)disagg;
    // GPUs through the operator's resources; EFA adapters (an extended resource) on the container.
    nlohmann::json limits = nlohmann::json::object();
    if (p.efa > 0) limits["vpc.amazonaws.com/efa"] = std::to_string(p.efa);
    s["resources"] = {{"limits", {{"gpu", std::to_string(p.gpus_per_node)}}}};
    if (p.nodes > 1) s["multinode"] = {{"nodeCount", p.nodes}};
    nlohmann::json cmd = nlohmann::json::array({"python3", "-m", eng.module});
    s["extraPodSpec"] = {{"nodeSelector", {{"node.kubernetes.io/instance-type", w["instance"]}}},
                         {"mainContainer", {{"image", image}, {"command", cmd}, {"args", args},
                                            {"resources", {{"limits", limits}, {"requests", limits}}}}}};
    services[svc] = s;
  }
  nlohmann::json doc = {{"apiVersion", "nvidia.com/v1alpha1"},
                        {"kind", "DynamoGraphDeployment"},
                        {"metadata", {{"name", name}}},
                        {"spec", {{"services", services}}}};
  std::ostringstream o;
  o << "# Dynamo deployment of the planned configuration: " << d["describe"].get<std::string>() << "\n";
  o << "# " << d["kind"].get<std::string>() << "; " << d["copies"].get<int>() << " cop" << (d["copies"].get<int>() == 1 ? "y" : "ies")
    << " of the topology; workers per role below are totals. Weights are read from /fsx/models (FSx for Lustre PVC).\n";
  if (engine_kind(d) == "trtllm")
    o << "# The TRT-LLM workers read their LLM API options from /config/trtllm-<role>.yaml: mount the emitted\n"
      << "# trtllm-<role>.yaml files there (a ConfigMap).\n";
  if (d.value("vision", false) && !d.value("has_encode_workers", false))
    o << "# Vision model without encode workers: the " << (d["kind"] == "disaggregated" ? "prefill" : "aggregated")
      << " workers run the vision encoder.\n";
  yaml(o, doc, 0);
  return o.str();
}

std::string aiperf_script(const nlohmann::json& d) {
  const int copies = d["copies"].get<int>();
  std::string s = "#!/usr/bin/env bash\n# aiperf concurrency sweep that reproduces the predicted curve (predicted.csv) against the\n"
                  "# Dynamo frontend. Clients = clients of one copy x " + std::to_string(copies) +
                  " copies; the frontend spreads them over the copies.\n"
                  "# Then: servesim validate on the artefact folders closes the loop.\nset -euo pipefail\n"
                  "URL=${URL:-http://localhost:8000}\n";
  std::string conc;
  for (const auto& c : d["concurrency"]) conc += (conc.empty() ? "" : " ") + std::to_string(c.get<int>() * copies);
  s += "for C in " + conc + "; do\n  aiperf profile --model " + shell_quote(d["model"].get<std::string>()) +
       " --url \"$URL\" --endpoint-type chat --streaming \\\n"
       "    --isl " + std::to_string(d["isl"].get<std::int64_t>()) + " --isl-stddev 0 --osl " +
       std::to_string(d["osl"].get<std::int64_t>()) + " --osl-stddev 0 \\\n"
       "    --extra-inputs ignore_eos:true --extra-inputs '{\"nvext\":{\"ignore_eos\":true}}' \\\n";
  if (d.contains("images") && !d["images"].empty()) {
    const auto& im = d["images"][0];
    s += "    --image-width-mean " + std::to_string(im["width"].get<int>()) + " --image-height-mean " +
         std::to_string(im["height"].get<int>()) + " --batch-size-image " + std::to_string(im["count"].get<int>()) + " \\\n";
  }
  s += "    --concurrency \"$C\" --request-count $((C * 20)) --warmup-request-count $((C * 2)) --random-seed 100 \\\n"
       "    --artifact-dir \"artifacts/c$C\"\ndone\n";
  return s;
}

std::string predicted_csv(const nlohmann::json& d) {
  const auto& p = d["predicted"];
  const int copies = d["copies"].get<int>();
  std::string s = "clients,clients_per_copy,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,itl_p50_ms,itl_p90_ms,itl_p99_ms,output_tps,output_tps_per_gpu,output_tps_per_user\n";
  for (std::size_t i = 0; i < p["concurrency"].size(); ++i) {
    const int c = p["concurrency"][i].get<int>();
    s += std::to_string(c * copies) + "," + std::to_string(c);
    for (const char* k : {"ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms"})
      s += "," + fmt(p[k][i].get<double>(), 3);
    s += "," + fmt(p["output_tps"][i].get<double>() * copies, 1) + "," + fmt(p["output_tps_per_gpu"][i].get<double>(), 2) +
         "," + fmt(p["output_tps_per_user"][i].get<double>(), 2) + "\n";
  }
  return s;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) { write_file_atomic(path, text); }

nlohmann::json nccl(const std::string& instance, int nodes, double min_bytes, double max_bytes) {
  const auto& inst = hw::Catalog::global().instance(instance);
  if (nodes < 1 || nodes > 1024) throw Error("--nodes", "", "must be in 1..1024");
  if (!(min_bytes >= 1) || !(max_bytes >= min_bytes) || max_bytes > 64.0 * (1ull << 30))
    throw Error("--max-bytes", "", "need 1 <= min bytes <= max bytes <= 64 GiB");
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

nlohmann::json emit_deployment(const nlohmann::json& d, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error("--emit", "", "cannot create the folder " + dir);
  nlohmann::json files = nlohmann::json::array();
  auto put = [&](const std::string& name, const std::string& text, bool exec = false) {
    const std::string path = (fs::path(dir) / name).string();
    write_file_atomically(path, text);
    if (exec) fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
    files.push_back(path);
  };
  const std::string kind = engine_kind(d);
  if (kind == "sglang") {
    put("sglang-launch.sh", sglang_launch_script(d), true);
  } else if (kind == "trtllm") {
    put("trtllm-serve.sh", trtllm_serve_script(d), true);
    for (const auto& w : d["workers"]) put("trtllm-" + w["role"].get<std::string>() + ".yaml", trtllm_options(d, w));
  } else {
    put("vllm-serve.sh", vllm_serve_script(d), true);
  }
  put("dynamo-deployment.yaml", dynamo_manifest(d));
  put("aiperf-sweep.sh", aiperf_script(d), true);
  put("predicted.csv", predicted_csv(d));
  // One cluster check per instance type, over every node of that type the deployment uses.
  for (const auto& [inst, nodes] : d["instances"].items()) {
    const auto t = nccl(inst, nodes.get<int>());
    put("nccl-" + inst + ".sh", "#!/usr/bin/env bash\n# Cluster check: NCCL all-reduce over all " + std::to_string(t["gpus"].get<int>()) +
                                    " GPUs and EFA adapters of " + std::to_string(nodes.get<int>()) + " x " + inst +
                                    "; compare busbw with nccl-" + inst + "-expected.csv\nset -euo pipefail\n" +
                                    t["command"].get<std::string>() + "\n", true);
    std::string csv = "bytes,size,time_us,algbw_gb_per_s,busbw_gb_per_s,source\n";
    for (const auto& r : t["rows"])
      csv += fmt(r["bytes"].get<double>(), 0) + "," + r["size"].get<std::string>() + "," + fmt(r["time_us"].get<double>(), 2) + "," +
             fmt(r["algbw_gb_per_s"].get<double>(), 3) + "," + fmt(r["busbw_gb_per_s"].get<double>(), 3) + "," +
             r["source"].get<std::string>() + "\n";
    put("nccl-" + inst + "-expected.csv", csv);
  }
  put("deployment.json", d.dump(2) + "\n");
  return files;
}

}  // namespace servesim::api
