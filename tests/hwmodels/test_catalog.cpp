// Catalogue values against the datasheets (hardware.md §1.1, §3.1), sources, lookup and bad input.
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"

using servesim::Error;
using namespace servesim::hw;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try { f(); } catch (const Error& e) { return e.what(); }
  return "";
}

}  // namespace

TEST(Catalog, DatasheetValues) {
  const auto& c = Catalog::global();
  const auto& h200 = c.gpu("H200");
  EXPECT_DOUBLE_EQ(h200.hbm_bw_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.bf16_flops, 989e12);
  EXPECT_DOUBLE_EQ(h200.fp8_flops, 1979e12);
  EXPECT_FALSE(h200.native(Precision::nvfp4));
  EXPECT_DOUBLE_EQ(h200.nvlink_bw_bytes_per_s, 450e9);  // 900 GB/s bidirectional
  EXPECT_EQ(h200.sms, 132);
  const auto& h100 = c.gpu("H100");
  EXPECT_DOUBLE_EQ(h100.hbm_bw_bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.tdp_watts, 700);
  const auto& b200 = c.gpu("B200");
  EXPECT_DOUBLE_EQ(b200.bf16_flops, 2250e12);
  EXPECT_DOUBLE_EQ(b200.nvfp4_flops, 9000e12);
  EXPECT_EQ(b200.sms, 148);
  const auto& b300 = c.gpu("B300");
  EXPECT_DOUBLE_EQ(b300.nvfp4_flops, 14000e12);
  EXPECT_DOUBLE_EQ(b300.hbm_usable_bytes, 275040.0 * 1024 * 1024);  // nvidia-smi MiB
  EXPECT_LT(b300.int8_ops, 0.2e15);  // Blackwell Ultra cut INT8 tensor throughput
  const auto& gb200 = c.gpu("GB200");
  EXPECT_EQ(gb200.nvlink_domain, 72);
  EXPECT_DOUBLE_EQ(gb200.fp8_flops, 5000e12);
  const auto& gb300 = c.gpu("GB300");
  EXPECT_DOUBLE_EQ(gb300.nvfp4_flops, 15000e12);
  EXPECT_DOUBLE_EQ(gb300.tdp_watts, 1400);
  // Ridge point H200 BF16 = 989e12 / 4.8e12 = 206 FLOP/byte (hardware.md §1.2).
  EXPECT_NEAR(h200.bf16_flops / h200.hbm_bw_bytes_per_s, 206, 1);
}

TEST(Catalog, InstanceValues) {
  const auto& c = Catalog::global();
  const auto& p5 = c.instance("p5.48xlarge");
  EXPECT_EQ(p5.gpu, "H100");
  EXPECT_EQ(p5.efa_devices, 32);
  EXPECT_DOUBLE_EQ(p5.efa_total_bytes_per_s, 3200e9 / 8);   // 3,200 Gbps
  EXPECT_DOUBLE_EQ(p5.efa_per_gpu_bytes_per_s, 50e9);       // 400 Gbps per GPU
  const auto& p6b300 = c.instance("p6-b300.48xlarge");
  EXPECT_DOUBLE_EQ(p6b300.efa_per_gpu_bytes_per_s, 100e9);  // 6,400 Gbps / 8
  EXPECT_EQ(c.instance("p5en.48xlarge").gpu, "H200");
  EXPECT_EQ(c.instance("p6-b200.48xlarge").efa_devices, 8);
  const auto& gb = c.instance("p6e-gb200.36xlarge");
  EXPECT_EQ(gb.gpus, 4);
  EXPECT_EQ(gb.nvlink_domain_gpus, 72);
  ASSERT_TRUE(gb.usd_per_hour.has_value());
  // A GB300 NVL72 compute tray: 4 GPUs of a 72-GPU NVLink domain, one 800 Gb/s ConnectX-8 each; no
  // source gives a price (plan and search leave its $/hour out unless --price sets one).
  const auto& tray = c.instance("gb300-nvl72-tray");
  EXPECT_EQ(tray.gpu, "GB300");
  EXPECT_EQ(tray.gpus, 4);
  EXPECT_EQ(tray.nvlink_domain_gpus, 72);
  EXPECT_DOUBLE_EQ(tray.efa_per_gpu_bytes_per_s, 800e9 / 8);
  EXPECT_DOUBLE_EQ(tray.efa_total_bytes_per_s, 4 * tray.efa_per_gpu_bytes_per_s);
  EXPECT_FALSE(tray.usd_per_hour.has_value());
}

TEST(Catalog, EveryFigureHasASource) {
  const auto& c = Catalog::global();
  EXPECT_EQ(c.gpus().size(), 6u);
  EXPECT_EQ(c.instances().size(), 6u);   // five AWS instances and the GB300 NVL72 tray
  for (const auto& g : c.gpus()) {
    for (const char* f : {"arch", "hbm_nominal_bytes", "hbm_usable_bytes", "hbm_bw_bytes_per_s", "bf16_flops",
                          "fp8_flops", "nvfp4_flops", "int8_ops", "nvlink_bw_bytes_per_s", "nvlink_domain", "sms",
                          "l2_bytes", "tdp_watts", "efficiency_priors.gemm_bf16", "efficiency_priors.memory",
                          "efficiency_priors.nccl_busbw", "efficiency_priors.nccl_latency_s"})
      EXPECT_FALSE(g.sources.count(f) == 0 || g.sources.at(f).empty()) << g.name << " " << f;
  }
  for (const auto& i : c.instances())
    for (const char* f : {"gpus", "efa_devices", "efa_total_bytes_per_s", "efa_latency_s", "host_memory_bytes"})
      EXPECT_TRUE(i.sources.count(f)) << i.name << " " << f;
}

TEST(Catalog, CaseInsensitiveAndUnknownListsNames) {
  const auto& c = Catalog::global();
  EXPECT_EQ(c.gpu("gb300").name, "GB300");
  EXPECT_EQ(c.instance("P5EN.48XLARGE").name, "p5en.48xlarge");
  std::string msg = error_of([&] { c.gpu("A100"); });
  EXPECT_NE(msg.find("A100"), std::string::npos);
  for (const char* n : {"B200", "B300", "H200", "H100", "GB200", "GB300"}) EXPECT_NE(msg.find(n), std::string::npos);
  msg = error_of([&] { c.instance("p4d.24xlarge"); });
  EXPECT_NE(msg.find("p6-b300.48xlarge"), std::string::npos);
  EXPECT_EQ(parse_precision("NVFP4"), Precision::nvfp4);
  EXPECT_THROW(parse_precision("fp16"), Error);
}

TEST(Catalog, UserFileAddsAGpu) {
  Catalog c = Catalog::global();
  std::string path = write_temp("user_gpu.json", R"({"gpus": [{"name": "X1", "arch": "test",
    "hbm_nominal_bytes": 1e11, "hbm_usable_bytes": 9e10, "hbm_bw_bytes_per_s": 2e12, "bf16_flops": 5e14,
    "fp8_flops": 0, "nvfp4_flops": 0, "int8_ops": 0, "nvlink_bw_bytes_per_s": 2e11, "nvlink_domain": 4,
    "sms": 100, "l2_bytes": 0, "tdp_watts": 400}],
    "instances": [{"name": "x1.box", "gpu": "x1", "gpus": 4, "efa_devices": 1, "efa_total_bytes_per_s": 1e10,
    "efa_latency_s": 2e-5, "host_memory_bytes": 1e12}]})");
  c.add_file(path);
  EXPECT_DOUBLE_EQ(c.gpu("x1").hbm_bw_bytes_per_s, 2e12);
  EXPECT_DOUBLE_EQ(c.gpu("x1").priors.gemm_bf16, c.gpu("H200").priors.gemm_bf16);  // assumed, says so
  EXPECT_DOUBLE_EQ(c.instance("X1.BOX").efa_per_gpu_bytes_per_s, 2.5e9);
}

TEST(Catalog, MalformedUserFileNamesFileAndField) {
  Catalog c = Catalog::global();
  std::string path = write_temp("bad_gpu.json", R"({"gpus": [{"name": "X2", "arch": "t",
    "hbm_nominal_bytes": 1e11, "hbm_usable_bytes": 9e10, "hbm_bw_bytes_per_s": "fast"}]})");
  std::string msg = error_of([&] { c.add_file(path); });
  EXPECT_NE(msg.find("bad_gpu.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpus[0].hbm_bw_bytes_per_s"), std::string::npos) << msg;
  std::string syntax = write_temp("syntax.json", "{\"gpus\": [ }");
  msg = error_of([&] { c.add_file(syntax); });
  EXPECT_NE(msg.find("syntax.json"), std::string::npos);
  EXPECT_NE(msg.find("line 1"), std::string::npos);
  std::string badgpu = write_temp("bad_inst.json", R"({"instances": [{"name": "y", "gpu": "Z9", "gpus": 8,
    "efa_devices": 1, "efa_total_bytes_per_s": 1e10, "efa_latency_s": 1e-5, "host_memory_bytes": 1}]})");
  msg = error_of([&] { c.add_file(badgpu); });
  EXPECT_NE(msg.find("instances[0].gpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("H200"), std::string::npos);
}
