// Disaggregated serving as Dynamo runs it on vLLM: optional encode workers (vision encoder on
// image tiles / video frames, embeddings shipped to prefill), prefill workers and decode workers,
// each a vLLM engine of its own shape. After prefill, a decode worker reserves KV blocks + a
// Mamba state slot for the request (FIFO, so reservations cap the handoffs in flight), then pulls
// the attention KV and the Mamba conv/SSM state over the link model (NVLink inside a domain, EFA
// otherwise, processor-shared per worker port). The prefill worker holds its blocks until the
// pull completes. The client's first token is the one the decode worker samples in its first
// step after the pull (Dynamo discards the prefill's own sample), so
//   TTFT = queueing + prefill + transfer (+ queueing for a reservation) + one decode step.
#pragma once
#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "models/step_cost.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/pending_turns.hpp"
#include "sim/engine/steady_warmup.hpp"
#include "sim/engine/worker.hpp"
#include "sim/router/kv_router.hpp"
#include "sim/links/placement.hpp"
#include "sim/links/transfer_network.hpp"
#include "sim/metrics.hpp"
#include "sim/scheduler/ring.hpp"
#include "workloads/frontend.hpp"
#include "workloads/sessions.hpp"
#include "workloads/workload.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/scheduler/kv_offload.hpp"

namespace servesim::sim {

// One pool of identical workers.
struct WorkerPool {
  int count = 0;
  EngineConfig engine;                      // role set by the cluster
  const models::StepCostModel* cost = nullptr;
  std::int64_t kv_blocks = 0;               // per worker, usable blocks of its memory plan's pool
  models::KvDemand kv_demand;               // what a request holds in it
};

struct DisaggShape {
  WorkerPool encode, prefill, decode;       // encode.count may be 0 (prefill runs the encoder)
  int max_encode_tiles_per_step = 64;       // encoder batch cap (vLLM encoder budget / 256 tokens per tile)
  // Placement of the workers, in order prefill..., decode..., encode...; GPU of every worker.
  const Placement* placement = nullptr;
  const hw::GpuSpec* gpu = nullptr;         // prefill and encode workers' GPU
  const hw::GpuSpec* decode_gpu = nullptr;  // decode workers' GPU (nullptr = gpu)
  std::function<double(std::int64_t)> handoff_bytes;   // KV + state bytes for a prompt of n tokens
  const workloads::FrontendConfig* frontend = nullptr; // its disaggregated path (nullptr: none)
  double embedding_bytes_per_token = 0;     // encode -> prefill: vision tokens × hidden × 2 B
  // RouterPolicy::kv: prefill workers chosen by Dynamo's KV router (their cached prefixes against
  // their active blocks); decode workers stay least outstanding. Other policies: least outstanding.
  RouterPolicy router = RouterPolicy::least_outstanding;
  KvRouterConfig kv_router;
  // KV offload tiers beside each prefill worker's pool (sim/scheduler/kv_offload.hpp): one block id
  // and a hybrid hit's state pages in bytes on one GPU, and a prefill worker's GPUs.
  OffloadConfig offload;
  double offload_block_bytes = 0, offload_state_bytes = 0;
  int prefill_gpus = 1;
  std::uint64_t seed = 0;
};

// Where a measured request's TTFT went, summed over the measured requests (seconds). The parts
// of one request add up to its TTFT exactly: sent -> first scheduled on its prefill worker
// (router, encoder, queue) -> prefill done -> the framework's handoff to its decode worker ->
// KV room reserved there -> KV + state pulled -> the decode worker's first client token.
struct TtftParts {
  std::int64_t requests = 0;
  double queue_s = 0, prefill_s = 0, handoff_s = 0, reserve_s = 0, transfer_s = 0, first_step_s = 0;
  double ttft_s = 0;                        // the same requests' TTFTs, summed
};

struct TransferStats {
  std::int64_t handoffs = 0;
  double bytes = 0;
  double seconds = 0;                       // summed handoff durations (pull start -> done)
  double max_seconds = 0;
  int max_in_flight = 0;
  TtftParts ttft;                           // measured requests only (no warm-up)
};

class DisaggregatedCluster;
// Takes prefill and decode workers in and out of routing as a run goes (sim/studies/planner.hpp):
// ticked at the times it asks for with DisaggregatedCluster::schedule_tick().
class DisaggFleetController {
 public:
  virtual ~DisaggFleetController() = default;
  virtual void tick(double now_s, DisaggregatedCluster& cluster) = 0;
};

class DisaggregatedCluster {
 public:
  explicit DisaggregatedCluster(DisaggShape shape);

  // Fleet control: a worker out of routing (index as workers()) finishes what it holds and gets
  // no new request; with none of a role routable, all of it is.
  void set_controller(DisaggFleetController* c) { controller_ = c; }
  void schedule_tick(double t_s);
  void set_routable(int w, bool on);

  // Runs the workload to the last response; every client-visible request goes to `metrics` (and,
  // when given, to `sink` as a Request: its prompt, the prefill's cache hit, the client's times).
  // A SessionWorkload's next turn is sent a think time after the previous answer.
  double run(workloads::Workload& workload, MetricsCollector& metrics, RequestSink* sink = nullptr);

  const std::vector<Worker>& workers() const { return workers_; }   // prefill..., decode...
  const TransferStats& transfers() const { return tstats_; }
  // Steady decode stretches of the decode workers (docs/speed.md) run in place (default) or, off,
  // every step through the event heap: the same results either way.
  void set_steady_stretches(bool on) { steady_ = on; }
  std::int64_t steady_cycles_run() const { return steady_cycles_; }

 private:
  struct Handle {                            // one request across the workers it visits
    workloads::RequestSpec spec;
    double sent_s = 0, first_s = 0, second_s = 0, pull_start_s = 0;
    double prefill_start_s = 0, prefill_done_s = 0, handed_s = 0, pull_done_s = 0;   // TTFT's parts
    bool warmup = false;
    int prefill = -1, decode = -1;
    std::int32_t pslot = -1, dslot = -1;
    std::int64_t cached = 0;                 // prompt tokens the prefill worker's cache (and tiers) served
  };
  struct Encoder { Ring<std::int32_t> queue; std::vector<std::int32_t> batch; bool busy = false; };

  const hw::GpuSpec& gpu_of(int worker) const;   // placement index
  std::int32_t new_handle(const workloads::RequestSpec& spec, double now_s);
  void route(const workloads::RequestSpec& spec, double now_s);
  void to_prefill(std::int32_t h, double now_s);
  // The least loaded routable worker of a role (first..first+count-1): its requests queued or
  // running plus those routed to it still on their way (inbound_); ties in turn, from the worker
  // after the role's last pick.
  int pick(int first, int count);
  void wake(int w, double now_s);
  void wake_encoder(int e, double now_s);
  void step_end(int w, double now_s);
  void encoder_end(int e, double now_s);
  void start_reserved_pulls(int d, double now_s);
  void handoff(std::int32_t h, int d, double now_s);
  void transfer_done(std::uint64_t tag, double now_s);
  void start_transfer(int from, int to, double bytes, std::uint64_t tag, double now_s, double extra_s = 0);
  void finish(std::int32_t h, double now_s);

  DisaggShape shape_;
  std::vector<Worker> workers_;
 public:
  const KvRouter* kv_router() const { return kv_.get(); }   // prefill routing (null unless RouterPolicy::kv)

 private:
  std::unique_ptr<KvRouter> kv_;                    // prefill routing (RouterPolicy::kv)
  std::vector<std::vector<KvEvent>> kv_logs_;       // per prefill worker
  std::vector<char> prefill_mask_;                  // the KV router picks among these
  int pick_prefill(const workloads::RequestSpec& spec, double now_s);
  std::vector<Encoder> encoders_;
  std::vector<TransferNetwork::PortId> out_port_[2], in_port_[2];   // [LinkKind][placement index]
  TransferNetwork net_;
  EventQueue queue_;
  std::vector<Handle> handles_;
  std::vector<std::int32_t> free_handles_;
  std::vector<std::vector<std::int32_t>> watch_;   // per decode worker: pulled, client's 1st/2nd token pending
  std::optional<workloads::ClosedLoopClients> clients_;
  MetricsCollector* metrics_ = nullptr;
  std::int64_t issued_ = 0, warmup_ = 0;
  workloads::Workload* workload_ = nullptr;
  std::optional<SteadyWarmup> steady_warmup_;   // the warm-up ends when the loop is steady
  std::optional<MeasuredPrecision> precision_;  // the measured phase ends when its figures are precise
  bool measuring_ = false;
  TransferStats tstats_;
  std::vector<std::uint64_t> done_tags_;
  std::uint64_t rng_ = 0;                    // the disaggregated path's draws
  bool steady_ = true;
  std::int64_t steady_cycles_ = 0;
  // The last prompt length's handoff bytes (a fixed-ISL run asks the model once).
  std::int64_t handoff_tokens_ = -1;
  double handoff_bytes_ = 0;
  void step_start(int w, double now_s);
  bool run_stretch(int w, double end_s, bool resume);
  // Per decode worker: nothing but its own stretch changed its scheduler since run_stretch() last
  // formed its step (a handoff or a pull's end clears it).
  std::vector<char> untouched_;
  DisaggFleetController* controller_ = nullptr;
  workloads::SessionWorkload* sessions_ = nullptr;   // multi-turn sessions: next turns by event payload
  PendingTurns turns_;
  RequestSink* sink_ = nullptr;
  std::vector<char> routable_;               // per worker (prefill..., decode...)
  std::vector<int> inbound_;                 // per worker: requests routed to it, not yet handed over
  int cursor_[2] = {0, 0};                   // per role (prefill, decode): where the tie-break starts
};

}  // namespace servesim::sim
