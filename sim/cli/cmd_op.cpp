// `servesim op ...`: the predicted GPU time of one kernel or collective, with its provenance.
// Flags map one to one onto api::op_time's arguments, so the CLI and Python return the same JSON.
#include <map>
#include <memory>

#include "common/table.hpp"
#include "sim/api/api.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

struct OpOpts {
  Format format = Format::table;
  std::map<std::string, std::string> text;  // string-valued flags given (gpu, dtype, op, instance)
  std::map<std::string, double> number;     // numeric flags given
};

void run_op(const std::string& kind, const OpOpts& o) {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [k, v] : o.text) args[k] = v;
  for (const auto& [k, v] : o.number) args[k] = v;
  const auto j = api::op_time(kind, args);
  const double s = j["seconds"].get<double>();
  Table tab({"op", "gpu", "time us", "bound", "source", "TFLOP/s", "GB/s", "kernel", "table"});
  tab.add_row({kind, j["gpu"].get<std::string>(), fixed(s * 1e6, 2), j["bound"].get<std::string>(),
               j["source"].get<std::string>(), fixed(s > 0 ? j["flops"].get<double>() / s / 1e12 : 0, 1),
               fixed(s > 0 ? j["bytes"].get<double>() / s / 1e9 : 0, 1), j.value("kernel", std::string()),
               j.value("table", std::string())});
  std::string cold;
  if (const double c = j.value("cold_weights_seconds", 0.0); c > 0)
    cold = "includes " + fixed(c * 1e6, 2) + " us to read its weights (or KV) cold: the kernel table timed them resident "
           "in L2 (hwmodels/README.md, Cold weights)\n";
  emit(o.format, j, defaults_line(j["defaults"]) + tab.render() + cold + "provenance: " + j["provenance"].get<std::string>() + "\n");
}

// One subcommand: `flags` are (flag name without dashes, help, required?); a flag `x-y` is the
// API argument `x_y`. String flags: gpu, dtype, op, instance; every other flag is a number.
void add_op(CLI::App* op, const std::string& kind, const char* help,
            std::vector<std::tuple<std::string, std::string, bool>> flags) {
  auto o = std::make_shared<OpOpts>();
  auto* c = op->add_subcommand(kind, help);
  flags.insert(flags.begin(), {"gpu", "GPU name (default h200)", false});
  flags.push_back({"engine", "engine profile whose kernel tables time it, as simulate --engine takes (vllm-0.14, ...; default: vLLM 0.24's)", false});
  for (const auto& [flag, what, required] : flags) {
    std::string key = flag;
    for (char& ch : key) if (ch == '-') ch = '_';
    CLI::Option* opt;
    if (key == "gpu" || key == "dtype" || key == "op" || key == "instance" || key == "kv_dtype" || key == "engine")
      opt = c->add_option_function<std::string>("--" + flag, [o, key](const std::string& v) { o->text[key] = v; }, what);
    else
      opt = c->add_option_function<double>("--" + flag, [o, key](const double& v) { o->number[key] = v; }, what);
    if (required) opt->required();
  }
  add_format_option(*c, o->format);
  c->callback([o, kind] { run_op(kind, *o); });
}

}  // namespace

void add_op_commands(CLI::App& app) {
  auto* op = app.add_subcommand("op", "Predicted GPU time of one kernel or collective");
  op->require_subcommand(1);
  add_op(op, "gemm", "Dense GEMM C[m,n] = A[m,k] B[k,n]",
         {{"m", "rows (tokens)", true}, {"n", "output features", true}, {"k", "input features", true},
          {"dtype", "bf16|fp8|fp8_block|nvfp4|mxfp4|int4|int8 (weights; default bf16)", false}});
  add_op(op, "grouped-gemm", "Grouped MoE GEMM: T routed token-slots over E experts",
         {{"experts", "local experts", true}, {"tokens", "routed token-slots", true}, {"n", "per-expert output features", true},
          {"k", "per-expert input features", true}, {"dtype", "bf16|fp8|fp8_block|nvfp4|mxfp4|int4|int8 (weights; default bf16)", false},
          {"skew", "power-law routing exponent (0 = tokens spread evenly)", false}});
  const std::vector<std::tuple<std::string, std::string, bool>> heads = {
      {"heads", "query heads per GPU", true}, {"kv-heads", "KV heads per GPU", true}, {"head-dim", "head dimension", true}};
  auto with = [](std::vector<std::tuple<std::string, std::string, bool>> a,
                 const std::vector<std::tuple<std::string, std::string, bool>>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<std::tuple<std::string, std::string, bool>> kv = {
      {"kv-dtype", "KV cache dtype: bf16 | fp8 (default bf16)", false},
      {"window", "sliding window in tokens (0 = full attention)", false}};
  add_op(op, "attention-prefill", "Causal attention over B sequences of S new tokens (vLLM's backend on this GPU)",
         with(with({{"batch", "sequences", true}, {"seq", "new tokens per sequence", true}}, heads), kv));
  add_op(op, "attention-decode", "One query token per sequence against C cached tokens (vLLM's backend on this GPU)",
         with(with({{"batch", "sequences", true}, {"context", "cached tokens per sequence", true}}, heads), kv));
  add_op(op, "moe", "One fused MoE layer on one GPU (vLLM's kernel for the precision on this GPU)",
         {{"tokens", "tokens entering the layer on this GPU", true}, {"hidden", "expert input/output width", true},
          {"inter", "per-expert intermediate size (global)", true}, {"topk", "experts per token", true},
          {"experts", "routed experts (global)", true}, {"tp", "MoE tensor-parallel size (default 1)", false},
          {"ep", "expert-parallel size (default 1)", false}, {"dtype", "bf16|fp8|fp8_block|nvfp4|mxfp4|int4|int8 (weights; default bf16)", false},
          {"skew", "power-law exponent of expert popularity (0 = balanced)", false},
          {"gated", "1 = SwiGLU experts (default), 0 = non-gated (ReLU^2)", false}});
  add_op(op, "tp-all-reduce", "Tensor-parallel all-reduce as vLLM runs it (custom / symmetric memory / NCCL)",
         {{"gpus", "GPUs in the TP group", true}, {"bytes", "bytes reduced", true}});
  const std::vector<std::tuple<std::string, std::string, bool>> mixer = {
      {"heads", "Mamba heads per GPU", true}, {"head-dim", "head dimension", true},
      {"d-state", "SSM state size", true}, {"groups", "B/C groups per GPU", true}};
  add_op(op, "mamba-scan", "Mamba-2 chunked SSD scan (prefill)",
         with({{"batch", "sequences", true}, {"seqlen", "tokens per sequence", true}}, mixer));
  add_op(op, "mamba-step", "Mamba-2 single-token state update (decode)", with({{"batch", "sequences", true}}, mixer));
  add_op(op, "collective", "NCCL collective over NVLink (and EFA across nodes)",
         {{"op", "all-reduce|all-gather|reduce-scatter|all-to-all|send-recv", true},
          {"gpus", "GPUs in the group", true},
          {"bytes", "message size as nccl-tests counts it (all-gather: the full output)", true},
          {"nodes", "nodes the GPUs span (> 1 crosses EFA)", false},
          {"instance", "instance type (required with --nodes > 1)", false}});
}

}  // namespace servesim::cli
