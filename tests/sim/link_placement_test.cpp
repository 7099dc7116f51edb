// Placement of workers on instances: who shares a node (NVLink) and who pays EFA.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/links/placement.hpp"

namespace servesim::sim {
namespace {

hw::InstanceSpec node(int gpus, int domain) {
  hw::InstanceSpec i;
  i.name = "test-node";
  i.gpus = gpus;
  i.nvlink_domain_gpus = domain;
  i.efa_per_gpu_bytes_per_s = 50e9;
  i.efa_latency_s = 20e-6;
  return i;
}

TEST(Placement, RolesOnDifferentInstanceTypesCrossEfaAtTheSmallerNicShare) {
  hw::InstanceSpec fast = node(8, 8), slow = node(8, 8);
  fast.name = "fast";
  fast.efa_per_gpu_bytes_per_s = 100e9;   // a p6-b300-like 800 Gb/s per GPU
  fast.efa_latency_s = 50e-6;
  slow.name = "slow";
  slow.efa_latency_s = 65e-6;             // 50 GB/s per GPU (node() default)
  // Even with a 72-GPU NVLink domain declared, different instance types never share NVLink.
  fast.nvlink_domain_gpus = 72;
  const Placement p({{"prefill-0", 8, 0}, {"decode-0", 4, 1}, {"decode-1", 4, 1}}, {{fast, 1}, {slow, 1}});
  EXPECT_EQ(p.nodes(), 2);
  EXPECT_EQ(p.nodes_used(), 2);
  EXPECT_EQ(p.workers()[1].first_node, 1);
  EXPECT_EQ(p.workers()[2].first_gpu, 4);
  EXPECT_EQ(p.instance_of(2).name, "slow");
  EXPECT_TRUE(p.same_nvlink_domain(1, 2));
  hw::GpuSpec g;
  g.nvlink_bw_bytes_per_s = 450e9;
  const LaneSpec l = p.lane(0, 1, g);
  EXPECT_EQ(l.kind, LinkKind::efa);
  EXPECT_DOUBLE_EQ(l.bytes_per_s, 50e9);    // min(100, 50) GB/s
  EXPECT_DOUBLE_EQ(l.latency_s, 65e-6);     // max(50, 65) us
  // 100 MB from the 8-GPU prefill to a 4-GPU decode worker: the 4 receiving lanes bound it.
  EXPECT_NEAR(transfer_seconds(100e6, l, 4), 65e-6 + 100e6 / (4 * 50e9), 1e-15);
  EXPECT_THROW(Placement({{"decode-0", 16, 1}}, {{fast, 1}, {slow, 1}}), Error);
}

TEST(Placement, OnePrefillOneDecodeOfEightGpusOnTwoNodesCrossEfa) {
  const Placement p({{"prefill-0", 8}, {"decode-0", 8}}, node(8, 8), 2);
  EXPECT_EQ(p.workers()[0].first_node, 0);
  EXPECT_EQ(p.workers()[1].first_node, 1);
  EXPECT_EQ(p.nodes_used(), 2);
  EXPECT_FALSE(p.same_nvlink_domain(0, 1));
  hw::GpuSpec g;
  g.nvlink_bw_bytes_per_s = 450e9;
  EXPECT_EQ(p.lane(0, 1, g).kind, LinkKind::efa);
}

TEST(Placement, TwoTp4WorkersShareANodeOverNvlink) {
  const Placement p({{"prefill-0", 4}, {"decode-0", 4}}, node(8, 8), 1);
  EXPECT_EQ(p.workers()[1].first_gpu, 4);
  EXPECT_TRUE(p.same_nvlink_domain(0, 1));
  hw::GpuSpec g;
  g.nvlink_bw_bytes_per_s = 450e9;
  EXPECT_EQ(p.lane(0, 1, g).kind, LinkKind::nvlink);
}

TEST(Placement, Nvl72DomainSpansInstances) {
  // GB200 UltraServer nodes of 4 GPUs in a 72-GPU NVLink domain: across nodes is still NVLink.
  const Placement p({{"prefill-0", 4}, {"decode-0", 4}}, node(4, 72), 2);
  EXPECT_EQ(p.workers()[1].first_node, 1);
  EXPECT_TRUE(p.same_nvlink_domain(0, 1));
}

TEST(Placement, LargeWorkerTakesWholeNodes) {
  const Placement p({{"replica-0", 16}, {"replica-1", 8}}, node(8, 8), 3);
  EXPECT_EQ(p.workers()[0].nodes, 2);
  EXPECT_EQ(p.workers()[1].first_node, 2);
  EXPECT_EQ(p.gpus_used(), 24);
}

TEST(Placement, TooSmallClusterFailsClearly) {
  try {
    Placement p({{"prefill-0", 8}, {"decode-0", 8}, {"decode-1", 8}}, node(8, 8), 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "--nodes");
    EXPECT_NE(std::string(e.what()).find("needs 24 GPUs"), std::string::npos) << e.what();
  }
  // Fragmentation: 6 + 6 GPUs leave no node with room for 4.
  EXPECT_THROW(Placement({{"a", 6}, {"b", 6}, {"c", 4}}, node(8, 8), 2), Error);
}

}  // namespace
}  // namespace servesim::sim
