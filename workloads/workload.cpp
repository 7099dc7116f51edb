#include "workloads/workload.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/splitmix.hpp"
#include "common/text.hpp"
#include "workloads/paths.hpp"
#include "workloads/sessions.hpp"

namespace servesim::workloads {
namespace {

// Stream seeds come from splitmix64 of the user's seed, so the arrival process and the lengths
// do not shift each other (changing the rate keeps the same ISL/OSL sequence).

class Generator final : public Workload {
 public:
  explicit Generator(const WorkloadConfig& c)
      : c_(c), lengths_rng_(splitmix64(c.seed ^ 0x6c656e67ULL)), arrival_rng_(splitmix64(c.seed ^ 0x61727276ULL)),
        dataset_rng_(splitmix64(c.seed ^ 0x64617461ULL)), phase_rng_(splitmix64(c.seed ^ 0x7068617365ULL)),
        vision_(vision_work(c.multimodal)) {
    if (c_.arrival == Arrival::schedule) build_schedule();
    total_ = c_.arrival == Arrival::schedule ? static_cast<std::int64_t>(order_.size())
                                             : c_.warmup_requests + c_.requests;
  }

  std::optional<RequestSpec> next() override {
    if (i_ >= total_) return std::nullopt;
    RequestSpec r;
    r.id = static_cast<std::uint64_t>(i_);
    r.arrival_s = arrival(i_);
    const TraceEntry* e = nullptr;
    if (c_.trace) {
      const auto n = static_cast<std::int64_t>(c_.trace->size());
      // Schedule replay follows the (time-sorted) trace order; other modes cycle through it.
      const std::int64_t k = c_.arrival == Arrival::schedule && !c_.schedule_ms ? order_[static_cast<size_t>(i_)] : i_ % n;
      e = &(*c_.trace)[static_cast<size_t>(k)];
    }
    const Entry* d = e || c_.dataset.entries <= 0 ? nullptr : &dataset_entry();
    r.input_tokens = e ? e->input_length : d ? d->isl : c_.isl.sample(lengths_rng_);
    r.output_tokens = e && e->output_length > 0 ? e->output_length : d ? d->osl : c_.osl.sample(lengths_rng_);
    if (c_.warmup_until_steady && c_.arrival == Arrival::concurrency && i_ < c_.concurrency && i_ < c_.warmup_requests)
      // The clients start at independent phases of their cycle (sim/engine/steady_warmup.hpp):
      // each first asks for a uniform share, 1..its answer tokens, from a stream of its own.
      r.output_tokens = phase_rng_.uniform_int(1, r.output_tokens);
    if (e) r.trace_line = e->line;
    if (e && !e->hash_ids.empty()) {
      r.prefix_hashes = e->hash_ids;
      r.hash_block_tokens = c_.hash_block_tokens;
    }
    if (media_carried(c_.multimodal, c_.seed, i_)) {   // every request, or the --image-fraction share of them
      r.vision_tokens = vision_.tokens;
      r.vision_tiles = vision_.tiles;
      r.input_tokens += vision_.tokens;
    }
    if (!e && !d && c_.shared_prefix_tokens > 0) {
      // One hash for the shared prefix (the same in every request): block_keys gives every whole
      // engine block inside it the same key, and the prompt's own tokens after it none.
      r.prefix_hashes = {splitmix64(0x73797374656dULL)};
      r.hash_block_tokens = c_.shared_prefix_tokens;
    }
    if (d) {   // the entry's content: one hash per 512-token block, distinct between entries
      const std::int64_t blocks = (r.input_tokens + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens;
      r.prefix_hashes.reserve(static_cast<std::size_t>(blocks));
      for (std::int64_t j = 0; j < blocks; ++j)
        r.prefix_hashes.push_back(splitmix64(d->salt + static_cast<std::uint64_t>(j)));
      r.hash_block_tokens = kMooncakeBlockTokens;
    }
    ++i_;
    return r;
  }
  int concurrency() const override { return c_.arrival == Arrival::concurrency ? c_.concurrency : 0; }
  std::int64_t warmup_requests() const override { return std::min(c_.warmup_requests, total_); }
  std::int64_t total_requests() const override { return total_; }
  void end_warmup(std::int64_t sent) override {
    if (c_.arrival != Arrival::concurrency || sent >= c_.warmup_requests) return;
    c_.warmup_requests = sent;
    total_ = sent + c_.requests;
  }
  bool warmup_until_steady() const override {
    return c_.warmup_until_steady && c_.arrival == Arrival::concurrency && c_.warmup_requests > 0;
  }
  void end_measured(std::int64_t sent) override {
    if (c_.arrival == Arrival::concurrency) total_ = std::min(total_, std::max(sent, i_));
  }
  bool measure_until_precise() const override { return c_.measure_until_precise && c_.arrival == Arrival::concurrency; }

 private:
  double arrival(std::int64_t i) {
    switch (c_.arrival) {
      case Arrival::concurrency: return 0;
      case Arrival::constant: return static_cast<double>(i) / c_.rate_per_s;
      case Arrival::poisson:
        if (i > 0) t_ += arrival_rng_.exponential(c_.rate_per_s);
        return t_;
      case Arrival::gamma:
        // vLLM benchmark_serving: theta = 1 / (rate * burstiness), gaps ~ Gamma(burstiness, theta);
        // mean gap 1/rate, coefficient of variation 1/sqrt(burstiness).
        if (i > 0) t_ += arrival_rng_.gamma(c_.burstiness, 1.0 / (c_.rate_per_s * c_.burstiness));
        return t_;
      case Arrival::schedule: return times_s_[static_cast<size_t>(i)];
      case Arrival::sessions: return 0;   // SessionWorkload's own
    }
    return 0;
  }

  void build_schedule() {
    std::vector<double> ms;
    if (c_.schedule_ms) ms = *c_.schedule_ms;
    else for (const auto& e : *c_.trace) ms.push_back(e.timestamp_ms);
    order_.resize(ms.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](std::int64_t a, std::int64_t b) {
      return ms[static_cast<size_t>(a)] < ms[static_cast<size_t>(b)];
    });
    if (c_.requests > 0)
      order_.resize(static_cast<size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(order_.size()),
                                                               c_.warmup_requests + c_.requests)));
    const double t0 = c_.auto_offset && !order_.empty() ? ms[static_cast<size_t>(order_[0])] : 0.0;
    times_s_.reserve(order_.size());
    for (auto k : order_) times_s_.push_back((ms[static_cast<size_t>(k)] - t0) * 1e-3 * c_.time_scale);
  }

  struct Entry {
    std::int64_t isl = 0, osl = 0;
    std::uint64_t salt = 0;
  };
  // The dataset entry request i_ sends; an entry's lengths are drawn when it is first used (as
  // aiperf synthesises each entry once), from the lengths stream.
  const Entry& dataset_entry() {
    const std::int64_t n = c_.dataset.entries;
    std::int64_t k = 0;
    switch (c_.dataset.sampling) {
      case DatasetSampling::sequential: k = i_ % n; break;
      case DatasetSampling::random: k = dataset_rng_.uniform_int(0, n - 1); break;
      case DatasetSampling::shuffle:
        if (i_ % n == 0) {   // a new pass: Fisher-Yates over the entries
          pass_order_.resize(static_cast<std::size_t>(n));
          std::iota(pass_order_.begin(), pass_order_.end(), 0);
          for (std::int64_t a = n - 1; a > 0; --a)
            std::swap(pass_order_[static_cast<std::size_t>(a)], pass_order_[static_cast<std::size_t>(dataset_rng_.uniform_int(0, a))]);
        }
        k = pass_order_[static_cast<std::size_t>(i_ % n)];
        break;
    }
    auto [it, fresh] = entries_.try_emplace(k);
    if (fresh) {
      it->second.isl = c_.isl.sample(lengths_rng_);
      it->second.osl = c_.osl.sample(lengths_rng_);
      it->second.salt = splitmix64(c_.seed ^ splitmix64(static_cast<std::uint64_t>(k) + 0x656e747279ULL)) << 20;
    }
    return it->second;
  }

  WorkloadConfig c_;
  Rng lengths_rng_, arrival_rng_, dataset_rng_, phase_rng_;
  std::unordered_map<std::int64_t, Entry> entries_;
  std::vector<std::int64_t> pass_order_;   // shuffle: this pass's order of the entries
  VisionWork vision_;
  std::int64_t i_ = 0, total_ = 0;
  double t_ = 0;
  std::vector<std::int64_t> order_;
  std::vector<double> times_s_;
};

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> k = {
      "concurrency", "request_rate", "arrival", "burstiness", "fixed_schedule", "schedule_file", "time_scale",
      "auto_offset", "requests", "warmup_requests", "warmup_until_steady", "measure_until_precise", "seed", "isl", "osl", "trace", "multimodal", "dataset", "sessions",
      "shared_prefix_tokens"};
  return k;
}

void check_keys(const JsonReader& j, const std::vector<std::string>& known) {
  for (const auto& item : j.json().items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      j.fail(item.key(), "unknown field; known: " + text::join(known));
}

MultimodalConfig parse_multimodal(const JsonReader& m) {
  check_keys(m, {"images", "video", "fraction", "max_tiles", "min_tiles", "use_thumbnail", "tile_px", "tokens_per_tile"});
  MultimodalConfig mm;
  mm.fraction = m.number_or("fraction", 1);
  if (!(mm.fraction >= 0 && mm.fraction <= 1)) m.fail("fraction", "must be a share of requests from 0 to 1 (e.g. 0.3)");
  mm.tiling.max_tiles = static_cast<int>(std::clamp<std::int64_t>(m.integer_or("max_tiles", 12), -1, 1 << 20));
  mm.tiling.min_tiles = static_cast<int>(std::clamp<std::int64_t>(m.integer_or("min_tiles", 1), -1, 1 << 20));
  mm.tiling.use_thumbnail = m.boolean_or("use_thumbnail", true);
  mm.tiling.tile_px = static_cast<int>(std::clamp<std::int64_t>(m.integer_or("tile_px", 512), -1, 1 << 20));
  mm.tiling.tokens_per_tile = static_cast<int>(std::clamp<std::int64_t>(m.integer_or("tokens_per_tile", 256), -1, 1 << 20));
  if (m.has("images"))
    for (const auto& im : m.array("images")) {
      ImageSpec s;
      s.width_px = static_cast<int>(std::clamp<std::int64_t>(im.integer("width"), -1, 1 << 20));
      s.height_px = static_cast<int>(std::clamp<std::int64_t>(im.integer("height"), -1, 1 << 20));
      s.count = static_cast<int>(std::clamp<std::int64_t>(im.integer_or("count", 1), -1, 1 << 20));
      if (s.width_px < 1 || s.width_px > 65536) im.fail("width", "must be 1..65536 pixels");
      if (s.height_px < 1 || s.height_px > 65536) im.fail("height", "must be 1..65536 pixels");
      if (s.count < 0 || s.count > 256) im.fail("count", "must be 0..256 images");
      mm.images.push_back(s);
    }
  if (m.has("video")) {
    const JsonReader v = m.object("video");
    check_keys(v, {"fps", "duration_s", "max_frames", "pruning_rate"});
    mm.has_video = true;
    mm.video.fps = v.number_or("fps", 2);
    mm.video.duration_s = v.number("duration_s");
    mm.video.max_frames = static_cast<int>(std::clamp<std::int64_t>(v.integer_or("max_frames", 128), -1, 1 << 20));
    mm.video.pruning_rate = v.number_or("pruning_rate", 0);
  }
  return mm;
}

}  // namespace

Arrival parse_arrival(const std::string& name, const std::string& flag) {
  const std::string a = text::lower(name);
  if (a == "poisson") return Arrival::poisson;
  if (a == "gamma") return Arrival::gamma;
  if (a == "constant") return Arrival::constant;
  throw Error(flag, "", "unknown arrival '" + name + "'; known: poisson, gamma, constant");
}

const char* sampling_name(DatasetSampling s) {
  switch (s) {
    case DatasetSampling::sequential: return "sequential";
    case DatasetSampling::random: return "random";
    case DatasetSampling::shuffle: return "shuffle";
  }
  return "?";
}

const char* arrival_name(Arrival a) {
  switch (a) {
    case Arrival::concurrency: return "concurrency";
    case Arrival::poisson: return "poisson";
    case Arrival::gamma: return "gamma";
    case Arrival::constant: return "constant";
    case Arrival::schedule: return "fixed_schedule";
    case Arrival::sessions: return "sessions";
  }
  return "?";
}

WorkloadConfig parse_workload(const JsonReader& j) {
  check_keys(j, known_keys());
  const std::string base = folder_of(j.file());
  WorkloadConfig c;
  if (j.has("sessions")) {   // multi-turn sessions: their own object says everything but the seed
    for (const auto& item : j.json().items())
      if (item.key() != "sessions" && item.key() != "seed")
        j.fail(item.key(), "does not apply to a sessions workload (give lengths and counts inside \"sessions\")");
    const std::int64_t seed = j.integer_or("seed", 0);
    if (seed < 0) j.fail("seed", "must be >= 0");
    c.seed = static_cast<std::uint64_t>(seed);
    auto sc = std::make_shared<SessionConfig>(parse_sessions(j.object("sessions"), base));
    sc->seed = c.seed;
    c.arrival = Arrival::sessions;
    c.sessions = std::move(sc);
    validate(c, j.file(), j.field(""));
    return c;
  }
  const bool closed = j.has("concurrency"), open = j.has("request_rate");
  const bool sched = j.boolean_or("fixed_schedule", false) || j.has("schedule_file");
  if (int(closed) + int(open) + int(sched) != 1)
    j.fail(closed || open || sched ? "request_rate" : "concurrency",
           "give exactly one of concurrency (closed loop), request_rate (open loop) or fixed_schedule/schedule_file");
  // Arrival processes shape open-loop arrivals only; in a closed loop or a schedule they would be
  // ignored, so they are refused.
  if (!open)
    for (const char* k : {"arrival", "burstiness"})
      if (j.has(k))
        j.fail(k, std::string("applies to open-loop arrivals (request_rate) only, not to ") +
                      (closed ? "a closed loop (concurrency)" : "a fixed schedule"));
  if (closed) {
    const std::int64_t n = j.integer("concurrency");
    if (n < 1 || n > 1000000) j.fail("concurrency", "must be 1..1000000 clients, got " + std::to_string(n));
    c.arrival = Arrival::concurrency;
    c.concurrency = static_cast<int>(n);
  } else if (open) {
    c.rate_per_s = j.number("request_rate");
    const std::string kind = text::lower(j.string_or("arrival", j.has("burstiness") ? "gamma" : "poisson"));
    if (kind == "poisson") c.arrival = Arrival::poisson;
    else if (kind == "gamma") c.arrival = Arrival::gamma;
    else if (kind == "constant") c.arrival = Arrival::constant;
    else j.fail("arrival", "unknown arrival process '" + kind + "'; known: poisson, gamma, constant");
    c.burstiness = j.number_or("burstiness", 1);
  } else {
    c.arrival = Arrival::schedule;
    c.time_scale = j.number_or("time_scale", 1);
    c.auto_offset = j.boolean_or("auto_offset", true);
  }
  if (j.has("trace")) {
    const auto& t = j.json().at("trace");
    std::int64_t block = kMooncakeBlockTokens;
    std::string file;
    if (t.is_string()) {
      file = t.get<std::string>();
    } else {
      const JsonReader tr = j.object("trace");
      check_keys(tr, {"file", "block_tokens"});
      file = tr.string("file");
      block = tr.integer_or("block_tokens", kMooncakeBlockTokens);
      if (block < 1 || block > (1 << 20)) tr.fail("block_tokens", "must be 1..2^20 tokens");
    }
    c.trace_file = resolve_path(base, file);
    c.trace = std::make_shared<const std::vector<TraceEntry>>(read_trace_file(c.trace_file));
    c.hash_block_tokens = block;
  }
  if (j.has("schedule_file")) {
    c.schedule_file = resolve_path(base, j.string("schedule_file"));
    c.schedule_ms = std::make_shared<const std::vector<double>>(read_timestamps_file(c.schedule_file));
  }
  const bool needs_isl = !c.trace;
  bool needs_osl = !c.trace;
  if (c.trace)
    for (const auto& e : *c.trace) needs_osl = needs_osl || e.output_length == 0;
  if (j.has("isl")) c.isl = parse_length_dist(j, "isl", base);
  else if (needs_isl) j.fail("isl", "missing required field (input tokens per request)");
  if (j.has("osl")) c.osl = parse_length_dist(j, "osl", base);
  else if (needs_osl) j.fail("osl", "missing required field (output tokens per request)");
  c.requests = j.integer_or("requests", sched ? 0 : 100);
  c.warmup_requests = j.integer_or("warmup_requests", 0);
  c.warmup_until_steady = j.boolean_or("warmup_until_steady", false);
  c.measure_until_precise = j.boolean_or("measure_until_precise", false);
  const std::int64_t seed = j.integer_or("seed", 0);
  if (seed < 0) j.fail("seed", "must be >= 0");
  c.seed = static_cast<std::uint64_t>(seed);
  if (j.has("multimodal")) c.multimodal = parse_multimodal(j.object("multimodal"));
  c.shared_prefix_tokens = j.integer_or("shared_prefix_tokens", 0);
  if (j.has("dataset")) {
    const JsonReader ds = j.object("dataset");
    check_keys(ds, {"entries", "sampling"});
    c.dataset.entries = ds.integer("entries");
    const std::string how = text::lower(ds.string_or("sampling", "sequential"));
    if (how == "sequential") c.dataset.sampling = DatasetSampling::sequential;
    else if (how == "random") c.dataset.sampling = DatasetSampling::random;
    else if (how == "shuffle") c.dataset.sampling = DatasetSampling::shuffle;
    else ds.fail("sampling", "unknown sampling '" + how + "'; known: sequential, random, shuffle");
  }
  validate(c, j.file(), j.field(""));
  return c;
}

void validate(const WorkloadConfig& c, const std::string& where, const std::string& p) {
  auto fail = [&](const std::string& field, const std::string& reason) { throw Error(where, p + field, reason); };
  if (c.arrival == Arrival::sessions) {
    if (!c.sessions) fail("sessions", "missing the sessions object");
    validate(*c.sessions, where, p + "sessions.");
    return;
  }
  if (c.arrival == Arrival::concurrency && (c.concurrency < 1 || c.concurrency > 1000000))
    fail("concurrency", "must be 1..1000000 clients, got " + std::to_string(c.concurrency));
  const bool open = c.arrival == Arrival::poisson || c.arrival == Arrival::gamma || c.arrival == Arrival::constant;
  if (open && !(c.rate_per_s >= 1e-6 && c.rate_per_s <= 1e9))
    fail("request_rate", "must be between 1e-6 and 1e9 requests/s, got " + std::to_string(c.rate_per_s));
  if (c.arrival == Arrival::gamma && !(c.burstiness >= 1e-3 && c.burstiness <= 1e6))
    fail("burstiness", "must be between 0.001 and 1e6");
  if (c.arrival == Arrival::schedule) {
    if (!(c.time_scale > 0 && c.time_scale <= 1e6)) fail("time_scale", "must be > 0");
    if (!c.schedule_ms && !c.trace) fail("fixed_schedule", "needs a trace with timestamps or a schedule_file");
    if (!c.schedule_ms)
      for (size_t k = 0; k < c.trace->size(); ++k)
        if (std::isnan((*c.trace)[k].timestamp_ms))
          throw Error(c.trace_file, "line " + std::to_string(k + 1) + ", timestamp",
                      "fixed_schedule needs a timestamp on every line");
  }
  // Every measured request is kept for exact percentiles (about 110 bytes each with the
  // simulator's per-request state): 10^7 requests stay near 1 GiB.
  const std::int64_t max_req = 10'000'000;
  if (c.arrival == Arrival::schedule ? c.requests < 0 : c.requests < 1)
    fail("requests", c.arrival == Arrival::schedule ? "must be >= 0 (0 = every line)" : "must be >= 1");
  if (c.requests > max_req)
    fail("requests", "must be <= 10^7, got " + std::to_string(c.requests) +
                         " (each measured request is kept for exact percentiles, ~110 bytes each; "
                         "percentiles settle long before 10^7)");
  if (c.warmup_requests < 0 || c.warmup_requests > max_req) fail("warmup_requests", "must be 0..10^7");
  if (c.warmup_until_steady && (c.arrival != Arrival::concurrency || c.sessions || c.trace || c.warmup_requests < 1))
    fail("warmup_until_steady", "applies to a closed loop of synthetic requests (concurrency, no trace or sessions) with "
                                "warmup_requests >= 1, its longest warm-up");
  if (c.measure_until_precise && (c.arrival != Arrival::concurrency || c.sessions || c.trace))
    fail("measure_until_precise", "applies to a closed loop of synthetic requests (concurrency, no trace or sessions); "
                                  "requests is then the most it measures");
  // More clients than requests would run at concurrency = requests under the requested label.
  if (c.arrival == Arrival::concurrency && c.concurrency > c.requests + c.warmup_requests)
    fail("concurrency", std::to_string(c.concurrency) + " clients but " + std::to_string(c.requests) + " requests (+" +
                            std::to_string(c.warmup_requests) + " warm-up): at most " +
                            std::to_string(c.requests + c.warmup_requests) +
                            " can be in flight; give at least as many requests as clients");
  auto check_len = [&](const LengthDist& d, const char* f) {
    if (d.kind == LengthDist::Kind::empirical ? (!d.values || d.values->empty())
        : d.kind == LengthDist::Kind::uniform  ? (d.min < 1 || d.max < d.min)
                                                : !(d.mean >= 1 && d.mean <= 1e9 && d.stddev >= 0 && d.stddev <= 1e9))
      fail(f, "invalid length distribution " + d.describe());
  };
  check_len(c.isl, "isl");
  check_len(c.osl, "osl");
  if (c.hash_block_tokens < 1) fail("trace.block_tokens", "must be >= 1");
  if (c.dataset.entries < 0 || c.dataset.entries > 1'000'000)
    fail("dataset.entries", "must be 0..10^6 prompts (0: every request a distinct prompt), got " +
                                std::to_string(c.dataset.entries));
  if (c.dataset.entries > 0 && c.trace)
    fail("dataset", "applies to synthetic prompts (isl/osl); a trace's hash_ids already say which prompts repeat");
  if (c.shared_prefix_tokens < 0 || c.shared_prefix_tokens > (std::int64_t{1} << 30))
    fail("shared_prefix_tokens", "must be 0..2^30 tokens, got " + std::to_string(c.shared_prefix_tokens));
  if (c.shared_prefix_tokens > 0 && (c.trace || c.dataset.entries > 0))
    fail("shared_prefix_tokens", "applies to distinct synthetic prompts (isl/osl); a trace's hash_ids or a dataset's "
                                 "entries already say which prompts repeat");
  const auto& t = c.multimodal.tiling;
  if (t.min_tiles < 1 || t.max_tiles < t.min_tiles || t.max_tiles > 256)
    fail("multimodal.max_tiles", "need 1 <= min_tiles <= max_tiles <= 256");
  if (t.tile_px < 1 || t.tile_px > 65536) fail("multimodal.tile_px", "must be 1..65536");
  if (t.tokens_per_tile < 1 || t.tokens_per_tile > 65536) fail("multimodal.tokens_per_tile", "must be 1..65536");
  if (c.multimodal.has_video) {
    const auto& v = c.multimodal.video;
    if (!(v.fps > 0 && v.fps <= 1000)) fail("multimodal.video.fps", "must be > 0 and <= 1000");
    if (!(v.duration_s > 0 && v.duration_s <= 1e6)) fail("multimodal.video.duration_s", "must be > 0 seconds");
    if (v.max_frames < 1 || v.max_frames > 100000) fail("multimodal.video.max_frames", "must be 1..100000");
    if (!(v.pruning_rate >= 0 && v.pruning_rate < 1)) fail("multimodal.video.pruning_rate", "must be in [0, 1)");
  }
}

std::unique_ptr<Workload> make_workload(const WorkloadConfig& c) {
  validate(c);
  if (c.arrival == Arrival::sessions) {
    SessionConfig sc = *c.sessions;
    sc.seed = c.seed;
    return std::make_unique<SessionWorkload>(sc);
  }
  return std::make_unique<Generator>(c);
}

std::vector<RequestSpec> materialize(const WorkloadConfig& c) {
  auto w = make_workload(c);
  std::vector<RequestSpec> out;
  out.reserve(static_cast<size_t>(std::max<std::int64_t>(0, w->total_requests())));
  while (auto r = w->next()) out.push_back(std::move(*r));
  return out;
}

std::vector<RequestSpec> ClosedLoopClients::start(double t_s) {
  std::vector<RequestSpec> out;
  const int n = std::max(1, w_->concurrency());
  for (int k = 0; k < n; ++k) {
    auto r = w_->next();
    if (!r) break;
    r->arrival_s = t_s;
    out.push_back(std::move(*r));
  }
  return out;
}

std::optional<RequestSpec> ClosedLoopClients::on_complete(double t_s) {
  auto r = w_->next();
  if (r) r->arrival_s = t_s;
  return r;
}

}  // namespace servesim::workloads
