// KV offload tiers beside the block pool (Dynamo KVBM / LMCache style): a block the GPU pool
// evicts from its prefix cache moves to host memory instead of being dropped, and from host
// memory to local disk when that fills; each tier is an LRU of block hashes. A prompt whose next
// blocks after its GPU hits sit in a tier onboards them (copies them back into fresh GPU blocks)
// instead of recomputing them, for latency + bytes / bandwidth per tier and request, where bytes
// are the blocks' KV (and, for hybrid models, the Mamba states at the hit's end) on one GPU: the
// GPUs of a replica move their own shards in parallel over their own links.
#pragma once
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace servesim::sim {

struct OffloadTier {
  std::string name;               // "cpu" | "disk"
  double capacity_bytes = 0;      // per replica
  double bytes_per_s = 0;         // per GPU, into the GPU
  double latency_s = 0;           // per transfer
  std::string source;             // where the bandwidth and latency come from
};

struct OffloadConfig {
  std::vector<OffloadTier> tiers;  // in order: host memory, then disk
  bool overlap = false;            // onboarding overlaps the step's compute (max) instead of adding to it
  bool enabled() const { return !tiers.empty(); }
};

struct OffloadTierStats {
  std::int64_t capacity_blocks = 0;
  std::int64_t stored_blocks = 0;     // blocks moved into the tier
  std::int64_t hit_blocks = 0;        // blocks onboarded from the tier (first admissions)
  std::int64_t hit_tokens = 0;
  std::int64_t transfers = 0;         // onboarding transfers (one per request and tier)
  double bytes_onboarded = 0;         // per GPU
  double seconds = 0;                 // onboarding time summed
  OffloadTierStats& operator+=(const OffloadTierStats& o) {   // replicas' tiers summed
    capacity_blocks += o.capacity_blocks, stored_blocks += o.stored_blocks, hit_blocks += o.hit_blocks;
    hit_tokens += o.hit_tokens, transfers += o.transfers, bytes_onboarded += o.bytes_onboarded, seconds += o.seconds;
    return *this;
  }
};

class KvOffload {
 public:
  // `block_bytes_per_gpu`: one block id on one GPU; `gpus`: GPUs of the replica sharing the tiers'
  // capacity; `state_bytes_per_gpu`: the state pages a hybrid hit onboards with its last block.
  KvOffload(const OffloadConfig& c, double block_bytes_per_gpu, int gpus, double state_bytes_per_gpu);

  // The GPU pool evicted `key`: it enters the first tier (a tier's LRU victim moves down; the last drops it).
  void evicted(std::uint64_t key);
  // Consecutive keys from keys[first] on that some tier holds (at most `limit` in all).
  std::int64_t match(const std::vector<std::uint64_t>& keys, std::int64_t first, std::int64_t limit) const;
  // Onboards keys[first, first + n) (match() said they are there): returns the seconds it takes,
  // one transfer per tier involved; the tiers keep their copies. Hits are counted on a request's
  // first admission only (as the prefix cache's prompt tokens are); bytes and time on every one.
  double onboard(const std::vector<std::uint64_t>& keys, std::int64_t first, std::int64_t n, int block_size,
                 bool count_hits);
  bool overlap() const { return c_.overlap; }
  int tier(std::uint64_t key) const { return tier_of(key); }   // the tier holding `key`, -1: none
  const OffloadConfig& config() const { return c_; }
  const std::vector<OffloadTierStats>& stats() const { return stats_; }

 private:
  struct Tier {
    std::list<std::uint64_t> lru;   // front: least recently used
    std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where;
    std::int64_t capacity = 0;
  };
  void insert(std::size_t t, std::uint64_t key);
  int tier_of(std::uint64_t key) const;

  OffloadConfig c_;
  double block_bytes_, state_bytes_;
  std::vector<Tier> tiers_;
  std::vector<OffloadTierStats> stats_;
};

}  // namespace servesim::sim
