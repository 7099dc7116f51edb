#include "sim/links/transfer_network.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace servesim::sim {

TransferNetwork::PortId TransferNetwork::add_port(double bytes_per_s, std::string name) {
  if (!(bytes_per_s > 0)) throw Error("link " + name, "bytes_per_s", "must be > 0");
  ports_.push_back({bytes_per_s, std::move(name)});
  return static_cast<PortId>(ports_.size() - 1);
}

void TransferNetwork::start(double now_s, double bytes, double latency_s, std::span<const PortId> ports,
                            std::uint64_t tag) {
  if (ports.empty() || ports.size() > 2) throw Error("transfer", "ports", "a transfer crosses one or two ports");
  if (!(bytes >= 0) || !(latency_s >= 0)) throw Error("transfer", "bytes", "bytes and latency must be >= 0");
  if (now_s < now_s_) throw Error("transfer", "now_s", "cannot start a transfer in the past");
  advance(now_s, early_);   // what finishes exactly now is handed out by the next advance()
  Transfer t{tag, bytes, bytes, now_s + latency_s, {ports[0], ports.size() > 1 ? ports[1] : ports[0]},
             static_cast<int>(ports.size())};
  for (int i = 0; i < t.nports; ++i)
    if (t.ports[i] < 0 || t.ports[i] >= static_cast<int>(ports_.size()))
      throw Error("transfer", "ports", "unknown port");
  transfers_.push_back(t);
  recompute_rates();
}

void TransferNetwork::recompute_rates() {
  for (auto& p : ports_) p.flowing = 0;
  for (const auto& t : transfers_)
    if (flowing(t))
      for (int i = 0; i < t.nports; ++i) ++ports_[t.ports[i]].flowing;
  for (auto& t : transfers_) {
    if (!flowing(t)) { t.rate = 0; continue; }
    double r = std::numeric_limits<double>::infinity();
    for (int i = 0; i < t.nports; ++i) {
      const Port& p = ports_[t.ports[i]];
      r = std::min(r, p.bytes_per_s / p.flowing);
    }
    t.rate = r;
  }
}

double TransferNetwork::next_event_s() const {
  return early_.empty() ? next_change_s() : now_s_;
}

double TransferNetwork::next_change_s() const {
  double next = std::numeric_limits<double>::infinity();
  for (const auto& t : transfers_)
    next = std::min(next, flowing(t) ? now_s_ + t.remaining_bytes / t.rate : t.flow_start_s);
  return next;
}

void TransferNetwork::advance(double t_s, std::vector<std::uint64_t>& finished) {
  if (&finished != &early_ && !early_.empty()) {
    finished.insert(finished.end(), early_.begin(), early_.end());
    early_.clear();
  }
  // Step through every intermediate state change so shares stay exact between them.
  while (true) {
    const double next = next_change_s();
    const double to = std::min(next, t_s);
    if (to > now_s_) {
      for (auto& t : transfers_)
        if (flowing(t)) t.remaining_bytes -= t.rate * (to - now_s_);
      now_s_ = to;
    }
    if (next > t_s) return;
    // Complete what has no bytes left (to rounding, or too few to move the clock), in start order.
    std::size_t keep = 0;
    for (std::size_t i = 0; i < transfers_.size(); ++i) {
      const Transfer& t = transfers_[i];
      const bool done = flowing(t) && (t.remaining_bytes <= 1e-9 * t.bytes || now_s_ + t.remaining_bytes / t.rate <= now_s_);
      if (done) finished.push_back(t.tag);
      else transfers_[keep++] = t;
    }
    transfers_.resize(keep);
    recompute_rates();
  }
}

}  // namespace servesim::sim
