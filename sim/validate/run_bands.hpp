// The prediction band of a simulated run: its kind (GPU, aggregated or disaggregated, load regime) and the bands of its TTFT,
// ITL and output throughput from the embedded table (sim/validate/bands.hpp).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/simulate.hpp"
#include "sim/validate/bands.hpp"

namespace servesim::sim::validate {

struct RunKind {
  std::string gpu;                 // catalogue GPU, lower case
  std::string engine = "vllm";     // the engine profile's engine: vllm, sglang, trtllm
  std::string mode;                // agg | disagg
  std::string regime;              // load_regime(clients_per_replica, max_num_seqs)
  double clients_per_replica = 0;  // closed loop: clients / serving replicas (disaggregated: decode workers);
                                   // open loop: the replicas' mean batch size
  int max_num_seqs = 0;
};
RunKind run_kind(const Scenario& s, const SimResult& r);

// The band table a run's figures take: its calibration profile's own (cross-validated residuals)
// where the scenario names one that applies to the run's GPU, engine build, model and precision, else
// the shipped one (embedded_bands()). `k`: run_kind(s, r).
const BandTable& run_band_table(const Scenario& s, const SimResult& r, const RunKind& k);

// What the bands run_band_table gives are, in one phrase for a legend: the shipped table's
// (band_legend()), or "the calibration profile FILE's: ...".
std::string run_band_legend(const Scenario& s, const SimResult& r);

// {"kind": {...}, "source": ..., "time_to_first_token": {"avg": band, "p50": band},
//  "inter_token_latency": {...}, "output_token_throughput": band}; a band is band_json().
nlohmann::json run_bands(const Scenario& s, const SimResult& r);

// The band of one predicted figure of a closed-loop point known by its kind alone: the GPU
// (catalogue name, any case), agg or disagg, the clients per serving replica (aggregated) or per
// decode worker (disaggregated) and max_num_seqs, which give the load regime, as run_kind() reads them.
Band point_band(const std::string& gpu, const std::string& mode, const char* metric, double clients_per_replica,
                int max_num_seqs, double predicted, const std::string& engine = "vllm");

}  // namespace servesim::sim::validate
