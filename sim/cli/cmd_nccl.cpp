// `servesim nccl`: the nccl-tests all-reduce check for an instance type and node count, with the
// time, algbw and busbw servesim expects at each message size (the same table --emit writes).
#include <memory>

#include "sim/api/api.hpp"
#include "common/error.hpp"
#include "sim/cli/commands.hpp"

namespace servesim::cli {

void add_nccl_command(CLI::App& app) {
  struct Opts {
    std::string instance = "p5en.48xlarge";
    std::int64_t nodes = 1;
    double min_bytes = 8, max_bytes = 16.0 * (1ull << 30);
    Format format = Format::table;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("nccl", "The NCCL all-reduce cluster check (nccl-tests all_reduce_perf) and the bus bandwidth "
                                       "servesim expects at each message size");
  c->add_option("--instance", o->instance, "Instance type (default p5en.48xlarge)");
  c->add_option("--nodes", o->nodes, "Instances in the test, 1..1024 (default 1)")->check(int64_range());
  c->add_option("--min-bytes", o->min_bytes, "Smallest message (default 8)");
  c->add_option("--max-bytes", o->max_bytes, "Largest message (default 16 GiB)");
  add_format_option(*c, o->format);
  c->callback([o] {
    if (o->nodes < 1 || o->nodes > 1024) throw Error("--nodes", "", "must be in 1..1024, got " + std::to_string(o->nodes));
    const auto j = api::nccl(o->instance, int(o->nodes), o->min_bytes, o->max_bytes);
    emit(o->format, j, api::nccl_table(j));
  });
}

}  // namespace servesim::cli
