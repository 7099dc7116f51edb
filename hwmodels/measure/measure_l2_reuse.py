#!/usr/bin/env python3
"""How much faster a weight-streaming kernel runs when its weights are still in L2 (H200).

A kernel table timed by replaying one op on one copy of its weights (AIConfigurator's MoE rows, and
its fp8_block and nvfp4 GEMM rows) finds the weights in L2 on every replay once they fit there;
AIC's other GEMM rows rotate 6 copies, which fit there only when 6 x the weights do. In a serving
step the same layer's weights come back only after every other layer's have streamed through
HBM: they are always cold. This script times the same calls both ways:

  warm      one copy of the weights, replayed (a one-copy kernel table)
  copies6   6 copies, rotated (AIC's dense GEMM rows)
  cold      enough copies that one pass reads >= 1 GiB (20x the 50 MB L2), rotated

for (1) an MoE layer's expert GEMMs at decode sizes, gate_up then down over the experts a batch
touches (torch._grouped_mm bf16, torch._scaled_grouped_mm fp8 row-wise), at the expert shapes of
gpt-oss-120b, MiniMax-M2.5 and Kimi-K2.5 at TP 1, 2, 4 and 8 and 1-64 tokens, and (2) dense
GEMMs (torch.mm bf16) of 1-256 MB of weights at m = 1-64; with --ops attention, (3) decode
attention (torch SDPA, GQA; the KV history is the operand) of gpt-oss-120b and MiniMax-M2.5 heads.
Each point: ms = median of CUDA-graph replay (triton do_bench_cudagraph; the graph holds one pass
over the copies, >= 20 calls), ms_eager = triton do_bench median (launches included).

    PYTHONUNBUFFERED=1 python3 measure_l2_reuse.py --out DIR      # writes DIR/h200_l2_reuse.json
    PYTHONUNBUFFERED=1 python3 measure_l2_reuse.py --out DIR --ops attention   # DIR/h200_l2_reuse_attention.json
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

COLD_BYTES = 1 << 30
MIN_CALLS = 20
MAX_COPIES = 4096
MAX_WEIGHT_BYTES = 2 << 30
# (name, hidden, moe intermediate, top-k, experts): the routed experts of the catalogue's MoE models
MOE = [("gpt-oss-120b", 2880, 2880, 4, 128), ("minimax-m2.5", 3072, 1536, 8, 256), ("kimi-k2.5", 7168, 2048, 8, 384)]
TPS = [1, 2, 4, 8]
TOKENS = [1, 4, 16, 64]
DENSE_MB = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256]
DENSE_M = [1, 4, 16, 64]
# (batch, context, heads, kv heads, head_dim): decode attention of gpt-oss-120b (64 / 8 heads of 64)
# at TP 1 and 8 and of MiniMax-M2.5 (48 / 8 of 128) at TP 1 and 4, 1-64 sequences of 512-16k tokens
ATTENTION = [(b, c, h, kv, d) for (h, kv, d) in [(64, 8, 64), (8, 1, 64), (48, 8, 128), (12, 2, 128)]
             for b in (1, 4, 16, 64) for c in (512, 1536, 4096, 16384)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", default="moe,dense", help="comma-separated: moe, dense, attention (default moe,dense)")
    args = ap.parse_args()
    ops = set(args.ops.split(","))
    os.makedirs(args.out, exist_ok=True)
    import torch
    import triton
    import measure_kernels as mk
    mk.torch, mk.triton = torch, triton
    env = mk.environment()
    props = torch.cuda.get_device_properties(0)
    env["l2_bytes"] = getattr(props, "L2_cache_size", None)
    print(json.dumps(env), flush=True)

    def bench(calls):
        """calls: list of zero-argument callables, one pass over the copies. Per-call ms."""
        reps = max(1, math.ceil(MIN_CALLS / len(calls)))
        seq = calls * reps

        def fn():
            for c in seq:
                c()
        fn()
        torch.cuda.synchronize()
        g = triton.testing.do_bench_cudagraph(fn, rep=20, return_mode="median")
        e = triton.testing.do_bench(fn, warmup=5, rep=20, return_mode="median")
        return g / len(seq), e / len(seq)

    def copies_for(mode, nbytes):
        if mode == "warm":
            return 1
        if mode == "copies6":
            return 6
        return max(2, min(MAX_COPIES, math.ceil(COLD_BYTES / nbytes)))

    points = []
    t0 = time.time()
    for name, hidden, inter, topk, experts in (MOE if "moe" in ops else []):
        for tp in TPS:
            ii = inter // tp
            for m in TOKENS:
                slots = m * topk
                g = min(experts, slots)
                counts = [slots // g + (1 if i < slots % g else 0) for i in range(g)]
                offs = torch.tensor(list(itertools_accumulate(counts)), device="cuda", dtype=torch.int32)
                for dtype in ("bf16", "fp8"):
                    dt = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
                    esz = 1 if dtype == "fp8" else 2
                    wbytes = esz * g * (2 * ii * hidden + hidden * ii)
                    if wbytes > MAX_WEIGHT_BYTES or (dtype == "fp8" and ii % 16):
                        continue   # far past any L2 / cuBLASLt needs fp8 sizes divisible by 16
                    x = torch.randn(slots, hidden, device="cuda", dtype=torch.bfloat16).to(dt)
                    h = torch.randn(slots, ii, device="cuda", dtype=torch.bfloat16).to(dt)
                    sx, sh = torch.ones(slots, device="cuda"), torch.ones(slots, device="cuda")
                    su, sd = torch.ones(g, 2 * ii, device="cuda"), torch.ones(g, hidden, device="cuda")
                    for mode in ("warm", "cold"):
                        n = copies_for(mode, wbytes)
                        ws = [((torch.randn(g, 2 * ii, hidden, device="cuda", dtype=torch.bfloat16) * 0.05).to(dt),
                               (torch.randn(g, hidden, ii, device="cuda", dtype=torch.bfloat16) * 0.05).to(dt))
                              for _ in range(n)]
                        if dtype == "fp8":
                            def layer(wu, wd):
                                torch._scaled_grouped_mm(x, wu.transpose(-2, -1), sx, su, offs=offs, out_dtype=torch.bfloat16)
                                torch._scaled_grouped_mm(h, wd.transpose(-2, -1), sh, sd, offs=offs, out_dtype=torch.bfloat16)
                        else:
                            def layer(wu, wd):
                                torch._grouped_mm(x, wu.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)
                                torch._grouped_mm(h, wd.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)
                        try:
                            ms, ms_eager = bench([(lambda wu=wu, wd=wd: layer(wu, wd)) for wu, wd in ws])
                        except Exception as e:  # noqa: BLE001
                            torch.cuda.synchronize()
                            print(f"{name} tp{tp} m{m} {dtype}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                            break
                        points.append({"op": "moe_experts", "model": name, "tp": tp, "tokens": m, "dtype": dtype,
                                       "experts_touched": g, "hidden": hidden, "inter": ii, "weight_bytes": wbytes,
                                       "mode": mode, "copies": n, "ms": round(ms, 6), "ms_eager": round(ms_eager, 6)})
                        print(json.dumps(points[-1]), flush=True)
                        del ws
                    torch.cuda.empty_cache()
    for b, ctx, heads, kvh, d in (ATTENTION if "attention" in ops else []):
        # Decode attention: one query token per sequence against its KV history (torch SDPA, GQA),
        # the KV the only large operand.
        kvbytes = 2 * 2 * b * kvh * ctx * d
        if kvbytes > MAX_WEIGHT_BYTES:
            continue
        q = torch.randn(b, heads, 1, d, device="cuda", dtype=torch.bfloat16)
        for mode in ("warm", "cold"):
            n = copies_for(mode, kvbytes)
            kvs = [(torch.randn(b, kvh, ctx, d, device="cuda", dtype=torch.bfloat16),
                    torch.randn(b, kvh, ctx, d, device="cuda", dtype=torch.bfloat16)) for _ in range(n)]
            f = lambda k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # noqa: E731
            ms, ms_eager = bench([(lambda k=k, v=v: f(k, v)) for k, v in kvs])
            points.append({"op": "attention_decode", "batch": b, "context": ctx, "heads": heads, "kv_heads": kvh,
                           "head_dim": d, "dtype": "bf16", "weight_bytes": kvbytes, "mode": mode, "copies": n,
                           "ms": round(ms, 6), "ms_eager": round(ms_eager, 6)})
            print(json.dumps(points[-1]), flush=True)
            del kvs
        torch.cuda.empty_cache()
    for mb in (DENSE_MB if "dense" in ops else []):
        k = 4096 if mb >= 8 else 2048
        n = max(256, int(mb * 1e6 / 2 / k) // 128 * 128)
        wbytes = 2 * n * k
        for m in DENSE_M:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            for mode in ("warm", "copies6", "cold"):
                c = copies_for(mode, wbytes)
                ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(c)]
                ms, ms_eager = bench([(lambda w=w: torch.mm(x, w.t())) for w in ws])
                points.append({"op": "dense_gemm", "m": m, "n": n, "k": k, "dtype": "bf16", "weight_bytes": wbytes,
                               "mode": mode, "copies": c, "ms": round(ms, 6), "ms_eager": round(ms_eager, 6)})
                print(json.dumps(points[-1]), flush=True)
                del ws
            torch.cuda.empty_cache()
    out = {"about": __doc__.strip().split("\n\n    PYTHONUNBUFFERED")[0], "env": env,
           "seconds": round(time.time() - t0, 1), "points": points}
    name = "h200_l2_reuse.json" if ops == {"moe", "dense"} else "h200_l2_reuse_" + "_".join(sorted(ops)) + ".json"
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(out, f, indent=1)
    print(f"done: {len(points)} points in {time.time() - t0:.0f} s", flush=True)


def itertools_accumulate(counts):
    acc = 0
    for c in counts:
        acc += c
        yield acc


if __name__ == "__main__":
    main()
