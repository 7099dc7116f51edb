// The KV block pool of one replica (vLLM v1 BlockPool): `capacity` blocks of block_size tokens.
// Without prefix caching blocks are anonymous and the pool is two counters. With it, full prompt
// blocks carry a chained hash; a freed cached block stays reusable in an LRU queue until evicted.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace servesim::sim {

class KvOffload;

// A change to the set of cached block hashes, as the engine publishes it to a KV-aware router
// (vLLM's BlockStored / BlockRemoved KV events).
struct KvEvent {
  std::uint64_t key;
  bool stored;   // false: removed (evicted)
};

class KvBlockPool {
 public:
  KvBlockPool(std::int64_t capacity_blocks, bool prefix_caching);

  std::int64_t capacity() const { return capacity_; }
  std::int64_t used() const { return used_; }                  // held by at least one request
  std::int64_t peak_used() const { return peak_used_; }
  std::int64_t allocatable() const { return capacity_ - used_; } // empty + evictable cached
  std::int64_t cached() const { return lru_size_; }             // free but still hashed
  // Share of the blocks held by requests (0 for an empty pool): the KV utilisation steps sample.
  double utilization() const { return capacity_ > 0 ? double(used_) / double(capacity_) : 0.0; }
  bool prefix_caching() const { return prefix_caching_; }

  // Takes n anonymous blocks, evicting least-recently-freed cached blocks when the empty ones
  // run out. Returns false (and changes nothing) when fewer than n are allocatable.
  bool allocate(std::int64_t n);
  void release(std::int64_t n);  // n anonymous blocks back to the empty set

  // Prefix caching. Leading blocks of `keys` (at most `limit`) present in the cache, and how many of those are
  // currently free (taking them shrinks allocatable()).
  std::int64_t match(const std::vector<std::uint64_t>& keys, std::int64_t limit, std::int64_t* free_hits) const;
  // Takes a reference on the first n keys (all present, as match() said); appends their ids.
  void acquire(const std::vector<std::uint64_t>& keys, std::int64_t n, std::vector<std::int32_t>& ids);
  // One of the caller's anonymous blocks now holds the full block `key`: cache it (no-op when
  // another copy is cached already). Returns true when it became a cached block.
  bool publish(std::uint64_t key, std::vector<std::int32_t>& ids);
  // Drops the caller's references; blocks nobody holds join the LRU queue, last block first
  // out (vLLM frees a request's blocks in reverse so the tail is evicted first).
  void release_cached(std::vector<std::int32_t>& ids);
  // KV events: when set, every hash that enters or leaves the cache is appended to `log`.
  void set_event_log(std::vector<KvEvent>* log) { events_ = log; }
  // Offload tiers: evicted cached blocks move there instead of being dropped (null: off).
  void set_offload(KvOffload* offload) { offload_ = offload; }

 private:
  struct Block { std::uint64_t key = 0; std::int32_t ref = 0, prev = -1, next = -1; };
  void check() const;
  void lru_push_back(std::int32_t id);
  void lru_remove(std::int32_t id);
  std::int32_t evict_one();

  std::int64_t capacity_, used_ = 0, peak_used_ = 0;
  bool prefix_caching_;
  std::vector<Block> blocks_;           // identities of cached blocks (prefix caching only)
  std::vector<std::int32_t> free_ids_;
  std::unordered_map<std::uint64_t, std::int32_t> by_key_;
  std::int32_t lru_head_ = -1, lru_tail_ = -1;
  std::int64_t lru_size_ = 0;
  std::vector<KvEvent>* events_ = nullptr;
  KvOffload* offload_ = nullptr;
};

// Chained keys of a prompt's full vLLM blocks from a trace's prefix hashes (one per
// `hash_block_tokens` tokens): block i's key mixes block i-1's key with every trace hash the
// block overlaps, so equal keys imply equal prefixes.
void block_keys(const std::vector<std::uint64_t>& prefix_hashes, std::int64_t hash_block_tokens,
                std::int64_t prompt_tokens, int block_size, std::vector<std::uint64_t>& out);

// Extends a request's keys to `blocks` full blocks with keys of its own content (the answer, or a
// prompt no trace describes): each chained from the previous key and the request's id, so no
// other request's prefix matches them.
void own_block_keys(std::uint64_t request_id, std::int64_t blocks, std::vector<std::uint64_t>& keys);

}  // namespace servesim::sim
