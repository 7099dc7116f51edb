"""Catalogues, memory plan and minimum-GPU table through the bindings, checked by hand and
against the CLI's --format json."""
import math

import pytest

import servesim


def by_name(rows, name):
    return next(r for r in rows if r["name"].lower() == name.lower())


def test_gpus_match_the_datasheet_and_the_cli(cli):
    gpus = servesim.gpus()
    names = {g["name"] for g in gpus}
    assert {"H100", "H200", "B200", "B300", "GB200", "GB300"} <= names
    h200 = by_name(gpus, "H200")
    assert h200["hbm_nominal_bytes"] == pytest.approx(141e9, rel=0.01)   # 141 GB HBM3e
    assert h200["hbm_bw_bytes_per_s"] == pytest.approx(4.8e12, rel=0.01)  # 4.8 TB/s
    assert h200["bf16_flops"] == pytest.approx(989e12, rel=0.01)          # 989 dense TFLOP/s
    assert h200["nvfp4_flops"] == 0                                       # not native on Hopper
    assert gpus == cli("list", "gpus", "--format", "json")


def test_instances_and_models_equal_the_cli(cli):
    inst = servesim.instances()
    p5en = by_name(inst, "p5en.48xlarge")
    assert p5en["gpu"] == "H200" and p5en["gpus"] == 8
    assert inst == cli("list", "instances", "--format", "json")
    assert servesim.models() == cli("list", "models", "--format", "json")


def test_model_spec_parameter_counts():
    m = servesim.model("NEMOTRON-3-SUPER")          # names are case-insensitive
    assert m["name"] == "nemotron-3-super"
    assert m["llm_total_params"] == pytest.approx(120e9, rel=0.03)   # "120B-A12B"
    assert m["active_params"] == pytest.approx(12e9, rel=0.1)
    counts = m["layer_counts"]
    assert sum(counts.values()) == m["layers"] == len(m["layer_pattern"])
    assert m["layer_pattern"].count("M") == counts["mamba"]
    llama = servesim.model("llama-3.1-70b")
    assert llama["llm_total_params"] == pytest.approx(70.6e9, rel=0.02)
    assert llama["vision_encoder"] is None


def test_memory_weights_are_params_times_bytes(cli):
    llama = servesim.model("llama-3.1-70b")
    p = servesim.memory("llama-3.1-70b", "h200", precision="bf16", tp=4, context=8192)
    # BF16: 2 bytes per parameter, split over 4 GPUs (embeddings and LM head are vocab-parallel).
    assert p["weight_bytes"] * 4 == pytest.approx(llama["llm_total_params"] * 2, rel=0.01)
    # KV per token per GPU: 80 layers x (K+V) x 8 KV heads x 128 dims x 2 bytes / TP 4.
    assert p["kv_bytes_per_token"] == pytest.approx(80 * 2 * 8 * 128 * 2 / 4)
    # The cache is what the budget leaves after weights, activations and reserve.
    assert p["cache_bytes"] == pytest.approx(p["budget_bytes"] - p["weight_bytes"] - p["activation_bytes"] - p["reserve_bytes"], rel=1e-6)
    assert p["budget_bytes"] == pytest.approx(0.9 * p["gpu_total_bytes"])
    assert p["context_tokens"] == 8192
    # FP8 halves the quantized linears (plus small per-channel scales).
    q = servesim.memory("llama-3.1-70b", "h200", precision="fp8", tp=4)
    assert q["weights_quantized_bytes"] == pytest.approx(p["weights_quantized_bytes"] / 2, rel=0.01)
    assert p == cli("memory", "--model", "llama-3.1-70b", "--gpu", "h200", "--precision", "bf16", "--tp", 4,
                    "--context", 8192, "--format", "json")


def test_memory_engine_knobs_change_the_budget():
    a = servesim.memory("nemotron-3-nano", "h200", precision="bf16", tp=1)
    b = servesim.memory("nemotron-3-nano", "h200", precision="bf16", tp=1, gpu_memory_utilization=0.5)
    assert b["budget_bytes"] == pytest.approx(0.5 * a["gpu_total_bytes"])
    assert b["cache_bytes"] == pytest.approx(a["cache_bytes"] - 0.4 * a["gpu_total_bytes"], rel=1e-6)
    # Mamba state: fp32 SSM state per sequence = layers x heads x head_dim x d_state x 4 bytes.
    m = servesim.model("nemotron-3-nano")
    ssm = m["layer_counts"]["mamba"] * m["mamba_heads"] * m["mamba_head_dim"] * m["d_state"] * 4
    assert a["ssm_state_bytes_per_seq"] == pytest.approx(ssm)


def test_min_gpus_reproduces_the_vendor_table(cli):
    rows = servesim.min_gpus("nemotron-3.5-super-vl")   # default policy: headroom
    assert len(rows) == 12   # 6 GPUs x {bf16, nvfp4}
    listed = [r for r in rows if r["vendor_min_gpus"] is not None]
    assert len(listed) >= 8   # the vendor publishes a figure for (at least) the 8 cells of MISSION.md
    assert all(r["min_gpus"] == r["vendor_min_gpus"] for r in listed)
    assert rows == cli("min-gpus", "--model", "nemotron-3.5-super-vl", "--format", "json")
    only = servesim.min_gpus("nemotron-3.5-super-vl", precisions="bf16", gpus=["h200"])
    assert [(r["gpu"], r["precision"]) for r in only] == [("H200", "bf16")]
    assert only[0]["min_gpus"] == only[0]["tp"] * only[0]["pp"]


def test_memory_hybrid_block_pool(cli):
    # Nemotron 3 Super TP2 FP8 on H100: a Mamba state page per rank is 30,720 B of conv state +
    # 2,097,152 B of fp32 SSM state; an attention token is 1 KV head x 256 x 1 B, so the block size
    # is 16 x cdiv(2,127,872, 16 x 256) = 8320 and a 9216-token sequence holds 2 + 5 blocks.
    p = servesim.memory("nemotron-3-super", "h100", precision="fp8", tp=2, context=9216)
    kv = p["kv_cache"]
    assert kv["kv_cache_dtype"] == "fp8"
    assert kv["state_page_bytes"] == 30720 + 2097152
    assert kv["block_size"] == 8320 and kv["group_size"] == 8
    assert kv["num_blocks"] == int(p["cache_bytes"] // (8320 * 256)) // 8
    assert kv["blocks_per_seq"] == 7
    assert kv["max_concurrent_seqs"] == min((kv["num_blocks"] - 1) // 7, kv["max_num_seqs"])
    assert p == cli("memory", "--model", "nemotron-3-super", "--gpu", "h100", "--precision", "fp8", "--tp", 2,
                    "--context", 9216, "--format", "json")
