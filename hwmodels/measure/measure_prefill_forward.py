"""Whole-forward check of the kernel tables: does a prefill forward cost the sum of its kernels?

Measures on the local GPU, for a Llama-3.1-8B-shaped decoder (hidden 4096, 32 query / 8 KV heads of
128, SwiGLU 14336, FP8 per-tensor weights and activations as vLLM's CutlassFP8ScaledMM path runs
them):
  1. every FP8 GEMM of a layer (torch._scaled_mm) at M = 256 ... 16384 tokens;
  2. the causal prefill attention (torch SDPA flash backend, bf16) of n sequences of L tokens;
  3. a whole 32-layer prefill forward of n x L tokens (RMSNorm, quantise, GEMMs, RoPE-free
     attention, SiLU-mul, residual), timed as one CUDA graph and eagerly;
and writes JSON: each row's median ms from CUDA-graph replay (triton.testing.do_bench_cudagraph)
and from eager launches (triton.testing.do_bench), plus the GPU, driver and library versions.
Weights are 32 distinct layers (about 7 GB in FP8), so every GEMM streams its weights from HBM.

    python3 measure_prefill_forward.py OUT.json
"""
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.testing as tt

H, NQ, NKV, D, I, LAYERS = 4096, 32, 8, 128, 14336, 32
FP8 = torch.float8_e4m3fn
dev = "cuda"
torch.manual_seed(0)


def fp8_weight(n, k):
    # column-major (k, n) view of an (n, k) row-major matrix, as _scaled_mm wants for B
    return (torch.randn(n, k, device=dev) * 0.02).to(FP8).t()


ONE = torch.ones((), device=dev, dtype=torch.float32)


def qmm(x8, w):
    return torch._scaled_mm(x8, w, scale_a=ONE, scale_b=ONE, out_dtype=torch.bfloat16)


def quant(x):
    return x.to(FP8)


def bench(fn):
    g = tt.do_bench_cudagraph(fn, rep=60)
    e = tt.do_bench(fn, warmup=10, rep=60)
    return g, e


def gemm_rows():
    shapes = {"qkv": (NQ * D + 2 * NKV * D, H), "o": (H, NQ * D), "gate_up": (2 * I, H), "down": (H, I)}
    rows = []
    for name, (n, k) in shapes.items():
        ws = [fp8_weight(n, k) for _ in range(4)]   # 4 copies: each call streams a cold weight
        for m in (256, 512, 1024, 2048, 4096, 8192, 16384):
            x = quant(torch.randn(m, k, device=dev))
            def fn():
                for w in ws:
                    qmm(x, w)
            g, e = bench(fn)
            rows.append({"op": name, "m": m, "n": n, "k": k, "graph_ms": g / 4, "eager_ms": e / 4,
                         "tflops_graph": 2 * m * n * k / (g / 4) / 1e9})
            print("gemm", rows[-1], flush=True)
    return rows


class Layer:
    def __init__(self):
        self.qkv = fp8_weight(NQ * D + 2 * NKV * D, H)
        self.o = fp8_weight(H, NQ * D)
        self.gu = fp8_weight(2 * I, H)
        self.dn = fp8_weight(H, I)
        self.n1 = torch.ones(H, device=dev, dtype=torch.bfloat16)
        self.n2 = torch.ones(H, device=dev, dtype=torch.bfloat16)


def forward(layers, x, nseq, L, attention=True):
    for ly in layers:
        h = F.rms_norm(x, (H,), ly.n1)
        qkv = qmm(quant(h), ly.qkv)
        if attention:
            q, k, v = qkv.split([NQ * D, NKV * D, NKV * D], dim=1)
            q = q.view(nseq, L, NQ, D).transpose(1, 2)
            k = k.view(nseq, L, NKV, D).transpose(1, 2)
            v = v.view(nseq, L, NKV, D).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            a = a.transpose(1, 2).reshape(nseq * L, NQ * D)
        else:
            a = qkv[:, : NQ * D]
        x = x + qmm(quant(a.contiguous()), ly.o)
        h = F.rms_norm(x, (H,), ly.n2)
        gu = qmm(quant(h), ly.gu)
        g, u = gu.chunk(2, dim=1)
        x = x + qmm(quant(F.silu(g) * u), ly.dn)
    return x


def attention_rows():
    rows = []
    for nseq, L in ((1, 1024), (8, 1024), (1, 4096), (2, 4096), (1, 8192), (2, 8192)):
        q = torch.randn(nseq, NQ, L, D, device=dev, dtype=torch.bfloat16)
        k = torch.randn(nseq, NKV, L, D, device=dev, dtype=torch.bfloat16)
        v = torch.randn(nseq, NKV, L, D, device=dev, dtype=torch.bfloat16)
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        g, e = bench(fn)
        fl = 4 * nseq * L * L / 2 * NQ * D
        rows.append({"nseq": nseq, "L": L, "graph_ms": g, "eager_ms": e, "tflops_graph": fl / g / 1e9})
        print("attn", rows[-1], flush=True)
    return rows


def forward_rows():
    layers = [Layer() for _ in range(LAYERS)]
    rows = []
    for nseq, L in ((1, 1024), (8, 1024), (2, 4096), (1, 8192), (2, 8192)):
        x = torch.randn(nseq * L, H, device=dev, dtype=torch.bfloat16) * 0.1
        with torch.no_grad():
            g_all, e_all = bench(lambda: forward(layers, x, nseq, L, True))
            g_lin, e_lin = bench(lambda: forward(layers, x, nseq, L, False))
        rows.append({"nseq": nseq, "L": L, "tokens": nseq * L, "layers": LAYERS,
                     "forward_graph_ms": g_all, "forward_eager_ms": e_all,
                     "no_attention_graph_ms": g_lin, "no_attention_eager_ms": e_lin,
                     "tokens_per_s_graph": nseq * L / g_all * 1e3})
        print("fwd", rows[-1], flush=True)
    return rows


def main():
    out = sys.argv[1]
    p = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    env = {"gpu": p.name, "sms": p.multi_processor_count, "nvidia_smi": smi, "torch": torch.__version__,
           "cuda": torch.version.cuda, "triton": triton.__version__, "date": time.strftime("%Y-%m-%d"),
           "method": "median of triton.testing.do_bench_cudagraph (rep 60 ms) and do_bench (eager) on random data; "
                     "GEMM rows call 4 weight copies per timed call (cold weights) and report per call"}
    res = {"env": env, "gemm": gemm_rows(), "attention": attention_rows(), "forward": forward_rows()}
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
