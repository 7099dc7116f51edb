#include "sim/scheduler/kv_offload.hpp"

#include <algorithm>

namespace servesim::sim {

KvOffload::KvOffload(const OffloadConfig& c, double block_bytes_per_gpu, int gpus, double state_bytes_per_gpu)
    : c_(c), block_bytes_(block_bytes_per_gpu), state_bytes_(state_bytes_per_gpu) {
  tiers_.resize(c_.tiers.size());
  stats_.resize(c_.tiers.size());
  const double per_replica = block_bytes_per_gpu * std::max(1, gpus);
  for (std::size_t t = 0; t < tiers_.size(); ++t) {
    tiers_[t].capacity = per_replica > 0 ? static_cast<std::int64_t>(c_.tiers[t].capacity_bytes / per_replica) : 0;
    stats_[t].capacity_blocks = tiers_[t].capacity;
  }
}

int KvOffload::tier_of(std::uint64_t key) const {
  for (std::size_t t = 0; t < tiers_.size(); ++t)
    if (tiers_[t].where.count(key)) return static_cast<int>(t);
  return -1;
}

void KvOffload::insert(std::size_t t, std::uint64_t key) {
  if (t >= tiers_.size()) return;   // past the last tier: dropped
  Tier& x = tiers_[t];
  if (auto it = x.where.find(key); it != x.where.end()) {   // already there: most recently used now
    x.lru.splice(x.lru.end(), x.lru, it->second);
    return;
  }
  if (x.capacity <= 0) return insert(t + 1, key);
  if (static_cast<std::int64_t>(x.where.size()) >= x.capacity) {
    const std::uint64_t victim = x.lru.front();
    x.lru.pop_front();
    x.where.erase(victim);
    insert(t + 1, victim);
  }
  x.lru.push_back(key);
  x.where.emplace(key, std::prev(x.lru.end()));
  ++stats_[t].stored_blocks;
}

void KvOffload::evicted(std::uint64_t key) {
  const int t = tier_of(key);   // a block onboarded earlier is still in its tier: it is refreshed there
  insert(t < 0 ? 0 : static_cast<std::size_t>(t), key);
}

std::int64_t KvOffload::match(const std::vector<std::uint64_t>& keys, std::int64_t first, std::int64_t limit) const {
  std::int64_t n = 0;
  for (std::int64_t i = first; i < static_cast<std::int64_t>(keys.size()) && n < limit; ++i, ++n)
    if (tier_of(keys[static_cast<std::size_t>(i)]) < 0) break;
  return n;
}

double KvOffload::onboard(const std::vector<std::uint64_t>& keys, std::int64_t first, std::int64_t n, int block_size,
                          bool count_hits) {
  if (n <= 0) return 0;
  std::vector<std::int64_t> blocks(tiers_.size(), 0);
  int last = 0;
  for (std::int64_t i = first; i < first + n; ++i) {
    const std::uint64_t k = keys[static_cast<std::size_t>(i)];
    last = tier_of(k);
    ++blocks[static_cast<std::size_t>(last)];
    Tier& x = tiers_[static_cast<std::size_t>(last)];
    x.lru.splice(x.lru.end(), x.lru, x.where.at(k));
  }
  double seconds = 0;
  for (std::size_t t = 0; t < tiers_.size(); ++t) {
    if (blocks[t] == 0) continue;
    // The hit's state pages (hybrid models) come from the tier of its last block.
    const double bytes = double(blocks[t]) * block_bytes_ + (static_cast<int>(t) == last ? state_bytes_ : 0.0);
    const double s = c_.tiers[t].latency_s + bytes / c_.tiers[t].bytes_per_s;
    OffloadTierStats& st = stats_[t];
    if (count_hits) {
      st.hit_blocks += blocks[t];
      st.hit_tokens += blocks[t] * block_size;
    }
    ++st.transfers;
    st.bytes_onboarded += bytes;
    st.seconds += s;
    seconds += s;   // one tier after another
  }
  return seconds;
}

}  // namespace servesim::sim
