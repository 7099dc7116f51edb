"""op_time and step through the bindings: roofline limits by hand and equality with the CLI."""
import pytest

import servesim


def gpu(name):
    return next(g for g in servesim.gpus() if g["name"].lower() == name)


@pytest.mark.parametrize("name", ["h200", "h100", "b200", "b300"])
def test_gemm_never_beats_peak_compute_or_bandwidth(name):
    g = gpu(name)
    for m in (1, 16, 256, 4096, 16384):
        t = servesim.op_time("gemm", name, m=m, n=8192, k=8192, dtype="bf16")
        assert t["seconds"] >= 2 * m * 8192 * 8192 / g["bf16_flops"]
        # The weights (k x n BF16) must cross HBM at least once.
        assert t["seconds"] >= 8192 * 8192 * 2 / g["hbm_bw_bytes_per_s"]
        assert t["flops"] == pytest.approx(2 * m * 8192 * 8192)
    assert servesim.op_time("gemm", name, m=1, n=8192, k=8192)["bound"] in ("memory", "launch")


def test_cold_weights_part_by_hand():
    # gpt-oss-120b's TP8 QKV GEMM at 4 tokens: 3.71 MB of bf16 whose 6 table copies fit in the
    # H200's L2: 0.54 us + 0.093 us per MB to read them cold (hwmodels/README.md, Cold weights).
    nbytes = 2 * (4 * 2880 + 640 * 2880 + 4 * 640)
    t = servesim.op_time("gemm", gpu="h200", m=4, n=640, k=2880)
    assert t["cold_weights_seconds"] == pytest.approx(0.54e-6 + 0.093e-6 * nbytes / 1e6)
    assert t["seconds"] > t["cold_weights_seconds"]
    # 128 MB of weights: far past the L2, nothing to pay back.
    assert servesim.op_time("gemm", "h200", m=4, n=16384, k=4096)["cold_weights_seconds"] == 0


def test_gemm_is_measured_on_every_gpu_and_mamba_transferred(cli):
    h = servesim.op_time("gemm", "h200", m=4096, n=4096, k=4096, dtype="bf16")
    assert h["source"] in ("measured", "interpolated")
    b = servesim.op_time("gemm", "b200", m=4096, n=4096, k=4096, dtype="nvfp4")
    assert b["source"] == "measured" and "NvFp4" in b["kernel"]
    s = servesim.op_time("mamba-step", "b200", batch=64, heads=64, head_dim=64, d_state=128, groups=8)
    assert s["source"] == "transferred"
    assert h == cli("op", "gemm", "--gpu", "h200", "--m", 4096, "--n", 4096, "--k", 4096, "--dtype", "bf16", "--format", "json")


def test_every_op_kind_equals_the_cli(cli):
    cases = [
        ("grouped-gemm", dict(experts=128, tokens=4096, n=1856, k=2688, dtype="fp8"),
         ["--experts", 128, "--tokens", 4096, "--n", 1856, "--k", 2688, "--dtype", "fp8"]),
        ("attention-prefill", dict(batch=2, seq=4096, heads=32, kv_heads=8, head_dim=128),
         ["--batch", 2, "--seq", 4096, "--heads", 32, "--kv-heads", 8, "--head-dim", 128]),
        ("attention-decode", dict(batch=64, context=8192, heads=32, kv_heads=8, head_dim=128),
         ["--batch", 64, "--context", 8192, "--heads", 32, "--kv-heads", 8, "--head-dim", 128]),
        ("mamba-scan", dict(batch=1, seqlen=8192, heads=64, head_dim=64, d_state=128, groups=8),
         ["--batch", 1, "--seqlen", 8192, "--heads", 64, "--head-dim", 64, "--d-state", 128, "--groups", 8]),
        ("mamba-step", dict(batch=1, heads=64, head_dim=64, d_state=128, groups=8),
         ["--batch", 1, "--heads", 64, "--head-dim", 64, "--d-state", 128, "--groups", 8]),
        ("moe", dict(tokens=64, hidden=4096, inter=1536, topk=8, experts=128, dtype="fp8"),
         ["--tokens", 64, "--hidden", 4096, "--inter", 1536, "--topk", 8, "--experts", 128, "--dtype", "fp8"]),
        ("tp-all-reduce", dict(gpus=4, bytes=1048576),
         ["--gpus", 4, "--bytes", 1048576]),
        ("collective", dict(op="all-reduce", gpus=8, bytes=16777216),
         ["--op", "all-reduce", "--gpus", 8, "--bytes", 16777216]),
        ("collective", dict(op="all-gather", gpus=16, nodes=2, instance="p5.48xlarge", bytes=1e9),
         ["--op", "all-gather", "--gpus", 16, "--nodes", 2, "--instance", "p5.48xlarge", "--bytes", "1e9"]),
    ]
    assert sorted({c[0] for c in cases} | {"gemm"}) == sorted(servesim.op_kinds)
    for kind, kw, flags in cases:
        py = servesim.op_time(kind, "h200" if "p5." not in str(kw) else "h100", **kw)
        assert py["seconds"] > 0
        assert py == cli("op", kind, "--gpu", "h200" if "p5." not in str(kw) else "h100", *flags, "--format", "json")


def test_attention_decode_reads_the_kv_cache():
    g = gpu("h200")
    t = servesim.op_time("attention-decode", "h200", batch=64, context=8192, heads=32, kv_heads=8, head_dim=128)
    kv = 64 * 8192 * 8 * 128 * 2 * 2   # batch x context x KV heads x dim x (K, V) x BF16
    assert t["seconds"] >= kv / g["hbm_bw_bytes_per_s"]


def test_collective_costs_grow_with_bytes():
    small = servesim.op_time("collective", "h200", op="all-reduce", gpus=8, bytes=1 << 20)["seconds"]
    big = servesim.op_time("collective", "h200", op="all-reduce", gpus=8, bytes=1 << 30)["seconds"]
    assert big > 100 * small / 1024 * 0.5 and big > small
    g = gpu("h200")
    # A ring all-reduce moves 2(n-1)/n of the buffer over each GPU's NVLink.
    assert big >= 2 * 7 / 8 * (1 << 30) / g["nvlink_bw_bytes_per_s"]


def test_step_parts_add_up(cli):
    s = servesim.step("nemotron-3-super", "h200", tp=8, precision="fp8", batch=32, context=2000)
    for phase in ("decode", "prefill"):
        parts = s[phase]["parts"]
        assert sum(p["seconds"] for p in parts) == pytest.approx(s[phase]["seconds"], rel=1e-9)
        assert {p["bound"] for p in parts} <= {"compute", "memory", "launch", "communication"}
    assert s["prefill"]["seconds"] > s["decode"]["seconds"]    # 64k prompt tokens vs 32 tokens
    assert s == cli("step", "--model", "nemotron-3-super", "--gpu", "h200", "--tp", 8, "--precision", "fp8",
                    "--batch", 32, "--context", 2000, "--format", "json")
