#include "sim/validate/run_bands.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/text.hpp"
#include "sim/calibration.hpp"
#include "sim/engine/engine_profile.hpp"
#include "hwmodels/catalog.hpp"
#include "sim/validate/validate.hpp"

namespace servesim::sim::validate {

RunKind run_kind(const Scenario& s, const SimResult& r) {
  RunKind k;
  // A deployment on a named instance runs on that instance's GPU, whatever `gpu` says.
  const auto& cat = hw::Catalog::global();
  try {
    k.gpu = text::lower(s.topology.present && !s.topology.instance.empty() ? cat.instance(s.topology.instance).gpu
                                                                          : cat.gpu(s.gpu).name);
  } catch (const std::exception&) {
    k.gpu = text::lower(s.gpu);
  }
  k.mode = band_mode(r.disaggregated);
  // The engine the run ran (its resolved profile), so that an SGLang or TensorRT-LLM run reads its own
  // engine's bands, not vLLM's.
  const std::string& named = !r.engine.engine_profile.empty() ? r.engine.engine_profile
                             : !s.engine.engine_profile.empty() ? s.engine.engine_profile
                                                                : s.engine_profile;
  try {
    k.engine = engine_profile(named.empty() ? kNewestEngine : named).engine;
  } catch (const Error&) {   // a run of no named profile: the default engine
  }
  k.max_num_seqs = s.engine.max_num_seqs;
  if (s.workload.arrival == workloads::Arrival::concurrency) {
    int replicas = s.replicas();
    if (r.disaggregated) replicas = s.topology.decode_workers;
    else if (s.topology.present) replicas = static_cast<int>(r.summary.replicas.size());
    k.clients_per_replica = double(s.workload.concurrency) / std::max(1, replicas);
  } else {
    double sum = 0;
    int n = 0;
    for (const auto& x : r.summary.replicas)
      if (!r.disaggregated || x.name.rfind("decode", 0) == 0) sum += x.mean_batch_size, ++n;
    k.clients_per_replica = n ? sum / n : 0;
  }
  k.regime = load_regime(k.clients_per_replica, k.max_num_seqs);
  return k;
}

Band point_band(const std::string& gpu, const std::string& mode, const char* metric, double clients_per_replica,
                int max_num_seqs, double predicted, const std::string& engine) {
  return band_for(text::lower(gpu), engine, mode, metric, load_regime(clients_per_replica, max_num_seqs), predicted);
}

const BandTable& run_band_table(const Scenario& s, const SimResult& r, const RunKind& k) {
  // A calibrated run on the GPU, engine and model its profile was fitted on takes the profile's
  // cross-validated bands; any other run the validated ones.
  const bool own = s.calibration && applicable(*s.calibration, k.gpu, r.engine.engine_profile, s.model,
                                               std::string(hw::to_string(s.precision))).bands;
  return own ? s.calibration->bands : embedded_bands();
}

std::string run_band_legend(const Scenario& s, const SimResult& r) {
  if (&run_band_table(s, r, run_kind(s, r)) == &embedded_bands()) return band_legend();
  return "the calibration profile " + s.calibration->file + "'s: the 80 % prediction interval of measured / predicted from its "
         "cross-validated residuals of the point's kind (GPU, engine, aggregated or disaggregated, load regime), pooled with the "
         "shipped band's spread";
}

nlohmann::json run_bands(const Scenario& s, const SimResult& r) {
  const RunKind k = run_kind(s, r);
  const Summary& m = r.summary;
  const BandTable& table = run_band_table(s, r, k);
  const bool own = &table != &embedded_bands();
  auto band_for = [&](const std::string& gpu, const std::string& engine, const std::string& mode, const char* metric,
                      const std::string& regime, double v) { return validate::band_for(table, gpu, engine, mode, metric, regime, v); };
  auto both = [&](const char* metric, const Stats& st) {
    return nlohmann::json{{"avg", band_json(band_for(k.gpu, k.engine, k.mode, metric, k.regime, st.avg))},
                          {"p50", band_json(band_for(k.gpu, k.engine, k.mode, metric, k.regime, st.p50))}};
  };
  nlohmann::json j;
  j["kind"] = {{"gpu", k.gpu}, {"engine", k.engine}, {"mode", k.mode}, {"regime", k.regime}, {"clients_per_replica", k.clients_per_replica},
               {"max_num_seqs", k.max_num_seqs}};
  j["source"] = own ? "cross-validated residuals of the calibration " + s.calibration->file
                    : embedded_bands().meta.is_object() ? embedded_bands().meta.value("summary", std::string()) : std::string();
  j["time_to_first_token"] = both("ttft", m.ttft_ms);
  j["inter_token_latency"] = both("itl", m.itl_ms);
  j["output_token_throughput"] = band_json(band_for(k.gpu, k.engine, k.mode, "output_tps", k.regime, m.output_token_throughput_per_s));
  return j;
}

}  // namespace servesim::sim::validate
