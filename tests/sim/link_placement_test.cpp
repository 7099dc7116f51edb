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
