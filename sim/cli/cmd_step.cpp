// `servesim step`: one decode step and one prefill step of a replica, per layer kind, with what
// bounds each op and where its time comes from.
#include "common/error.hpp"
#include "common/table.hpp"
#include "hwmodels/catalog.hpp"
#include "models/min_gpus.hpp"
#include "models/step_cost.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {
namespace {

struct StepOpts {
  std::string model, gpu, precision = "bf16", kv_dtype;
  int tp = 1, pp = 1, ep = 1, batch = 1, chunk = 0, tiles = 0;
  std::int64_t context = 1024;
  Format format = Format::table;
};

nlohmann::json parts_json(const models::StepTime& t) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : t.parts)
    a.push_back({{"kind", p.kind}, {"op", p.op}, {"seconds", p.seconds}, {"bound", p.bound}, {"source", p.source}, {"layers", p.layers}});
  return {{"seconds", t.seconds}, {"parts", a}};
}

void add_rows(Table& t, const std::string& step, const models::StepTime& s) {
  for (const auto& p : s.parts)
    t.add_row({step, p.kind, p.op, std::to_string(p.layers), fixed(p.seconds * 1e3, 3), fixed(100 * p.seconds / s.seconds, 1), p.bound, p.source});
  t.add_row({step, "total", "", "", fixed(s.seconds * 1e3, 3), "100.0", "", ""});
}

void run(const StepOpts& o) {
  const auto& m = models::model(o.model);
  const auto& gpu = hw::Catalog::global().gpu(o.gpu);
  const auto wp = hw::parse_precision(o.precision);
  const auto kv = o.kv_dtype.empty() ? models::checkpoint_kv_dtype(wp) : hw::parse_precision(o.kv_dtype, "--kv-cache-dtype");
  if (o.batch < 1) throw Error("--batch", "", "must be >= 1");
  if (o.context < 1) throw Error("--context", "", "must be >= 1");
  const models::Parallelism par{o.tp, o.pp, o.ep};
  (void)models::plan_memory(m, gpu, wp, par, {});  // validates the shape and that it fits
  const auto cost = models::make_step_cost(m, gpu, wp, par, kv);
  models::StepBatch dec;
  dec.decode_seqs = o.batch;
  dec.decode_context_tokens = std::int64_t(o.batch) * o.context;
  models::StepBatch pre;
  const std::int64_t c = o.chunk > 0 ? std::min<std::int64_t>(o.chunk, o.context) : o.context;
  pre.prefill_seqs = o.batch;
  pre.prefill_tokens = std::int64_t(o.batch) * c;
  const double prior = double(o.context - c);
  pre.prefill_attention_pairs = o.batch * (double(c) * prior + double(c) * (c + 1) / 2.0);
  pre.vision_tiles = o.tiles;
  const auto d = cost->breakdown(dec), p = cost->breakdown(pre);
  nlohmann::json j = {{"model", m.name}, {"gpu", gpu.name}, {"precision", std::string(hw::to_string(wp))},
                      {"kv_cache_dtype", std::string(hw::to_string(kv))}, {"tp", o.tp}, {"pp", o.pp}, {"ep", o.ep},
                      {"batch", o.batch}, {"context", o.context}, {"prefill_chunk", c}, {"vision_tiles", o.tiles},
                      {"decode", parts_json(d)}, {"prefill", parts_json(p)}, {"provenance", cost->provenance()},
                      {"estimate", m.estimate}};
  Table t({"step", "kind", "op", "layers", "ms", "%", "bound", "source"});
  add_rows(t, "decode", d);
  add_rows(t, "prefill", p);
  std::string text = "decode: " + std::to_string(o.batch) + " seqs at context " + std::to_string(o.context) + "; prefill: " +
                     std::to_string(o.batch) + " x " + std::to_string(c) + " tokens\n" + t.render() + "kernel model: " + cost->provenance() + "\n";
  emit(o.format, j, text);
}

}  // namespace

void add_step_command(CLI::App& app) {
  static StepOpts o;
  auto* s = app.add_subcommand("step", "Explain one decode step and one prefill step per layer kind");
  s->add_option("--model", o.model, "Model name")->required();
  s->add_option("--gpu", o.gpu, "GPU name")->required();
  s->add_option("--precision", o.precision, "Weights: bf16 | fp8 | nvfp4");
  s->add_option("--kv-cache-dtype", o.kv_dtype, "KV cache dtype (default: the checkpoint's)");
  s->add_option("--tp", o.tp, "Tensor parallel size");
  s->add_option("--pp", o.pp, "Pipeline parallel size");
  s->add_option("--ep", o.ep, "Expert parallel size");
  s->add_option("--batch", o.batch, "Sequences in the step");
  s->add_option("--context", o.context, "Context per sequence (decode) / prompt length (prefill)");
  s->add_option("--chunk", o.chunk, "Prefill chunk per sequence (default: the whole prompt)");
  s->add_option("--vision-tiles", o.tiles, "Image tiles encoded in the prefill step");
  add_format_option(*s, o.format);
  s->callback([] { run(o); });
}

}  // namespace servesim::cli
