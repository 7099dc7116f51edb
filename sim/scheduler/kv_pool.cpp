#include "sim/scheduler/kv_pool.hpp"

#include "sim/scheduler/kv_offload.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace servesim::sim {

KvBlockPool::KvBlockPool(std::int64_t capacity_blocks, bool prefix_caching)
    : capacity_(capacity_blocks), prefix_caching_(prefix_caching) {
  if (capacity_ < 0) throw std::invalid_argument("KvBlockPool: negative capacity");
  if (prefix_caching_) {
    blocks_.resize(static_cast<std::size_t>(capacity_));
    free_ids_.reserve(blocks_.size());
    for (std::int64_t i = capacity_ - 1; i >= 0; --i) free_ids_.push_back(static_cast<std::int32_t>(i));
    by_key_.reserve(blocks_.size());
  }
}

// The pool's invariant, checked on every change: never more blocks in use (held or cached)
// than exist. A violation is a simulator bug, reported as an exception rather than an abort.
void KvBlockPool::check() const {
  if (used_ < 0 || used_ + lru_size_ > capacity_)
    throw std::logic_error("KV block pool over capacity: used " + std::to_string(used_) + " + cached " +
                           std::to_string(lru_size_) + " > " + std::to_string(capacity_));
}

bool KvBlockPool::allocate(std::int64_t n) {
  if (n <= 0) return true;
  if (n > allocatable()) return false;
  std::int64_t empty = capacity_ - used_ - lru_size_;
  for (std::int64_t shortfall = n - empty; shortfall > 0; --shortfall) evict_one();
  used_ += n;
  peak_used_ = std::max(peak_used_, used_);
  check();
  return true;
}

void KvBlockPool::release(std::int64_t n) {
  used_ -= n;
  check();
}

std::int64_t KvBlockPool::match(const std::vector<std::uint64_t>& keys, std::int64_t limit,
                                std::int64_t* free_hits) const {
  std::int64_t n = 0, free = 0;
  if (prefix_caching_) {
    for (std::uint64_t k : keys) {
      if (n >= limit) break;
      auto it = by_key_.find(k);
      if (it == by_key_.end()) break;
      if (blocks_[static_cast<std::size_t>(it->second)].ref == 0) ++free;
      ++n;
    }
  }
  if (free_hits) *free_hits = free;
  return n;
}

void KvBlockPool::acquire(const std::vector<std::uint64_t>& keys, std::int64_t n, std::vector<std::int32_t>& ids) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::int32_t id = by_key_.at(keys[static_cast<std::size_t>(i)]);
    Block& b = blocks_[static_cast<std::size_t>(id)];
    if (b.ref++ == 0) {
      lru_remove(id);
      ++used_;
    }
    ids.push_back(id);
  }
  peak_used_ = std::max(peak_used_, used_);
  check();
}

bool KvBlockPool::publish(std::uint64_t key, std::vector<std::int32_t>& ids) {
  if (!prefix_caching_ || free_ids_.empty() || by_key_.count(key)) return false;
  std::int32_t id = free_ids_.back();
  free_ids_.pop_back();
  blocks_[static_cast<std::size_t>(id)] = Block{key, 1, -1, -1};
  by_key_.emplace(key, id);
  if (events_) events_->push_back({key, true});
  ids.push_back(id);  // the caller's anonymous block became this one: used_ is unchanged
  return true;
}

void KvBlockPool::release_cached(std::vector<std::int32_t>& ids) {
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    Block& b = blocks_[static_cast<std::size_t>(*it)];
    if (--b.ref == 0) {
      lru_push_back(*it);
      --used_;
    }
  }
  ids.clear();
  check();
}

void KvBlockPool::lru_push_back(std::int32_t id) {
  Block& b = blocks_[static_cast<std::size_t>(id)];
  b.prev = lru_tail_;
  b.next = -1;
  if (lru_tail_ >= 0) blocks_[static_cast<std::size_t>(lru_tail_)].next = id; else lru_head_ = id;
  lru_tail_ = id;
  ++lru_size_;
}

void KvBlockPool::lru_remove(std::int32_t id) {
  Block& b = blocks_[static_cast<std::size_t>(id)];
  if (b.prev >= 0) blocks_[static_cast<std::size_t>(b.prev)].next = b.next; else lru_head_ = b.next;
  if (b.next >= 0) blocks_[static_cast<std::size_t>(b.next)].prev = b.prev; else lru_tail_ = b.prev;
  b.prev = b.next = -1;
  --lru_size_;
}

std::int32_t KvBlockPool::evict_one() {
  std::int32_t id = lru_head_;
  if (id < 0) throw std::logic_error("KV block pool: nothing to evict");
  lru_remove(id);
  by_key_.erase(blocks_[static_cast<std::size_t>(id)].key);
  if (events_) events_->push_back({blocks_[static_cast<std::size_t>(id)].key, false});
  if (offload_) offload_->evicted(blocks_[static_cast<std::size_t>(id)].key);
  free_ids_.push_back(id);
  return id;
}

namespace {
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {  // splitmix64 of a combination
  std::uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

void block_keys(const std::vector<std::uint64_t>& prefix_hashes, std::int64_t hash_block_tokens,
                std::int64_t prompt_tokens, int block_size, std::vector<std::uint64_t>& out) {
  out.clear();
  if (hash_block_tokens <= 0 || prefix_hashes.empty() || block_size <= 0) return;
  std::int64_t hashed_tokens = std::min<std::int64_t>(prompt_tokens,
                                                      static_cast<std::int64_t>(prefix_hashes.size()) * hash_block_tokens);
  std::int64_t full = hashed_tokens / block_size;
  out.reserve(static_cast<std::size_t>(full));
  std::uint64_t h = 0x5e5e5e5eULL;
  for (std::int64_t i = 0; i < full; ++i) {
    std::int64_t first = i * block_size / hash_block_tokens, last = ((i + 1) * block_size - 1) / hash_block_tokens;
    for (std::int64_t j = first; j <= last; ++j) h = mix(h, prefix_hashes[static_cast<std::size_t>(j)]);
    h = mix(h, static_cast<std::uint64_t>(i));
    out.push_back(h);
  }
}

void own_block_keys(std::uint64_t request_id, std::int64_t blocks, std::vector<std::uint64_t>& keys) {
  std::uint64_t h = keys.empty() ? mix(0x0a0a0a0aULL, request_id) : keys.back();
  for (auto i = static_cast<std::int64_t>(keys.size()); i < blocks; ++i) {
    h = mix(mix(h, request_id), static_cast<std::uint64_t>(i));
    keys.push_back(h);
  }
}

}  // namespace servesim::sim
