// Concurrent transfers over shared ports as discrete events, with processor sharing: a port of
// capacity C carrying n flowing transfers gives each C / n; a transfer crossing several ports
// (the sender's egress, the receiver's ingress) flows at the smallest of those shares. Latency
// is a fixed delay before a transfer's bytes start to flow and takes no bandwidth.
// Two equal transfers started together on one port therefore both take latency + 2·bytes / C.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace servesim::sim {

class TransferNetwork {
 public:
  using PortId = int;

  // A port (one worker's NICs in one direction, or its NVLink lanes): capacity in bytes/s.
  PortId add_port(double bytes_per_s, std::string name);
  const std::string& port_name(PortId p) const { return ports_.at(p).name; }

  // Starts moving `bytes` at `now_s` through `ports`; `tag` comes back when it completes.
  void start(double now_s, double bytes, double latency_s, std::span<const PortId> ports, std::uint64_t tag);

  // Time of the next state change (a transfer starts flowing or completes); +inf when idle.
  double next_event_s() const;
  // Advances the clock to `t_s` (<= next_event_s()) and appends the tags finished by then.
  void advance(double t_s, std::vector<std::uint64_t>& finished);

  int active() const { return static_cast<int>(transfers_.size()); }
  double now_s() const { return now_s_; }

 private:
  struct Port { double bytes_per_s; std::string name; int flowing = 0; };
  struct Transfer {
    std::uint64_t tag;
    double bytes;
    double remaining_bytes;
    double flow_start_s;          // start + latency
    PortId ports[2];
    int nports;
    double rate = 0;              // bytes/s while flowing
  };
  void recompute_rates();
  double next_change_s() const;
  bool flowing(const Transfer& t) const { return t.flow_start_s <= now_s_; }

  std::vector<Port> ports_;
  std::vector<Transfer> transfers_;   // in start order (deterministic)
  std::vector<std::uint64_t> early_;  // finished inside start(), not yet handed out
  double now_s_ = 0;
};

}  // namespace servesim::sim
