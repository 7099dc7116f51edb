// `servesim validate`: servesim's predictions against measured serving runs. Reads measured
// points from (a) a CSV in the layout of AIConfigurator's silicon sample (one row per measured
// point: model, GPU, engine, parallel layout, ISL/OSL, concurrency, TTFT, TPOT) or (b) an aiperf
// artefact folder (profile_export_aiperf.json + profile_export.jsonl, with the run's servesim
// scenario as input_config or a servesim_run.json sidecar), sets each point up as it was measured
// (closed loop at its concurrency, fixed lengths), simulates every point on a thread pool and
// reports signed and absolute % errors per model x GPU x engine x mode. Points that cannot be
// modelled keep their row in the output with the reason.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/validate/bands.hpp"

namespace servesim::sim::validate {

// One measured point (CSV rows that share every recorded field are merged into one).
// Why a CSV row runs another layout than its columns give (read_silicon_csv).
enum class LayoutRewrite { none, from_id, from_pattern, from_moe_grid };

struct MeasuredPoint {
  std::string id;              // CSV: the first merged row's id; aiperf: the folder
  std::string source;          // "FILE:LINE" of the first row, or the folder
  // The benchmark dump the first row came from (`source_file=` of its silicon_data_source; "" when
  // not recorded): rows of one dump, engine release, model and GPU are one harness's run set.
  std::string source_file;
  int merged = 1;              // measurements merged (each metric is their median)
  // Merged rows with differing figures are reruns (rows equal in both figures are one run copied
  // into several dumps): how many distinct runs, and (max - min) / median of each metric over them.
  int runs = 1;
  double ttft_rerun_spread = NAN, tpot_rerun_spread = NAN;
  std::string backend, backend_version, model_path, system, precision, mode, gemm_quant, moe_quant;
  std::int64_t isl = 0, osl = 0;
  // The lengths a bench result's requests had where they were not all isl / osl (a scenario workload's
  // "isl" / "osl": a number, or a distribution such as {"kind": "uniform", ...} or an empirical list);
  // null: every request isl + osl. isl and osl stay the run's means. (An aiperf folder's are in its
  // scenario.)
  nlohmann::json isl_lengths, osl_lengths;
  // Set where the run's lengths varied and the record lists neither them nor their draw (an SGLang
  // ShareGPT run without --output-details): run at their means, and why.
  std::string lengths_note;
  int concurrency = 0;         // 0: not recorded
  double request_rate = 0;     // open-loop runs (Poisson arrivals, requests / s) when concurrency is 0
  // aiperf folders: the measured and warm-up requests the run recorded (0 / -1: not recorded).
  std::int64_t requests = 0, warmup_requests = -1;
  std::string unreadable;      // a folder that could not be read: why (listed as unmodellable)
  // An open-loop check sent as two aiperf runs at once (artifacts/rR-text and rR-images): the part
  // this folder holds ("text" / "images"; "" for a whole run) and its partner folder's name; once
  // the pair is read as one stream, how its figures were combined.
  std::string stream_part, stream_with, stream_note;
  // Aggregated: one serving replica's layout (0 = blank in the source).
  int tp = 0, pp = 0, attention_dp = 0, moe_tp = 0, moe_ep = 0;
  // The CSV's batch_size (the harness's batch: the clients, or each attention-DP rank's share of
  // them) and attention_dp_size as written, before a layout rewrite (0 = blank). An aggregated row
  // whose batch is neither C nor C / DP is not modelled: its columns do not say how its clients
  // were split (the 1.3.0rc1 / rc5 TRT-LLM sweeps: batch C / 2, C / 4, C / 8 on TP2-TP8 without DP).
  int batch_size = 0, columns_dp = 0;
  // Disaggregated roles: workers and each worker's layout (0 = blank).
  int prefill_workers = 0, prefill_tp = 0, prefill_pp = 0, prefill_dp = 0, prefill_moe_ep = 0;
  int decode_workers = 0, decode_tp = 0, decode_pp = 0, decode_dp = 0, decode_moe_ep = 0;
  // Measured figures (NaN: not recorded). TPOT excludes the first token (aiperf's ITL).
  double ttft_ms = NAN, tpot_ms = NAN, output_tps = NAN;
  bool output_tps_derived = false;   // from Little's law (the CSV records no throughput)
  // Set when the layout run is not the columns' (see read_silicon_csv), with why.
  std::string layout_note;
  LayoutRewrite layout_rewrite = LayoutRewrite::none;
  // aiperf folders: the run as servesim runs it (scenario file layout), set by the reader.
  nlohmann::json scenario;
  // A benchmark client's result (vllm bench serve JSON, SGLang bench_serving JSONL): the user's own
  // server, run with its engine's defaults and the engine knobs a servesim_run.json beside it records
  // (`engine_knobs`, its "engine" object; `kv_cache_dtype`), never a harness's generated flags
  // (--harness describes silicon-sample rows).
  bool bench_result = false;
  nlohmann::json engine_knobs;
  std::string kv_cache_dtype;
};

// The concurrency recorded in a silicon-sample row: `silicon_concurrency=N` in the
// ;-separated silicon_data_source, else `_c<N>_` in the id; 0 when neither holds a number.
int parse_concurrency(const std::string& data_source, const std::string& id);

// The aggregated layout an id names: `_tp<N>[_<k>]_ep<M>[_<k>]_` (e.g. "..._c64_tp4_ep4_1327",
// "..._tp4_0_ep4_0_223"); false when the id names none.
bool parse_id_layout(const std::string& id, int* tp, int* ep);

struct CsvReadStats {
  int rows = 0;                // data rows read
  int points = 0;              // distinct points after merging repeats
  int merged_points = 0;       // points made of 2+ rows
  int merged_rows = 0;         // rows folded into another row's point
  int layout_from_id = 0;      // points whose id's TP x EP layout replaced the columns' attention-DP one
  int layout_from_pattern = 0; // points without an id layout whose columns have that pattern, run the same way
  int layout_from_moe_grid = 0; // points whose columns give TP e x e (or DP e x e), MoE TP e x EP e: run TP e EP e (DP e EP e)
};
// Reads a silicon-sample CSV and merges repeated points: rows equal in every column except id,
// silicon_data_source and the two metrics, and with the same concurrency, become one point whose
// TTFT and TPOT are the medians of the repeats. Points keep the order of their first row.
// An aggregated row whose columns give attention DP (attention_dp_size > 1, moe_ep_size =
// tp x dp) while its id names TP x EP without DP (`_tp4_ep4_`) runs the id's layout and says so in
// layout_note: in the calibration CSV those rows (one 2026-04-06 dump) measure the same TPOT, to
// 1 %, as the same model's TP x EP rows of another dump at every concurrency, which a layout with
// dp times the GPUs and 1/dp of the batch per rank could not. Every such row has the columns TP t,
// DP t, EP t x t; a row with that pattern and no layout in its id runs TP t EP t too: the 52 vLLM
// rows of the calibration CSV that do (MiniMax-M2.5 and Kimi-K2.5 on B200 and B300) measure what
// TP t EP t predicts, TTFT median abs error 16 % and TPOT 6 % against 86 % and 18 % as DP, and
// only TP t EP t reproduces their queueing (MiniMax-M2.5 NVFP4 "TP2 DP2 EP4" at 256 clients of
// 8192 + 1024 tokens: 13.5 s measured, 17.5 s as TP2 EP2, 1.3 s as TP2 DP2 EP4).
// Throws Error naming the file, line and column on malformed input.
std::vector<MeasuredPoint> read_silicon_csv(const std::string& path, CsvReadStats* stats = nullptr);

// Reads an aiperf artefact folder: profile_export_aiperf.json (metrics at the top level or under
// "records", as aiperf and servesim write it), profile_export.jsonl (per-request records: the
// measured and warm-up request counts) and the run's setup from servesim_run.json (a sidecar in
// the scenario file layout; shortcuts "isl", "osl", "concurrency", "requests" at the top level;
// "model_file" for a model outside the catalogue) or, without a sidecar, a servesim scenario as
// the JSON's input_config. `statistic` (avg or p50) picks the TTFT/ITL statistic read.
// Throws Error naming the file and field on bad input.
MeasuredPoint read_aiperf_dir(const std::string& dir, const std::string& statistic = "avg");
// A measured run's request lengths as a scenario workload names them: the number when every request
// had one length, else {"kind": "empirical", "values": [...]} of them, as at most
// kMeasuredLengthValues quantiles (sorted; the i-th of n the value at rank (i + 1/2) x size / n), so
// a run of 100,000 requests keeps its shape in a small scenario. Null for an empty list.
inline constexpr std::size_t kMeasuredLengthValues = 1024;
nlohmann::json measured_lengths(std::vector<std::int64_t> lengths);
// Whether a point's scenario runs lengths of their own (a distribution, not a number): the run's
// requests' or its dataset's draw.
bool runs_drawn_lengths(const nlohmann::json& scenario);

// Distinct points one validate run takes (a CSV with more is refused while it is read).
inline constexpr std::size_t kMaxPoints = 100000;

// Reads PATH: a silicon-sample CSV (stats in `csv`), an aiperf artefact folder, or a folder whose
// subfolders are aiperf artefact folders (read in name order). Error on anything else.
std::vector<MeasuredPoint> read_points(const std::string& path, const std::string& statistic = "avg",
                                       CsvReadStats* csv = nullptr);

// How validate sets up and runs the points.
struct Options {
  std::vector<std::string> backends, modes, gpus, models;   // filters (case-insensitive; empty = all)
  bool engine_any = false;       // run trtllm/sglang points with servesim's vLLM engine (default: each on its own engine)
  // Also run every aggregated closed-loop point of a fixed OSL in both orbits, the clients' train
  // (fixed lengths) and spread out (a kLockSpreadTokens-token sd), to place the measured and the
  // predicted TTFT between them (PointResult::lock_measured / lock_predicted). Three runs a point.
  bool lock_fraction = false;
  nlohmann::json base;           // scenario fields applied to every CSV point (engine knobs, router, seed)
  int requests_per_client = 10;  // measured requests = concurrency x this (CSV points)
  int warmup_per_client = 2;     // warm-up requests = concurrency x this (aiperf's C x 2)
  // > 0: a closed-loop point measures at most this many requests (at least 2 a client): the
  // evaluations of calibrate e2e's fits, where thousands of clients x 10 make one run seconds long.
  std::int64_t max_requests = 0;
  std::string statistic = "avg"; // the simulated statistic compared: avg or p50
  int threads = 0;               // <= 0: all cores; results do not depend on it
  std::uint64_t seed = 1;
  // Engine flags of CSV points: "aic" = those AIConfigurator's benchmark harness generates for
  // the measured layout (max_num_batched_tokens = batch + ISL + 1500, ...) and an FP8 KV cache
  // for FP8 deployments on Blackwell; "serve" = `vllm serve`'s defaults (the engine profile's, KV "auto").
  std::string harness = "aic";
  // Under "aic": a run set whose measurements prove re-sent prompts (resends_prompts) runs with
  // `vllm serve`'s defaults and aiperf's dataset instead (PointResult::harness_note); false keeps
  // every point on the generated flags (--no-resent-prompts).
  bool infer_resent_prompts = true;
  // Output-length spread of CSV points, % of their OSL (normal, as aiperf's --osl-stddev). The
  // measured harness fixes the length (0, the default); a spread desynchronises the closed loop's
  // clients, which shows where a measured run sits between the lockstep and the spread-out orbit
  // (README, "Where the TTFT error comes from").
  double osl_spread_pct = 0;
  // Engine knobs scaled on every CSV point: the knob's value (the scenario's, else the point's engine
  // profile's) times the factor. Knobs: step_overhead_us_per_seq, closed_loop_osl_spread_tokens.
  // The leave-one-out fits (transfer.hpp) move them relative to each release's fitted value.
  std::vector<std::pair<std::string, double>> engine_scale;
  // Model files (--model-file) for this run only: a point's model_path resolves to one of these
  // (by name, the file's Hugging Face ids or model_path's last component) before the catalogue,
  // and its scenario names the file. The catalogue itself is never changed.
  std::vector<std::string> model_files;
};

// Checks Options::base (--scenario `file`) and the seed once, before any point runs: the base
// over the embedded default scenario must parse. Throws servesim::Error.
void check_base_scenario(const Options& o, const std::string& file);

// A point's run: the scenario it was set up as, or why it cannot be modelled.
struct PointResult {
  MeasuredPoint measured;
  nlohmann::json scenario;       // null when unmodellable
  std::string unmodellable;      // reason ("" = ran)
  std::string model, gpu, engine, mode;   // group keys: resolved model (or model_path), GPU, backend, agg|disagg
  std::string engine_profile, precision;  // the engine build and weight precision it ran (what a calibration is judged on)
  int replica_concurrency = 0;   // concurrency per serving replica (agg) or decode worker (disagg)
  int max_num_seqs = 0;
  double ttft_ms = NAN, itl_ms = NAN, output_tps = NAN;   // predicted
  // Options::lock_fraction: the TTFT of the train and of the spread-out orbit, and where the
  // measured and predicted TTFT sit between them, (TTFT - spread out) / (train - spread out): 0
  // spread out, 1 the train; NaN where the orbits are within kLockMinGap of each other.
  double ttft_train_ms = NAN, ttft_spread_out_ms = NAN, lock_measured = NAN, lock_predicted = NAN;
  double ttft_err = NAN, itl_err = NAN, tps_err = NAN;    // signed relative errors (pred - meas) / meas
  std::string regime;            // load regime of the point (see load_regime)
  double wall_s = 0;             // host time of the run
  // Physical consistency of the measurement (aggregated points): a closed loop of C clients on R
  // replicas prefills C/R x ISL tokens per replica in every cycle of TTFT + (OSL-1) x TPOT. At
  // servesim's cheapest prefill cost per token (GEMMs at 16,384 tokens, short prompts, measured
  // kernels) that takes at least `prefill_floor_s`; a measured cycle shorter than this floor
  // cannot have prefilled every prompt token (prefix-cache hits or shorter prompts).
  double prefill_floor_s = NAN;  // per cycle, per replica
  double behind_prefill = NAN;   // share of the run's prompts that waited while another's prefill ran
  double measured_cycle_s = NAN;
  bool below_floor() const { return prefill_floor_s > measured_cycle_s; }
  // The same for decode (aggregated points, PP 1, no speculative tokens): by Little's law
  // C/R x (OSL-1) x TPOT / cycle of a replica's clients are decoding at any time; one decode step
  // of that many sequences (rounded down) at the prompt's context moves at least its HBM bytes
  // (weights touched, KV) at the datasheet bandwidth, `decode_floor_s`. A measured TPOT under it
  // cannot have decoded that many sequences a step (failed or shortened requests).
  double decode_floor_s = NAN;
  int decoding = 0;              // that many sequences
  bool below_decode_floor() const { return decode_floor_s > measured.tpot_ms / 1e3; }
  // Either floor: a measurement that cannot be what its row says.
  bool inconsistent() const { return below_floor() || below_decode_floor(); }
  // The clients it ran (aggregated points): the same Little's law, unrounded and uncapped, gives
  // `in_flight` = C/R x (OSL-1) x TPOT / cycle sequences decoding at once on a replica, and
  // servesim's memory plan runs `runs_at_once` = min(C/R, max_num_seqs, whole requests of ISL + OSL
  // tokens the KV pool holds) at once. A measurement with fewer than kFewInFlight of those in flight
  // (few_in_flight) did not run its clients as the deployment can: something held them outside the
  // engine (the harness's client), or its engine admitted fewer than its memory plan holds.
  double in_flight = NAN;
  int runs_at_once = 0;
  bool few_in_flight() const;
  // Left out of the bands, the leave-one-out fits and the summary's table without them.
  bool excluded() const { return inconsistent() || few_in_flight(); }
  // And a ceiling (SGLang points, closed loop of fixed lengths): SGLang runs a prefill step
  // whenever a waiting prompt can be admitted, so a prompt waits at most for the step in flight and
  // the prompts queued ahead of it, at most every other client's: the slowest orbit of the closed
  // loop is the train (every client's prompt released together, ttft_train_ms), unless prompts
  // wait for KV memory. A measured TTFT above kTtftCeilingFactor x the slower of the prediction
  // and the train, where the KV pool holds every client's whole request (prompt + answer)
  // kPoolHoldsClients times over (`pool_holds_clients`: whole requests the pool holds per client),
  // is a delay outside the engine's step loop: the point is not modellable (kAboveCeilingReason).
  double pool_holds_clients = NAN;
  bool above_ttft_ceiling() const;
  // Set when the point runs other engine flags than the harness's, with why (Options::infer_resent_prompts).
  std::string harness_note;
};

// Of the sequences a deployment runs at once, the share a measurement must have had in flight not
// to be flagged (PointResult::few_in_flight). Chosen from the calibration split's aggregated points
// (all engines and GPUs): Little's law over what the plan runs at once gives 0.16-0.43 on the 15
// points with a TTFT that no engine queue explains (vLLM gpt-oss-120b H100 at 512 clients, SGLang
// Qwen3-32B H100 TP1 at 16), then 0.54 and up (prompts queued for prefill), median 0.97.
inline constexpr double kFewInFlight = 0.5;
inline bool PointResult::few_in_flight() const {
  return runs_at_once > 0 && std::isfinite(in_flight) && in_flight < kFewInFlight * runs_at_once;
}

inline constexpr double kTtftCeilingFactor = 3, kPoolHoldsClients = 2;
inline constexpr const char* kAboveCeilingReason =
    "measured TTFT above 3x the slowest closed-loop orbit servesim's engine runs (clients in lockstep), with a KV pool "
    "holding every client's whole request twice over: a delay outside SGLang's step loop, which prefills whenever a "
    "prompt can be admitted (field ttft_train_ms)";

inline bool PointResult::above_ttft_ceiling() const {
  return std::isfinite(ttft_train_ms) && pool_holds_clients >= kPoolHoldsClients &&
         measured.ttft_ms > kTtftCeilingFactor * std::max(ttft_ms, ttft_train_ms);
}

// aiperf's --num-dataset-entries default: the distinct synthetic prompts a run cycles through.
inline constexpr std::int64_t kAiperfDatasetEntries = 100;
// A harness's run set: one dump's (MeasuredPoint::source_file) rows of one engine release, model and GPU.
std::string run_set_of(const MeasuredPoint& p);
// A measurement that proves its prompts were served from a prefix cache: its cycle is shorter than
// prefilling them can take (below_floor), and its TPOT is above the decode floor, so its requests
// were not failed or cut short (which would explain a short cycle too).
bool resends_prompts(const PointResult& r);

// The spread-out orbit's answer-length sd (tokens, constant over loads) and the least gap between
// the two orbits' TTFT (a fraction of the spread-out one) for a lock fraction to be read.
inline constexpr double kLockSpreadTokens = 200, kLockMinGap = 0.15;

// Load regime of a closed-loop point with `clients_per_replica` clients on each replica:
// "saturated" beyond max_num_seqs (requests queue), else "light" up to 16, "medium" up to 128,
// "heavy" above.
std::string load_regime(double clients_per_replica, int max_num_seqs);

// The scenario a point is run as, or throws Error with the reason it cannot be modelled.
nlohmann::json point_scenario(const MeasuredPoint& p, const Options& o, std::string* resolved_model);
// The engine profile a point runs on: its backend's profile of the measured release (the newest of
// that engine for unknown versions; "" = the newest vLLM); with engine_any, every sglang / trtllm
// point runs the newest vLLM.
std::string point_engine_profile(const MeasuredPoint& p, bool engine_any);

// Signed relative error (pred - meas) / meas; NaN when either is missing or meas is not > 0.
double signed_error(double predicted, double measured);

struct Report {
  std::vector<PointResult> points;   // every point read, filtered ones excluded (counted below)
  int filtered_out = 0;              // points the filters left out
  CsvReadStats csv;
  double wall_s = 0;                 // whole run, host time
  int threads = 1;
};
// Sets up and runs every point (unmodellable ones keep their reason).
Report run(std::vector<MeasuredPoint> points, const Options& o);

// Error statistics of one group: per metric count, median signed, median |.|, p90 |.| (fractions).
struct ErrorStats { int n = 0; double median_signed = NAN, median_abs = NAN, p90_abs = NAN; };
ErrorStats error_stats(std::vector<double> errors);

// {"points": [...], "groups": [...], "by_gpu": [...], "unmodellable": [...], ...}.
nlohmann::json to_json(const Report& r, const Options& o);
// One row per point (measured, predicted, errors, reason).
std::string to_csv(const Report& r);
// The prediction-band table of a validation's residuals (points measured below their prefill
// floor, see PointResult, are left out) (per GPU, metric and load regime).
BandTable bands_of(const Report& r, int min_points, nlohmann::json meta);

// The per-GPU median |error| of each metric across seeds, so whether a figure meets a target is read
// across seeds, not at one: `points` run again at seeds o.seed + 1 ... o.seed + seeds - 1, after
// `first_by_gpu` (to_json's "by_gpu" of the o.seed run). {"seeds": [...], "by_gpu": [{"engine",
// "gpu", "mode", "ttft" | "itl" | "output_tps": [median |error| % per seed, null where the group
// has no figure]}]}.
nlohmann::json across_seeds(const std::vector<MeasuredPoint>& points, const Options& o, int seeds,
                            const nlohmann::json& first_by_gpu);
// Its table: one row per group and metric, a column per seed, then min / median / max.
std::string across_seeds_text(const nlohmann::json& across);

// Scores p's measured figures (TTFT, TPOT, output tok/s) against table t: one check a metric, a hit
// when the band of its prediction holds it.
void add_band_checks(const BandTable& t, const PointResult& p, int& checks, int& hits);

// How many measured figures of the points fell inside the band their prediction carries, as a run
// prints it (run_bands): the calibration profile's own (its cross-validated residuals) where the base
// scenario names one (--calibration) and it applies to the point (GPU, engine build, model,
// precision), else the shipped table. The <floor and <half points are left out, as from the bands.
struct BandCover {
  int checks = 0, inside = 0;                   // every figure scored
  int profile_checks = 0, profile_inside = 0;   // those whose band is the profile's
};
BandCover band_cover(const Report& r, const Options& o);

// What a calibration profile (--calibration) did to the simulated points: one entry per outcome
// (what applies, or what was left out and why), with the points and the kinds (model, GPU, engine
// build, precision) it covers; what applies first. Empty without a profile.
struct CalibrationUse {
  std::string head;                  // "calibration FILE (fitted on ...)"
  std::string what;                  // "applies gemm_scale x1.3, ..." or "nothing applies; left out ..."
  bool applies = false;
  int points = 0;
  std::vector<std::string> kinds;    // "model gpu engine-build precision"
};
std::vector<CalibrationUse> calibration_uses(const Report& r, const Options& o);

// Readable report: per-group error table, per-GPU totals, the unmodellable points with reasons.
std::string to_text(const Report& r, const Options& o);

}  // namespace servesim::sim::validate
