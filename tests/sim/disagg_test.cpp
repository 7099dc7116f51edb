// Disaggregated serving against numbers worked out by hand from the same cost models.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "sim/simulate.hpp"
#include "sim/topology/deployment.hpp"

namespace servesim::sim {
namespace {

DeploymentSpec reference_spec() {
  DeploymentSpec s;
  s.model = &models::model("nemotron-3.5-super-vl");
  s.instance = &hw::Catalog::global().instance("p5en.48xlarge");
  s.gpu = &hw::Catalog::global().gpu(s.instance->gpu);
  s.nodes = 2;
  s.weights = hw::Precision::bf16;
  s.kv_dtype = hw::Precision::bf16;
  return s;
}

TopologyChoice one_p_one_d() {
  TopologyChoice t;
  t.kind = TopologyChoice::Kind::disaggregated;
  t.prefill = t.decode = t.encode = models::Parallelism{8, 1, 1};
  return t;
}

workloads::WorkloadConfig closed(int concurrency, std::int64_t isl, std::int64_t osl, std::int64_t requests) {
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::concurrency;
  w.concurrency = concurrency;
  w.requests = requests;
  w.warmup_requests = concurrency > 1 ? concurrency : 0;
  w.isl = workloads::LengthDist::fixed_at(isl);
  w.osl = workloads::LengthDist::fixed_at(osl);
  return w;
}

TEST(Disagg, LoneRequestTtftIsPrefillPlusTransferPlusOneDecodeStep) {
  const DeploymentSpec spec = reference_spec();
  const Deployment d(one_p_one_d(), spec);
  ASSERT_EQ(d.name(), "disaggregated-1p1d");
  const std::int64_t isl = 4000;
  const auto r = d.run(closed(1, isl, 50, 1));
  ASSERT_EQ(r.summary.request_count, 1);

  const auto cost = models::make_step_cost(*spec.model, *spec.gpu, spec.weights, {8, 1, 1}, spec.kv_dtype);
  const double overhead = spec.engine.overhead_per_step_s();
  models::StepBatch prefill;                  // the whole prompt in one chunk (4000 <= 8192)
  prefill.prefill_seqs = 1;
  prefill.prefill_tokens = isl;
  prefill.prefill_attention_pairs = double(isl) * double(isl + 1) / 2;
  models::StepBatch decode;                   // first decode step: context = prompt + the prefill's token
  decode.decode_seqs = 1;
  decode.decode_context_tokens = isl + 1;
  // Prefill on node 0, decode on node 1: 8 EFA lanes of the p5en's per-GPU NIC share.
  ASSERT_FALSE(d.placement().same_nvlink_domain(0, 1));
  ASSERT_EQ(d.placement().lane(0, 1, *spec.gpu).kind, LinkKind::efa);
  const double bytes = models::handoff_bytes(*spec.model, isl, spec.kv_dtype);
  const double transfer = spec.instance->efa_latency_s + bytes / (8 * spec.instance->efa_per_gpu_bytes_per_s);
  const double ttft = cost->seconds(prefill) + overhead + transfer + cost->seconds(decode) + overhead;
  EXPECT_NEAR(r.summary.ttft_ms.p50, ttft * 1e3, 1e-6);
  EXPECT_EQ(r.transfers.handoffs, 1);
  EXPECT_NEAR(r.transfers.bytes, bytes, 1e-3);
  EXPECT_NEAR(r.transfers.seconds, transfer, 1e-12);
  // After the first token the decode worker emits one token per step: ITL = decode step time.
  EXPECT_GT(r.summary.itl_ms.p50, (cost->seconds(decode) + overhead) * 1e3 * 0.99);
  EXPECT_LT(r.summary.itl_ms.p50, (cost->seconds(decode) + overhead) * 1e3 * 1.05);
  EXPECT_EQ(r.summary.total_output_tokens, 50);
  // A response preamble of 3 tokens (gpt-oss's harmony header): the client's first text is the
  // decode worker's 4th token, three decode steps later (contexts isl + 2 .. isl + 4), and it
  // counts 47 visible tokens.
  DeploymentSpec hs = spec;
  hs.engine.response_preamble_tokens = 3;
  const auto h = Deployment(one_p_one_d(), hs).run(closed(1, isl, 50, 1));
  double later = 0;
  for (int k = 2; k <= 4; ++k) {
    models::StepBatch step;
    step.decode_seqs = 1;
    step.decode_context_tokens = isl + k;
    later += cost->seconds(step) + overhead;
  }
  EXPECT_NEAR(h.summary.ttft_ms.p50, (ttft + later) * 1e3, 1e-6);
  EXPECT_EQ(h.summary.total_output_tokens, 47);
  // The serving framework's way from the prefill to the decode worker (a fixed 200 ms here) and a
  // pull cost of 12 us per prompt token beyond the link's bandwidth come on top, nothing else; the
  // transfer counts the per-token part.
  DeploymentSpec fs = spec;
  fs.frontend.emplace();
  fs.frontend->disagg.handoff = {0.2, 0.0};
  fs.frontend->disagg.pull_s_per_token = 12e-6;
  const auto f = Deployment(one_p_one_d(), fs).run(closed(1, isl, 50, 1));
  EXPECT_NEAR(f.summary.ttft_ms.p50, (ttft + 0.2 + 12e-6 * isl) * 1e3, 1e-6);
  EXPECT_NEAR(f.transfers.seconds, transfer + 12e-6 * isl, 1e-12);
  fs.frontend->enabled = false;   // --no-frontend: the prefill reaches its decode worker at once
  EXPECT_NEAR(Deployment(one_p_one_d(), fs).run(closed(1, isl, 50, 1)).summary.ttft_ms.p50, ttft * 1e3, 1e-6);
}

TEST(Disagg, ACohortQueuesAtThePrefillWorkerOneBudgetAtATime) {
  // Four clients send a 4,000-token prompt at once to one prefill worker whose token budget
  // (max_num_batched_tokens) is one prompt: its steps take them one at a time, so the k-th
  // prompt's prefill ends k + 1 steps in, and the cohort waits 0 + 1 + 2 + 3 = 6 prefill steps in
  // all, 1.5 a request. Each answer is one token: the decode worker is idle when each pull lands
  // (pull + decode step are shorter than a prefill step) and samples it in one step.
  DeploymentSpec spec = reference_spec();
  const std::int64_t isl = 4000;
  spec.engine.max_num_batched_tokens = isl;
  const auto cost = models::make_step_cost(*spec.model, *spec.gpu, spec.weights, {8, 1, 1}, spec.kv_dtype);
  const double overhead = spec.engine.overhead_per_step_s();
  models::StepBatch prefill;
  prefill.prefill_seqs = 1;
  prefill.prefill_tokens = isl;
  prefill.prefill_attention_pairs = double(isl) * double(isl + 1) / 2;
  models::StepBatch decode;
  decode.decode_seqs = 1;
  decode.decode_context_tokens = isl + 1;
  const double bytes = models::handoff_bytes(*spec.model, isl, spec.kv_dtype);
  const double transfer = spec.instance->efa_latency_s + bytes / (8 * spec.instance->efa_per_gpu_bytes_per_s);
  const double g = cost->seconds(prefill), step = cost->seconds(decode) + overhead;
  ASSERT_LT(transfer + step, g);
  workloads::WorkloadConfig w = closed(4, isl, 1, 4);
  w.warmup_requests = 0;
  // Synchronous loop: every prefill step pays the host's time to form it, g + overhead.
  // TTFT of the k-th = (k + 1) x (g + overhead) + transfer + one decode step; mean over k = 0..3.
  spec.engine.async_scheduling = false;
  const auto r = Deployment(one_p_one_d(), spec).run(w);
  ASSERT_EQ(r.summary.request_count, 4);
  const double sync_mean = 2.5 * (g + overhead) + transfer + step;
  EXPECT_NEAR(r.summary.ttft_ms.avg, sync_mean * 1e3, 1e-6);
  EXPECT_NEAR(r.summary.ttft_ms.max - r.summary.ttft_ms.min, 3 * (g + overhead) * 1e3, 1e-6);
  EXPECT_EQ(r.transfers.max_in_flight, 1);
  // Async scheduling: the next batch is formed while the previous one runs, so only the first
  // step pays the overhead: overhead + (k + 1) x g + transfer + one decode step.
  spec.engine.async_scheduling = true;
  const auto a = Deployment(one_p_one_d(), spec).run(w);
  const double async_mean = overhead + 2.5 * g + transfer + step;
  EXPECT_NEAR(a.summary.ttft_ms.avg, async_mean * 1e3, 1e-6);
  EXPECT_NEAR(a.summary.ttft_ms.max - a.summary.ttft_ms.min, 3 * g * 1e3, 1e-6);
  // The serving framework's handoff (a fixed 200 ms) is a delay after each prefill, not work on
  // the prefill worker: the queue does not grow, every request is 200 ms later.
  spec.frontend.emplace();
  spec.frontend->disagg.handoff = {0.2, 0.0};
  spec.frontend->disagg.pull_s_per_token = 0;
  EXPECT_NEAR(Deployment(one_p_one_d(), spec).run(w).summary.ttft_ms.avg, (async_mean + 0.2) * 1e3, 1e-6);
}

// Four clients of 1,000 + 50 tokens, 10 requests each, no warm-up, behind the API server (and,
// disaggregated, the framework's 200 ms handoff).
PointResult four_clients_behind_the_frontend(const TopologyChoice& t) {
  DeploymentSpec spec = reference_spec();
  spec.frontend.emplace();
  spec.frontend->disagg.handoff = {0.2, 0.0};
  workloads::WorkloadConfig w = closed(4, 1000, 50, 40);
  w.warmup_requests = 0;
  return Deployment(t, spec).run(w);
}

TEST(Disagg, FourClientsOverFourIdleDecodeWorkersTakeOneWorkerEach) {
  // One TP2 prefill worker, four TP2 decode workers, four clients of 1,000 + 50 tokens. Each
  // decode worker holds at most one client's request at a time, so every decode step carries one
  // sequence and the four workers share the 4 x 10 requests evenly: the router counts the requests
  // it has sent that are still in the framework's 200 ms handoff (each decode worker's own queue
  // does not show them yet) and breaks ties in turn, where the lowest-numbered idle worker took
  // every request that found the others idle too (worker 0 carried all four clients' steps).
  TopologyChoice t = one_p_one_d();
  t.prefill = t.decode = models::Parallelism{2, 1, 1};
  t.decode_workers = 4;
  const PointResult r = four_clients_behind_the_frontend(t);
  ASSERT_EQ(r.summary.request_count, 40);
  ASSERT_EQ(r.workers.size(), 5u);
  for (int i = 1; i <= 4; ++i) {
    const WorkerStats& s = r.workers[static_cast<std::size_t>(i)];
    EXPECT_EQ(s.scheduled_seqs, s.steps) << "decode worker " << i - 1 << ": more than one sequence in a step";
    // 10 requests x 50 steps: a pulled request arrives holding the prefill's token, and the decode
    // worker samples the client's 50 tokens one step each.
    EXPECT_EQ(s.steps, 10 * 50) << "decode worker " << i - 1;
  }
}

TEST(Routing, FourClientsOverFourIdleReplicasTakeOneReplicaEach) {
  // Four TP2 replicas behind the API server, four clients of 1,000 + 50 tokens.
  // The router picks a replica when the API server takes the request, which reaches the replica's
  // scheduler only after handling and the IPC hop: the router counts what it has sent that is still
  // on its way and breaks ties in turn, so each replica serves one client, one sequence a step, and
  // the four share the 40 requests evenly. (It compared the schedulers' queues alone, ties to the
  // lowest index: the four first requests all went to replica 0.)
  TopologyChoice t;
  t.agg = models::Parallelism{2, 1, 1};
  t.replicas = 4;
  const PointResult r = four_clients_behind_the_frontend(t);
  ASSERT_EQ(r.summary.request_count, 40);
  ASSERT_EQ(r.workers.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.workers[i].scheduled_seqs, r.workers[i].steps) << "replica " << i << ": more than one sequence in a step";
    EXPECT_EQ(r.workers[i].steps, r.workers[0].steps) << "replica " << i;
  }
}

TEST(Disagg, LongPromptsUnderLoadDoNotHurtItlAsMuchAsAggregated) {
  // 16k-token prompts at 8 clients on the same 16 H200: aggregated replicas interleave prefill
  // chunks with decodes, so decodes wait behind chunks; the decode worker never prefills.
  const DeploymentSpec spec = reference_spec();
  TopologyChoice agg;
  agg.agg = models::Parallelism{8, 1, 1};
  const Deployment a(agg, spec), d(one_p_one_d(), spec);
  ASSERT_EQ(a.gpus(), d.gpus());
  const auto ra = a.run(closed(8, 16000, 200, 64));
  const auto rd = d.run(closed(8, 16000, 200, 64));
  EXPECT_LE(rd.summary.itl_ms.p50, ra.summary.itl_ms.p50);
  EXPECT_LE(rd.summary.itl_ms.p90, ra.summary.itl_ms.p90);
}

TEST(Disagg, SameSeedSameBits) {
  const DeploymentSpec spec = reference_spec();
  const Deployment d(one_p_one_d(), spec);
  const auto r1 = d.run(closed(16, 2000, 100, 64));
  const auto r2 = d.run(closed(16, 2000, 100, 64));
  EXPECT_EQ(r1.summary.ttft_ms.p99, r2.summary.ttft_ms.p99);
  EXPECT_EQ(r1.summary.itl_ms.avg, r2.summary.itl_ms.avg);
  EXPECT_EQ(r1.end_s, r2.end_s);
}

TEST(Disagg, PromptsOfSixtyPercentOfTheDecodePoolAllCompleteOneAtATime) {
  // Llama 3.1 70B FP8 on one H100 per worker: 861 KV blocks per worker, so a prompt of 60 % of
  // them fits once. With async scheduling a finished request's blocks are freed at the next step;
  // the decode worker, idle after its last request, must still free them and grant the next
  // reservation, or the other requests are never pulled (they were lost, 1 of 24 completed).
  DeploymentSpec spec;
  spec.model = &models::model("llama-3.1-70b");
  spec.instance = &hw::Catalog::global().instance("p5.48xlarge");
  spec.gpu = &hw::Catalog::global().gpu(spec.instance->gpu);
  spec.weights = spec.kv_dtype = hw::Precision::fp8;
  spec.engine.async_scheduling = true;
  TopologyChoice t;
  t.kind = TopologyChoice::Kind::disaggregated;
  t.prefill = t.decode = models::Parallelism{1, 1, 1};
  const Deployment d(t, spec);
  const std::int64_t blocks = d.kv_blocks();
  const std::int64_t isl = blocks * spec.engine.block_size * 6 / 10, osl = 100;
  ASSERT_GT(2 * ((isl + 1) / spec.engine.block_size + 1), blocks);   // two never fit at once
  const auto lone = d.run(closed(1, isl, osl, 1));
  ASSERT_EQ(lone.summary.request_count, 1);
  const int n = 24;
  workloads::WorkloadConfig w = closed(4, isl, osl, n);
  w.warmup_requests = 0;
  const auto r = d.run(w);
  EXPECT_EQ(r.summary.request_count, n);
  EXPECT_EQ(r.transfers.handoffs, n);
  EXPECT_EQ(r.summary.total_output_tokens, n * osl);
  // One request at a time on the decode worker: n lone requests, less the prefills that overlap
  // an earlier request's decode (at most n - 1 of them; the prefill is under a fifth of a lone run).
  const double prefill_s = lone.summary.ttft_ms.p50 * 1e-3;
  EXPECT_LE(r.end_s, n * lone.end_s * 1.001);
  EXPECT_GE(r.end_s, n * lone.end_s - (n - 1) * prefill_s);
  // Little's law: at most the 4 clients in flight, and (the decode worker serial) at least 1.
  const double in_flight = r.summary.request_throughput_per_s * r.summary.request_latency_ms.avg * 1e-3;
  EXPECT_LE(in_flight, 4.0 + 1e-9);
  EXPECT_GE(in_flight, 1.0);
  // Synchronous scheduling frees at once: the same count.
  spec.engine.async_scheduling = false;
  EXPECT_EQ(Deployment(t, spec).run(w).summary.request_count, n);
}

TEST(Disagg, TopologyThatDoesNotFitTheNodesIsAnError) {
  DeploymentSpec spec = reference_spec();
  TopologyChoice t = one_p_one_d();
  t.decode_workers = 2;
  EXPECT_THROW(Deployment(t, spec), Error);
  spec.nodes = 3;
  EXPECT_NO_THROW(Deployment(t, spec));
}

TEST(Disagg, MtpWithFullAcceptanceCutsDecodeSteps) {
  DeploymentSpec spec = reference_spec();
  const Deployment plain(one_p_one_d(), spec);
  spec.mtp = MtpConfig{2, {1.0}, draft_cost_fraction(*spec.model), 5};
  const Deployment mtp(one_p_one_d(), spec);
  const auto rp = plain.run(closed(1, 1000, 301, 1));
  const auto rm = mtp.run(closed(1, 1000, 301, 1));
  // 300 tokens after the first: 300 decode steps plain, 100 with 3 tokens per step.
  EXPECT_LT(rm.summary.itl_ms.p50 * 2.0, rp.summary.itl_ms.p50);
  EXPECT_EQ(rm.summary.total_output_tokens, 301);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// Encode / prefill / decode: a lone request with one 1024x1024 image. Tiling by hand: a 2x2 grid
// of 512-px tiles plus the thumbnail = 5 tiles, 5 x 256 = 1280 vision tokens on top of the text.
TEST(Disagg, LoneVisionRequestTtftIsEncodePlusEmbeddingsPlusPrefillPlusKvPlusOneDecodeStep) {
  DeploymentSpec spec = reference_spec();
  spec.nodes = 3;   // prefill node 0, decode node 1, encoder node 2: both handoffs cross EFA
  TopologyChoice t = one_p_one_d();
  t.encode_workers = 1;
  const Deployment d(t, spec);
  ASSERT_EQ(d.name(), "disaggregated-1e1p1d");
  ASSERT_FALSE(d.placement().same_nvlink_domain(2, 0));
  workloads::WorkloadConfig w = closed(1, 3000, 50, 1);
  w.multimodal.images.push_back({1024, 1024, 1});
  const auto r = d.run(w);
  ASSERT_EQ(r.summary.request_count, 1);
  const int tiles = 5;
  const std::int64_t vision_tokens = 5 * 256, prompt = 3000 + vision_tokens;
  EXPECT_EQ(r.summary.input_sequence_length.avg, double(prompt));

  const auto cost = models::make_step_cost(*spec.model, *spec.gpu, spec.weights, {8, 1, 1}, spec.kv_dtype);
  const double overhead = spec.engine.overhead_per_step_s();
  const double encode = cost->encoder_seconds(tiles) + overhead;
  // Embeddings into the LLM: BF16 vectors of the model's width, 8 EFA lanes each side.
  const double lat = spec.instance->efa_latency_s, lanes_bw = 8 * spec.instance->efa_per_gpu_bytes_per_s;
  const double embed = lat + double(vision_tokens) * 2.0 * double(spec.model->hidden) / lanes_bw;
  models::StepBatch prefill;   // the encoded prompt in one chunk, no encoder work left
  prefill.prefill_seqs = 1;
  prefill.prefill_tokens = prompt;
  prefill.prefill_attention_pairs = double(prompt) * double(prompt + 1) / 2;
  const double kv = lat + models::handoff_bytes(*spec.model, prompt, spec.kv_dtype) / lanes_bw;
  models::StepBatch decode;
  decode.decode_seqs = 1;
  decode.decode_context_tokens = prompt + 1;
  const double ttft = encode + embed + cost->seconds(prefill) + overhead + kv + cost->seconds(decode) + overhead;
  EXPECT_NEAR(r.summary.ttft_ms.p50, ttft * 1e3, 1e-6);
  EXPECT_EQ(r.transfers.handoffs, 1);   // the KV handoff; the embeddings are not a KV handoff
  EXPECT_NEAR(r.transfers.seconds, kv, 1e-12);
  // Without the encoder pool the prefill worker runs the encoder in its first chunk's step.
  const Deployment d2(one_p_one_d(), reference_spec());
  const auto r2 = d2.run(w);
  models::StepBatch prefill_vision = prefill;
  prefill_vision.vision_tiles = tiles;
  const double ttft2 = cost->seconds(prefill_vision) + overhead + kv + cost->seconds(decode) + overhead;
  EXPECT_NEAR(r2.summary.ttft_ms.p50, ttft2 * 1e3, 1e-6);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// The same run with steady decode stretches on and off: every request's times, every worker's
// counters, their step samples and the transfers equal, bit for bit.
void expect_stretches_change_nothing(const TopologyChoice& topo, const workloads::WorkloadConfig& w, std::size_t requests) {
  const Deployment d(topo, reference_spec());
  struct Run {
    std::vector<RequestRecord> records;
    PointResult r;
  };
  auto run = [&](bool steady) {
    Run out;
    MetricsCollector m(true);
    auto workload = workloads::make_workload(w);
    out.r = d.run_disaggregated(*workload, m, [&](DisaggregatedCluster& c) { c.set_steady_stretches(steady); });
    out.records = m.records();
    return out;
  };
  const Run on = run(true), off = run(false);
  EXPECT_EQ(on.records.size(), off.records.size());
  EXPECT_EQ(on.records.size(), requests);
  for (std::size_t i = 0; i < std::min(on.records.size(), off.records.size()); ++i) {
    EXPECT_EQ(on.records[i].id, off.records[i].id);
    EXPECT_EQ(on.records[i].first_token_s, off.records[i].first_token_s);
    EXPECT_EQ(on.records[i].second_token_s, off.records[i].second_token_s);
    EXPECT_EQ(on.records[i].finish_s, off.records[i].finish_s);
  }
  EXPECT_EQ(on.r.end_s, off.r.end_s);
  EXPECT_EQ(on.r.workers.size(), off.r.workers.size());
  for (std::size_t i = 0; i < std::min(on.r.workers.size(), off.r.workers.size()); ++i) {
    EXPECT_EQ(on.r.workers[i].steps, off.r.workers[i].steps);
    EXPECT_EQ(on.r.workers[i].busy_s, off.r.workers[i].busy_s);
    EXPECT_EQ(on.r.workers[i].kv_block_seconds, off.r.workers[i].kv_block_seconds);
    EXPECT_EQ(on.r.workers[i].gpu_idle_s, off.r.workers[i].gpu_idle_s);
  }
  EXPECT_EQ(on.r.transfers.seconds, off.r.transfers.seconds);
  EXPECT_EQ(on.r.summary.itl_ms.p50, off.r.summary.itl_ms.p50);
  for (std::size_t i = 0; i < std::min(on.r.summary.replicas.size(), off.r.summary.replicas.size()); ++i) {
    EXPECT_EQ(on.r.summary.replicas[i].steps, off.r.summary.replicas[i].steps);
    EXPECT_EQ(on.r.summary.replicas[i].busy_s, off.r.summary.replicas[i].busy_s);
    EXPECT_EQ(on.r.summary.replicas[i].mean_kv_utilization, off.r.summary.replicas[i].mean_kv_utilization);
  }
}

// The decode workers' steady decode stretches run in place give what every step run through the
// event heap gives: the same requests to the bit, the same worker stats and transfers. 1P1D over
// EFA (transfers in flight while the decode worker runs), 24 clients, answers of spread lengths.
TEST(Disagg, SteadyStretchesGiveTheResultsOfEveryStepThroughTheHeap) {
  workloads::WorkloadConfig w = closed(24, 1500, 300, 120);
  w.osl = workloads::LengthDist::normal_of(300, 80);
  expect_stretches_change_nothing(one_p_one_d(), w, 144);
}

// Three decode workers: each one's stretch is cut by the others' steps and resumes at its step's
// end (DisaggregatedCluster::run_stretch) with the results of every step through the heap, at a
// client per worker (long stretches, cut every step) and at many (short ones, requests arriving).
TEST(Disagg, StretchesCutByAnotherWorkersStepResumeWithTheSameResults) {
  TopologyChoice t = one_p_one_d();
  t.prefill = t.decode = models::Parallelism{4, 1, 1};   // four TP4 workers on the two nodes
  t.decode_workers = 3;
  expect_stretches_change_nothing(t, closed(3, 1000, 200, 30), 33);
  workloads::WorkloadConfig w = closed(48, 1000, 200, 150);
  w.osl = workloads::LengthDist::normal_of(200, 60);
  expect_stretches_change_nothing(t, w, 198);
}


// Attention data parallelism per role: a decode worker of TP1 x DP8 ranks with its experts spread
// over the eight (EP8) beside a TP8 EP8 prefill worker, DeepSeek-V3 NVFP4 on two B200 nodes: 8 + 8
// GPUs, each decode rank its own KV pool (the worker holds 8 of a rank's plan), the label as given.
TEST(Disagg, AttentionDpDecodeWorkerHoldsEveryRanksPool) {
  const Scenario s = parse_scenario(R"({"model": "deepseek-v3", "gpu": "b200", "precision": "nvfp4", "tp": 8, "ep": 8,
      "topology": {"kind": "disagg", "prefill_workers": 1, "decode_workers": 1, "decode_tp": 1, "decode_dp": 8},
      "workload": {"concurrency": 16, "isl": 1024, "osl": 32, "requests": 32, "warmup_requests": 0}})",
                                    "t");
  const models::Parallelism d = role_parallelism(s, s.topology.decode_tp, s.topology.decode_dp, s.topology.decode_ep);
  EXPECT_EQ(d.tp, 1);
  EXPECT_EQ(d.dp, 8);
  EXPECT_EQ(d.ep, 8);   // EP on spans the role's TP x DP GPUs
  const SimResult r = simulate(s);
  EXPECT_EQ(r.gpus, 16);
  EXPECT_NE(r.deployment.find("1 x prefill TP8 EP8, 1 x decode TP1 DP8 EP8"), std::string::npos) << r.deployment;
  EXPECT_EQ(r.plan.dp, 8);
  EXPECT_EQ(r.kv_blocks, 8 * r.plan.num_kv_blocks);
  EXPECT_EQ(r.summary.request_count, 32);
}

// data_parallel_size with a disaggregated topology gives every role DP ranks, and expert
// parallelism follows each role's TP x DP (it once followed its TP alone: EP 1 on TP1 DP8).
TEST(Disagg, ScenarioDpAndEpCarryIntoEveryRole) {
  const Scenario s = parse_scenario(R"({"model": "deepseek-v3", "gpu": "b200", "precision": "nvfp4", "tp": 1, "dp": 8, "ep": 8,
      "topology": {"kind": "disagg", "prefill_tp": 2, "decode_ep": 1},
      "workload": {"concurrency": 4, "isl": 128, "osl": 8, "requests": 8}})",
                                    "t");
  const models::Parallelism p = role_parallelism(s, s.topology.prefill_tp, s.topology.prefill_dp, s.topology.prefill_ep);
  EXPECT_EQ(p.gpus(), 16);
  EXPECT_EQ(p.ep, 16);
  EXPECT_EQ(role_parallelism(s, s.topology.decode_tp, s.topology.decode_dp, s.topology.decode_ep).ep, 1);
}

// A role's EP must divide its TP x DP GPUs, and a divisor below it (MoE TP x EP) is TensorRT-LLM's
// and SGLang's, not vLLM's: one line each, naming the role's field.
TEST(Disagg, RoleExpertParallelismOtherThanItsGpusIsOneClearError) {
  auto error = [](int ep, const std::string& engine) {
    try {
      parse_scenario(R"({"model": "deepseek-v3", "gpu": "b200", "tp": 1, "engine_profile": ")" + engine + R"(",
          "topology": {"kind": "disagg", "decode_dp": 8, "decode_ep": )" + std::to_string(ep) + R"(},
          "workload": {"concurrency": 4, "isl": 128, "osl": 8, "requests": 8}})",
                     "f.json");
    } catch (const Error& e) {
      return e.field() + ": " + e.reason();
    }
    return std::string();
  };
  EXPECT_NE(error(3, "vllm").find("topology.decode_ep: must be 1 (experts sharded by TP), the decode worker's TP x DP (1 x 8 = 8)"),
            std::string::npos) << error(3, "vllm");
  EXPECT_NE(error(4, "vllm").find("topology.decode_ep: 4 with tp x dp = 8: vLLM's expert parallelism spans the whole group"),
            std::string::npos) << error(4, "vllm");
  EXPECT_EQ(error(4, "sglang"), "");
  EXPECT_THROW(parse_scenario(R"({"model": "deepseek-v3", "topology": {"kind": "agg", "decode_dp": 8},
      "workload": {"concurrency": 4, "isl": 128, "osl": 8, "requests": 8}})", "f.json"), Error);
}

}  // namespace
}  // namespace servesim::sim
