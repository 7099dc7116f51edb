// `servesim step`: one decode step and one prefill step of a replica, per layer kind, with what
// bounds each op and where its time comes from (data from sim/api, rendered here).
#include "common/table.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

void add_rows(Table& t, const std::string& step, const nlohmann::json& s) {
  const double total = s["seconds"].get<double>();
  for (const auto& p : s["parts"]) {
    const double sec = p["seconds"].get<double>();
    const double bb = p.value("bandwidth_bound_seconds", 0.0);
    t.add_row({step, p["kind"].get<std::string>(), p["op"].get<std::string>(), std::to_string(p["layers"].get<int>()),
               fixed(sec * 1e3, 3), fixed(100 * sec / total, 1), bb > 0 ? fixed(bb * 1e3, 3) : "-",
               p["bound"].get<std::string>(), p["source"].get<std::string>(), p.value("kernel", std::string()),
               p.value("table", std::string())});
  }
  const double bb = s.value("bandwidth_bound_seconds", 0.0);
  t.add_row({step, "total", "", "", fixed(total * 1e3, 3), "100.0", fixed(bb * 1e3, 3), bb > 0 ? fixed(total / bb, 2) + "x bound" : "", "", "", ""});
}

// The host's launch time the engine books for these steps (not in the GPU times above).
std::string launch_line(const nlohmann::json& l) {
  const auto ms = [&](const char* k) { return fixed(l[k].get<double>() * 1e3, 2) + " ms"; };
  const int linears = l["fp8_block_linears"].get<int>();
  const double per_linear = l["per_fp8_block_linear_s"].get<double>();
  return "launches (" + l["engine_profile"].get<std::string>() + "): a forward launches " +
         std::to_string(l["kernels"].get<int>()) + " kernels (" + std::to_string(linears) + " block-FP8 linears" +
         (linears > 0 && per_linear > 0 ? " at " + fixed(per_linear * 1e6, 1) + " us each" : std::string()) + ") at " +
         fixed(l["per_kernel_s"].get<double>() * 1e6, 1) + " us a kernel: " + ms("eager_forward_s") +
         " eagerly; booked: decode " + ms("decode_step_s") + ", prefill " + ms("prefill_step_s") +
         " (a step lasts at least its launches" +
         (l["on_scheduler_thread"].get<bool>() ? "; they hold the scheduler thread" : std::string()) + ")\n";
}

void run(const api::StepArgs& a, Format format) {
  const auto j = api::step(a);
  Table t({"step", "kind", "op", "layers", "ms", "%", "HBM-bound ms", "bound", "source", "kernel", "table"});
  add_rows(t, "decode", j["decode"]);
  add_rows(t, "prefill", j["prefill"]);
  const std::string b = std::to_string(a.batch);
  const models::Parallelism par{j["tp"].get<int>(), j["pp"].get<int>(), j["ep"].get<int>(), j["dp"].get<int>()};
  std::string text = "servesim step: " + j["model"].get<std::string>() + " on " + j["gpu"].get<std::string>() + ", " + par.label() +
                     ", " + j["precision"].get<std::string>() + " weights" +
                     (j["quantized_experts_only"].get<bool>() ? std::string(" on the routed experts, the rest BF16") : std::string()) +
                     " (checkpoint: " + j["checkpoint_format"].get<std::string>() +
                     "), KV " + j["kv_cache_dtype"].get<std::string>() + "\n" + defaults_line(j["defaults"]) +
                     "decode: " + b + " seqs at context " + std::to_string(a.context) + "; prefill: " + b + " x " +
                     std::to_string(j["prefill_chunk"].get<std::int64_t>()) + " tokens\n" + t.render() +
                     "HBM-bound ms: the row's HBM bytes (weights touched, KV, state, activations) once at the datasheet " +
                     fixed(j["hbm_bytes_per_s"].get<double>() / 1e12, 2) + " TB/s; collectives and launch floors are the rest\n" +
                     launch_line(j["launch"]) + "kernel model: " + j["provenance"].get<std::string>() + "\n";
  emit(format, j, text);
}

}  // namespace

void add_step_command(CLI::App& app) {
  static api::StepArgs o;
  static Format f = Format::table;
  auto* s = app.add_subcommand("step", "Explain one decode step and one prefill step per layer kind");
  s->add_option("--model", o.model, "Model name (servesim list models) or its Hugging Face id");
  s->add_option("--model-file", o.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  s->add_option("--gpu", o.gpu, "GPU name (default h200)");
  s->add_option("--precision", o.precision, "Weights: bf16 | fp8 | fp8_block | nvfp4 | mxfp4 | int4 | int8 (default: the checkpoint's; fp8 on a 128x128 block-FP8 checkpoint runs fp8_block)");
  s->add_option("--kv-cache-dtype", o.kv_cache_dtype, "KV cache dtype (default: the checkpoint's; --engine sglang: a DSA model's bf16 on Hopper, fp8 on Blackwell)");
  s->add_option("--tp", o.tp, "Tensor parallel size (default: the smallest TP x PP that serves the model, as min-gpus)")
      ->check(CLI::Range(1, 1 << 20));
  s->add_option("--pp", o.pp, "Pipeline parallel size");
  s->add_option("--ep", o.ep, "Expert parallel size (1, or tp x dp; on --engine trtllm / sglang a divisor of it: MoE TP x EP)");
  s->add_option("--dp", o.dp, "Attention data-parallel ranks (MoE models); --batch is the replica's, spread over them");
  s->add_flag("--moe-all-to-all", o.moe_all_to_all,
              "MoE under --dp exchanges tokens by all-to-all dispatch / combine (DeepEP-style) instead of all-gather + "
              "reduce-scatter (default: with --engine, its rule: all-to-all on SGLang and TensorRT-LLM once an EP group "
              "spans more than one node)");
  s->add_option("--batch", o.batch, "Sequences in the step");
  s->add_option("--context", o.context, "Context per sequence (decode) / prompt length (prefill)");
  s->add_option("--chunk", o.chunk, "Prefill chunk per sequence (default: the whole prompt)");
  s->add_option("--vision-tiles", o.vision_tiles, "Image tiles encoded in the prefill step");
  s->add_option("--engine", o.engine, "Engine profile whose kernel tables price the step, as simulate --engine takes (vllm-0.14, ...; default: vLLM 0.24's)");
  add_format_option(*s, f);
  s->callback([] { run(o, f); });
}

}  // namespace servesim::cli
