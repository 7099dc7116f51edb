#include "sim/kv_offload_setup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::sim {

OffloadConfig resolve_offload(const nlohmann::json& j, const hw::GpuSpec& gpu, const hw::InstanceSpec* instance,
                              int replica_gpus, const std::string& file) {
  OffloadConfig c;
  if (j.is_null()) return c;
  const JsonReader r(j, file, "kv_offload");
  if (!j.is_object()) r.fail("", "expected an object such as {\"cpu_gib\": 200}");
  static const std::vector<std::string> known = {"cpu_gib", "disk_gib", "overlap", "cpu_bytes_per_s", "cpu_latency_us",
                                                 "disk_bytes_per_s", "disk_latency_us"};
  for (const auto& item : j.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      r.fail(item.key(), "unknown field; known: " + text::join(known));
  const nlohmann::json links = parse_json(data::get("sim/data/kv_offload_links.json"), "sim/data/kv_offload_links.json");
  const nlohmann::json* host = nullptr;
  for (const auto& l : links.at("host_links"))
    for (const auto& g : l.at("gpus"))
      if (text::iequals(g.get<std::string>(), gpu.name)) host = &l;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (r.has("cpu_gib")) {
    OffloadTier t;
    t.name = "cpu";
    t.capacity_bytes = r.number_in("cpu_gib", 0, 0, 1e7) * gib;
    if (!host && !r.has("cpu_bytes_per_s"))
      r.fail("cpu_bytes_per_s", "no host link is known for " + gpu.name + "; give its bandwidth");
    t.bytes_per_s = r.number_in("cpu_bytes_per_s", host ? host->at("bytes_per_s").get<double>() : 0, 1e6, 1e13);
    t.latency_s = 1e-6 * r.number_in("cpu_latency_us", host ? 1e6 * host->at("latency_s").get<double>() : 0, 0, 1e6);
    t.source = r.has("cpu_bytes_per_s") ? "given" : host->at("link").get<std::string>() + ": " + host->at("source").get<std::string>();
    if (instance && instance->host_memory_bytes > 0) {
      const double share = instance->host_memory_bytes * double(replica_gpus) / double(std::max(1, instance->gpus));
      if (t.capacity_bytes > share)
        r.fail("cpu_gib", std::to_string(std::llround(t.capacity_bytes / gib)) + " GiB exceed the replica's share of " + instance->name +
                              " host memory (" + std::to_string(replica_gpus) + " of " + std::to_string(instance->gpus) +
                              " GPUs: " + std::to_string(std::llround(share / gib)) + " GiB)");
    }
    c.tiers.push_back(t);
  }
  if (r.has("disk_gib")) {
    const auto& d = links.at("disk");
    OffloadTier t;
    t.name = "disk";
    t.capacity_bytes = r.number_in("disk_gib", 0, 0, 1e9) * gib;
    t.bytes_per_s = r.number_in("disk_bytes_per_s", d.at("bytes_per_s").get<double>(), 1e6, 1e13);
    t.latency_s = 1e-6 * r.number_in("disk_latency_us", 1e6 * d.at("latency_s").get<double>(), 0, 1e7);
    t.source = r.has("disk_bytes_per_s") ? "given" : "local NVMe: " + d.at("source").get<std::string>();
    c.tiers.push_back(t);
  }
  if (c.tiers.empty()) r.fail("cpu_gib", "give cpu_gib and/or disk_gib");
  c.overlap = r.boolean_or("overlap", false);
  return c;
}

nlohmann::json offload_memory_json(const OffloadConfig& c, double block_bytes_per_gpu, double state_bytes_per_gpu,
                                   int block_size, int replica_gpus, std::int64_t context_tokens) {
  const KvOffload sized(c, block_bytes_per_gpu, replica_gpus, state_bytes_per_gpu);   // the simulator's own sizing
  // A prompt of `context_tokens` hits whole blocks, never its last token.
  const std::int64_t hit_blocks = context_tokens > 0 ? (context_tokens - 1) / block_size : 0;
  const std::int64_t seq_blocks = (context_tokens + block_size - 1) / block_size;
  nlohmann::json tiers = nlohmann::json::array();
  for (std::size_t t = 0; t < c.tiers.size(); ++t) {
    const OffloadTier& x = c.tiers[t];
    const std::int64_t blocks = sized.stats()[t].capacity_blocks;
    const double bytes = double(hit_blocks) * block_bytes_per_gpu + state_bytes_per_gpu;
    tiers.push_back({{"name", x.name},
                     {"capacity_bytes", x.capacity_bytes},
                     {"capacity_blocks", blocks},
                     {"capacity_tokens", blocks * block_size},
                     {"sequences_at_context", seq_blocks > 0 ? blocks / seq_blocks : 0},
                     {"bytes_per_s", x.bytes_per_s},
                     {"latency_s", x.latency_s},
                     {"source", x.source},
                     {"onboard_blocks", hit_blocks},
                     {"onboard_bytes", bytes},
                     {"onboard_s", x.latency_s + bytes / x.bytes_per_s}});
  }
  return {{"block_bytes_per_gpu", block_bytes_per_gpu}, {"block_size", block_size},
          {"state_bytes_per_seq_per_gpu", state_bytes_per_gpu}, {"replica_gpus", replica_gpus},
          {"context_tokens", context_tokens}, {"overlap", c.overlap}, {"tiers", tiers}};
}

std::vector<double> offload_block_costs(const OffloadConfig& c, double block_bytes_per_gpu, const models::StepCostModel& cost,
                                        int block_size, std::int64_t chunk_tokens) {
  models::StepBatch b;
  b.prefill_seqs = 1;
  b.prefill_tokens = std::max<std::int64_t>(block_size, chunk_tokens);
  b.prefill_attention_pairs = double(b.prefill_tokens) * double(b.prefill_tokens + 1) / 2;
  const double per_block = cost.seconds(b) * double(block_size) / double(b.prefill_tokens);
  std::vector<double> out;
  for (const OffloadTier& t : c.tiers)
    out.push_back(per_block > 0 ? std::min(1.0, block_bytes_per_gpu / t.bytes_per_s / per_block) : 1.0);
  return out;
}

nlohmann::json parse_offload_flag(const std::string& text_in) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& part : text::option_list(text_in, "--kv-offload")) {
    const auto colon = part.find(':');
    const std::string tier = text::lower(part.substr(0, colon));
    if (colon == std::string::npos || (tier != "cpu" && tier != "disk"))
      throw Error("--kv-offload", "", "expected cpu:GIB[,disk:GIB], got '" + part + "'");
    const std::string v = part.substr(colon + 1);
    char* end = nullptr;
    const double gib = std::strtod(v.c_str(), &end);
    if (v.empty() || !end || *end || !std::isfinite(gib) || gib < 0)
      throw Error("--kv-offload", "", "'" + v + "' is not a size in GiB (cpu:GIB[,disk:GIB])");
    j[tier + "_gib"] = gib;
  }
  return j;
}

}  // namespace servesim::sim
