// `servesim op ...`: the predicted GPU time of one kernel or collective, with its provenance.
#include <cmath>

#include "common/error.hpp"
#include "common/table.hpp"
#include "hwmodels/kernel_model.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

struct OpOpts {
  std::string gpu = "h200";
  std::string dtype = "bf16";
  Format format = Format::table;
  std::int64_t m = 0, n = 0, k = 0, tokens = 0, seq = 0, context = 0, seqlen = 0;
  int experts = 0, batch = 1, heads = 0, kv_heads = 0, head_dim = 128, d_state = 128, groups = 1;
  double skew = 0;
  std::string op, instance;
  int gpus = 2, nodes = 1;
  double bytes = 0;
};

void emit_op(const OpOpts& o, const std::string& what, const hw::GpuSpec& gpu, const hw::OpTime& t,
             nlohmann::json shape) {
  const auto& km = hw::kernel_model(gpu);
  nlohmann::json j = {{"op", what},
                      {"gpu", gpu.name},
                      {"shape", shape},
                      {"seconds", t.seconds},
                      {"source", hw::to_string(t.source)},
                      {"bound", hw::to_string(t.bound)},
                      {"flops", t.flops},
                      {"bytes", t.bytes},
                      {"achieved_flops_per_s", t.seconds > 0 ? t.flops / t.seconds : 0.0},
                      {"achieved_bytes_per_s", t.seconds > 0 ? t.bytes / t.seconds : 0.0},
                      {"provenance", km.provenance()}};
  Table tab({"op", "gpu", "time us", "bound", "source", "TFLOP/s", "GB/s"});
  tab.add_row({what, gpu.name, fixed(t.seconds * 1e6, 2), std::string(hw::to_string(t.bound)),
               std::string(hw::to_string(t.source)), fixed(t.seconds > 0 ? t.flops / t.seconds / 1e12 : 0, 1),
               fixed(t.seconds > 0 ? t.bytes / t.seconds / 1e9 : 0, 1)});
  emit(o.format, j, tab.render() + "provenance: " + km.provenance() + "\n");
}

CLI::App* sub(CLI::App* op, const char* name, const char* help, std::shared_ptr<OpOpts> o) {
  auto* c = op->add_subcommand(name, help);
  c->add_option("--gpu", o->gpu, "GPU name (default h200)");
  add_format_option(*c, o->format);
  return c;
}

}  // namespace

void add_op_commands(CLI::App& app) {
  auto* op = app.add_subcommand("op", "Predicted GPU time of one kernel or collective");
  op->require_subcommand(1);
  auto o = std::make_shared<OpOpts>();

  auto* gemm = sub(op, "gemm", "Dense GEMM C[m,n] = A[m,k] B[k,n]", o);
  gemm->add_option("--m", o->m)->required();
  gemm->add_option("--n", o->n)->required();
  gemm->add_option("--k", o->k)->required();
  gemm->add_option("--dtype", o->dtype, "bf16|fp8|nvfp4 (weights)");
  gemm->callback([o] {
    const auto& g = hw::Catalog::global().gpu(o->gpu);
    auto p = hw::parse_precision(o->dtype, "--dtype");
    emit_op(*o, "gemm", g, hw::kernel_model(g).gemm(o->m, o->n, o->k, p),
            {{"m", o->m}, {"n", o->n}, {"k", o->k}, {"dtype", hw::to_string(p)}});
  });

  auto* gg = sub(op, "grouped-gemm", "Grouped MoE GEMM: T routed token-slots over E experts", o);
  gg->add_option("--experts", o->experts)->required();
  gg->add_option("--tokens", o->tokens)->required();
  gg->add_option("--n", o->n)->required();
  gg->add_option("--k", o->k)->required();
  gg->add_option("--dtype", o->dtype, "bf16|fp8|nvfp4 (weights)");
  gg->add_option("--skew", o->skew, "power-law routing exponent (0 = tokens spread evenly)");
  gg->callback([o] {
    const auto& g = hw::Catalog::global().gpu(o->gpu);
    auto p = hw::parse_precision(o->dtype, "--dtype");
    emit_op(*o, "grouped-gemm", g, hw::kernel_model(g).grouped_gemm(o->experts, o->tokens, o->n, o->k, p, o->skew),
            {{"experts", o->experts}, {"tokens", o->tokens}, {"n", o->n}, {"k", o->k}, {"dtype", hw::to_string(p)},
             {"skew", o->skew}});
  });

  auto attn = [&](const char* name, const char* help, bool prefill) {
    auto* c = sub(op, name, help, o);
    c->add_option("--batch", o->batch)->required();
    c->add_option(prefill ? "--seq" : "--context", prefill ? o->seq : o->context)->required();
    c->add_option("--heads", o->heads)->required();
    c->add_option("--kv-heads", o->kv_heads)->required();
    c->add_option("--head-dim", o->head_dim)->required();
    c->callback([o, prefill, name] {
      const auto& g = hw::Catalog::global().gpu(o->gpu);
      const auto& km = hw::kernel_model(g);
      auto t = prefill ? km.attention_prefill(o->batch, o->seq, o->heads, o->kv_heads, o->head_dim)
                       : km.attention_decode(o->batch, o->context, o->heads, o->kv_heads, o->head_dim);
      emit_op(*o, name, g, t, {{"batch", o->batch}, {prefill ? "seq" : "context", prefill ? o->seq : o->context},
                               {"heads", o->heads}, {"kv_heads", o->kv_heads}, {"head_dim", o->head_dim}});
    });
  };
  attn("attention-prefill", "Causal flash attention over B sequences of S new tokens", true);
  attn("attention-decode", "One query token per sequence against C cached tokens", false);

  auto mamba = [&](const char* name, const char* help, bool scan) {
    auto* c = sub(op, name, help, o);
    c->add_option("--batch", o->batch)->required();
    if (scan) c->add_option("--seqlen", o->seqlen)->required();
    c->add_option("--heads", o->heads, "Mamba heads per GPU")->required();
    c->add_option("--head-dim", o->head_dim)->required();
    c->add_option("--d-state", o->d_state)->required();
    c->add_option("--groups", o->groups, "B/C groups per GPU")->required();
    c->callback([o, scan, name] {
      const auto& g = hw::Catalog::global().gpu(o->gpu);
      const auto& km = hw::kernel_model(g);
      auto t = scan ? km.mamba_scan(o->batch, o->seqlen, o->heads, o->head_dim, o->d_state, o->groups)
                    : km.mamba_step(o->batch, o->heads, o->head_dim, o->d_state, o->groups);
      nlohmann::json shape = {{"batch", o->batch}, {"heads", o->heads}, {"head_dim", o->head_dim},
                              {"d_state", o->d_state}, {"groups", o->groups}};
      if (scan) shape["seqlen"] = o->seqlen;
      emit_op(*o, name, g, t, shape);
    });
  };
  mamba("mamba-scan", "Mamba-2 chunked SSD scan (prefill)", true);
  mamba("mamba-step", "Mamba-2 single-token state update (decode)", false);

  auto* coll = sub(op, "collective", "NCCL collective over NVLink (and EFA across nodes)", o);
  coll->add_option("--op", o->op, "all-reduce|all-gather|reduce-scatter|all-to-all|send-recv")->required();
  coll->add_option("--gpus", o->gpus, "GPUs in the group")->required();
  coll->add_option("--bytes", o->bytes, "Message size as nccl-tests counts it (all-gather: the full output)")->required();
  coll->add_option("--nodes", o->nodes, "Nodes the GPUs span (> 1 crosses EFA)");
  coll->add_option("--instance", o->instance, "Instance type (required with --nodes > 1)");
  coll->callback([o] {
    const auto& g = hw::Catalog::global().gpu(o->gpu);
    auto c = hw::parse_collective(o->op);
    const hw::InstanceSpec* inst = o->instance.empty() ? nullptr : &hw::Catalog::global().instance(o->instance);
    if (o->nodes > 1 && !inst) throw Error("--instance", "", "required when --nodes > 1");
    auto t = hw::kernel_model(g).collective(c, o->bytes, {o->gpus, o->nodes, inst});
    nlohmann::json shape = {{"op", hw::to_string(c)}, {"gpus", o->gpus}, {"nodes", o->nodes}, {"bytes", o->bytes}};
    if (inst) shape["instance"] = inst->name;
    emit_op(*o, "collective", g, t, shape);
  });
}

}  // namespace servesim::cli
