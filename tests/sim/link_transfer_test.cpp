// Transfer times on the link model, checked against bytes / bandwidth + latency by hand.
#include <gtest/gtest.h>

#include <vector>

#include "common/error.hpp"
#include "sim/links/link.hpp"
#include "sim/links/transfer_network.hpp"

namespace servesim::sim {
namespace {

hw::InstanceSpec p5en_like() {
  hw::InstanceSpec i;
  i.name = "test-p5en";
  i.gpu = "H200";
  i.gpus = 8;
  i.efa_per_gpu_bytes_per_s = 50e9;   // 2 x 200 Gbps per GPU
  i.efa_latency_s = 20e-6;
  return i;
}

TEST(LinkTransfer, UncontendedIsBytesOverBandwidthPlusLatency) {
  const LaneSpec efa = efa_lane(p5en_like());
  // 32 MB over one 50 GB/s lane: 640 µs + 20 µs.
  EXPECT_DOUBLE_EQ(transfer_seconds(32e6, efa), 20e-6 + 32e6 / 50e9);
  // Over 8 lanes (a TP8 worker's NICs): 80 µs + 20 µs.
  EXPECT_NEAR(transfer_seconds(32e6, efa, 8), 100e-6, 1e-12);
  hw::GpuSpec h200;
  h200.name = "H200";
  h200.nvlink_bw_bytes_per_s = 450e9;
  const LaneSpec nv = nvlink_lane(h200);
  EXPECT_EQ(nv.kind, LinkKind::nvlink);
  EXPECT_NEAR(transfer_seconds(450e6, nv), nv.latency_s + 1e-3, 1e-12);
}

TEST(LinkTransfer, MissingEfaFiguresAreAnError) {
  hw::InstanceSpec i = p5en_like();
  i.efa_per_gpu_bytes_per_s = 0;
  EXPECT_THROW(efa_lane(i), Error);
}

TEST(TransferNetwork, AloneMatchesTheFormula) {
  TransferNetwork net;
  const auto p = net.add_port(50e9, "nic");
  const TransferNetwork::PortId ports[] = {p};
  net.start(1.0, 1e9, 20e-6, ports, 7);
  EXPECT_NEAR(net.next_event_s(), 1.0 + 20e-6, 1e-12);   // starts flowing
  std::vector<std::uint64_t> done;
  net.advance(net.next_event_s(), done);
  EXPECT_TRUE(done.empty());
  EXPECT_NEAR(net.next_event_s(), 1.0 + 20e-6 + 0.02, 1e-12);
  net.advance(net.next_event_s(), done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], 7u);
  EXPECT_EQ(net.active(), 0);
}

TEST(TransferNetwork, TwoTransfersOnOneNicTakeTwiceAsLong) {
  TransferNetwork net;
  const auto p = net.add_port(50e9, "nic");
  const TransferNetwork::PortId ports[] = {p};
  net.start(0, 1e9, 10e-6, ports, 1);
  net.start(0, 1e9, 10e-6, ports, 2);
  std::vector<std::uint64_t> done;
  while (done.size() < 2) net.advance(net.next_event_s(), done);
  // Each gets 25 GB/s: 10 µs + 1 GB / 25 GB/s = 40.01 ms, both at once.
  EXPECT_NEAR(net.now_s(), 10e-6 + 2 * 1e9 / 50e9, 1e-12);
  EXPECT_EQ(done, (std::vector<std::uint64_t>{1, 2}));
}

TEST(TransferNetwork, LateArrivalSharesOnlyTheOverlap) {
  // A: 1 GB from t=0; B: 1 GB from t=10 ms, both on one 50 GB/s port, no latency.
  // A alone 10 ms moves 0.5 GB; then both at 25 GB/s: A's last 0.5 GB takes 20 ms (t=30 ms),
  // B has moved 0.5 GB by then and finishes its last 0.5 GB alone in 10 ms (t=40 ms).
  TransferNetwork net;
  const auto p = net.add_port(50e9, "nic");
  const TransferNetwork::PortId ports[] = {p};
  net.start(0, 1e9, 0, ports, 1);
  net.start(0.010, 1e9, 0, ports, 2);
  std::vector<std::uint64_t> done;
  net.advance(net.next_event_s(), done);
  ASSERT_EQ(done, std::vector<std::uint64_t>{1});
  EXPECT_NEAR(net.now_s(), 0.030, 1e-12);
  net.advance(net.next_event_s(), done);
  EXPECT_EQ(done, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_NEAR(net.now_s(), 0.040, 1e-12);
}

TEST(TransferNetwork, TheNarrowerPortSetsTheRate) {
  // Sender with 4 lanes (200 GB/s) to a receiver with 8 (400 GB/s): 200 GB/s; a second transfer
  // into the same receiver from another 4-lane sender also gets 200 GB/s (receiver not saturated).
  TransferNetwork net;
  const auto s1 = net.add_port(200e9, "prefill-0 out");
  const auto s2 = net.add_port(200e9, "prefill-1 out");
  const auto r = net.add_port(400e9, "decode-0 in");
  const TransferNetwork::PortId a[] = {s1, r}, b[] = {s2, r};
  net.start(0, 2e9, 0, a, 1);
  net.start(0, 2e9, 0, b, 2);
  std::vector<std::uint64_t> done;
  while (done.size() < 2) net.advance(net.next_event_s(), done);
  EXPECT_NEAR(net.now_s(), 0.010, 1e-12);
}

}  // namespace
}  // namespace servesim::sim
