#!/usr/bin/env python3
"""Time the single-GPU kernel families of a serving step and write one calibration JSON per
family (format: hwmodels/measure/README.md).

    PYTHONUNBUFFERED=1 python3 measure_kernels.py --out DIR          # on the GPU machine
    python3 measure_kernels.py --dry-run                               # anywhere: counts, budget plan

Every point is timed twice: 'ms' = median of CUDA-graph replay (triton.testing.do_bench_cudagraph),
'ms_eager' = median of eager launches (triton.testing.do_bench, which zeroes a 256 MB buffer
before each call). Inputs are random (never zeros) and rotate among enough copies that one
pass over them exceeds ROT_BYTES, well past the 50-60 MB L2. Each family has a time budget;
when it is spent the remaining points are skipped and the file's "about" says how many."""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shapes  # noqa: E402
from calib_io import read_points, write_family  # noqa: E402

ORDER = ["copy", "elementwise", "conv1d", "attention_decode", "attention_prefill", "grouped_gemm",
         "gemm_bf16", "gemm_fp8"]
GRID = "grouped_gemm_grid"   # --grouped-grid: the dense grouped-GEMM grid alone (shapes.grouped_grid_points)
BUDGET_S = {"copy": 6, "elementwise": 20, "conv1d": 14, "attention_decode": 30, "attention_prefill": 40,
            "grouped_gemm": 35, "gemm_bf16": 135, "gemm_fp8": 100, GRID: 280}
FILE_OF = {"gemm_bf16": "gemm", "gemm_fp8": "gemm", GRID: "grouped_gemm"}
CHECKPOINT_EVERY = 250   # points between rewrites of a family file, so a run cut short keeps its points
DEFAULT_EXCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "calibration", "h200", "grouped_gemm.json")
ROT_BYTES = 256 << 20
MAX_SETS = 256
GRAPH_REP_MS = 2      # do_bench_cudagraph: each of its 10 replays runs >= 2 ms of calls
EAGER_WARM_MS, EAGER_REP_MS = 2, 6

torch = triton = K = None   # imported lazily so that --dry-run needs neither


def nvsmi(query):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({e})"


def environment():
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None
    return {"gpu": torch.cuda.get_device_name(0), "driver": nvsmi("driver_version"), "cuda": torch.version.cuda,
            "torch": torch.__version__, "triton": triton.__version__, "nccl": nccl,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "sms": torch.cuda.get_device_properties(0).multi_processor_count,
            "clocks_at_start": nvsmi("clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu")}


class Pool:
    """One large buffer of random values; views of it are the inputs of every point, so that
    rotating among many input copies costs no allocation. Tensors larger than half the pool
    are drawn fresh."""

    def __init__(self, elems):
        self.bf16 = torch.randn(elems, device="cuda", dtype=torch.bfloat16)
        self.fp8 = self.bf16[: elems // 2].to(torch.float8_e4m3fn)
        self.cur = {torch.bfloat16: 0, torch.float8_e4m3fn: 0}

    def reset(self):
        self.cur = {k: 0 for k in self.cur}

    def take(self, shape, dtype=torch.bfloat16 if torch else None):
        dtype = dtype or torch.bfloat16
        src = self.fp8 if dtype == torch.float8_e4m3fn else self.bf16
        n = math.prod(shape)
        if n > src.numel() // 2:
            t = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
            return t.to(dtype) if dtype != torch.bfloat16 else t
        if self.cur[dtype] + n > src.numel():
            self.cur[dtype] = 0
        t = src[self.cur[dtype]: self.cur[dtype] + n].view(*shape)
        self.cur[dtype] += -(-n // 256) * 256
        return t


POOL = None


def n_sets(set_bytes):
    return max(1, min(MAX_SETS, math.ceil(ROT_BYTES / max(1, set_bytes))))


def cycler(sets, f):
    state = [0]

    def fn():
        s = sets[state[0]]
        state[0] = (state[0] + 1) % len(sets)
        return f(*s)
    return fn


def _median(bench, fn, **kw):
    try:
        return bench(fn, return_mode="median", **kw)
    except TypeError:
        return bench(fn, quantiles=[0.5], **kw)


def bench(fn):
    r = {}
    try:
        r["ms"] = _median(triton.testing.do_bench_cudagraph, fn, rep=GRAPH_REP_MS)
    except Exception as e:  # noqa: BLE001
        torch.cuda.synchronize()
        r["graph_error"] = f"{type(e).__name__}: {str(e)[:120]}"
    r["ms_eager"] = _median(triton.testing.do_bench, fn, warmup=EAGER_WARM_MS, rep=EAGER_REP_MS)
    if "ms" not in r:
        r["ms"] = r["ms_eager"]
        r["ms_from"] = "eager (graph capture failed)"
    return r


# ---------------------------------------------------------------- families
NOTES = {}   # family -> list of method notes found at run time (verification, fallbacks)


def note(family, text):
    NOTES.setdefault(family, []).append(text)
    print(f"[{family}] {text}")


def make_copy(p):
    n = p["bytes"] // 2
    sets = [(POOL.take((n,)), torch.empty(n, device="cuda", dtype=torch.bfloat16)) for _ in range(n_sets(2 * p["bytes"]))]
    return cycler(sets, lambda s, d: d.copy_(s)), lambda ms: {"gbps_rw": 2 * p["bytes"] / ms / 1e6}


EW_IMPL = {}


def setup_elementwise():
    t, h = 300, 4096
    x, z, w = POOL.take((t, h)), POOL.take((t, h)), POOL.take((h,))
    checks = {}
    y = torch.empty_like(x); K.rmsnorm(x, w, y); checks["rmsnorm"] = K.rel_err(y, K.ref_rmsnorm(x, w))
    y = torch.empty_like(x); K.gated_rmsnorm(x, z, w, y, 1024); checks["gated_rmsnorm"] = K.rel_err(y, K.ref_gated_rmsnorm(x, z, w, 1024))
    y = torch.empty(t, h // 2, device="cuda", dtype=torch.bfloat16); K.silu_mul(x, y); checks["silu_mul"] = K.rel_err(y, K.ref_silu_mul(x))
    y = torch.empty_like(x); K.relu2(x, y); checks["relu2"] = K.rel_err(y, K.ref_relu2(x))
    y = torch.empty_like(x); K.residual_add(x, z, y); checks["residual_add"] = K.rel_err(y, x.float() + z.float())
    dt, b = POOL.take((t, 96)), POOL.take((96,))
    y = torch.empty_like(dt); K.softplus_dt(dt, b, y); checks["softplus_dt"] = K.rel_err(y, K.ref_softplus_dt(dt, b))
    for op, err in checks.items():
        EW_IMPL[op] = "triton" if err < 1e-2 else "torch"
        note("elementwise", f"{op}: Triton kernel rel. error vs float32 reference {err:.1e} -> timing {EW_IMPL[op]}")


def make_elementwise(p):
    import torch.nn.functional as F
    op, t, h = p["op"], p["tokens"], p["hidden"]
    bf = torch.bfloat16
    tri = EW_IMPL.get(op) == "triton"
    e = lambda *s: torch.empty(*s, device="cuda", dtype=bf)  # noqa: E731
    if op == "rmsnorm":
        w = POOL.take((h,))
        mk = lambda: (POOL.take((t, h)), e(t, h))  # noqa: E731
        f = (lambda x, y: K.rmsnorm(x, w, y)) if tri else (lambda x, y: F.rms_norm(x, (h,), w, 1e-5))
    elif op == "residual_add":
        mk = lambda: (POOL.take((t, h)), POOL.take((t, h)), e(t, h))  # noqa: E731
        f = K.residual_add if tri else (lambda a, b, y: torch.add(a, b, out=y))
    elif op == "silu_mul":
        mk = lambda: (POOL.take((t, 2 * h)), e(t, h))  # noqa: E731
        f = K.silu_mul if tri else (lambda x, y: torch.mul(F.silu(x[:, :h]), x[:, h:], out=y))
    elif op == "relu2":
        mk = lambda: (POOL.take((t, h)), e(t, h))  # noqa: E731
        f = K.relu2 if tri else (lambda x, y: torch.square(F.relu(x), out=y))
    elif op == "gated_rmsnorm":
        w, g = POOL.take((h,)), p["group_size"]
        mk = lambda: (POOL.take((t, h)), POOL.take((t, h)), e(t, h))  # noqa: E731
        f = (lambda x, z, y: K.gated_rmsnorm(x, z, w, y, g)) if tri else (lambda x, z, y: K.ref_gated_rmsnorm(x, z, w, g))
    elif op == "softplus_dt":
        b = POOL.take((h,))
        mk = lambda: (POOL.take((t, h)), e(t, h))  # noqa: E731
        f = (lambda x, y: K.softplus_dt(x, b, y)) if tri else (lambda x, y: F.softplus(x + b))
    sets = [mk() for _ in range(n_sets(p["bytes"]))]
    return cycler(sets, f), lambda ms: {"impl": EW_IMPL.get(op, "torch"), "gbps": p["bytes"] / ms / 1e6}


CONV_IMPL = {}


def setup_conv1d():
    x, w, b = POOL.take((2, 700, 1000)), POOL.take((1000, 4)), POOL.take((1000,))
    y = torch.empty_like(x); K.conv_prefill(x, w, b, y)
    err = K.rel_err(y, K.ref_conv_prefill(x, w, b))
    CONV_IMPL["prefill"] = "triton" if err < 1e-2 else "torch"
    note("conv1d", f"prefill Triton kernel rel. error {err:.1e} -> timing {CONV_IMPL['prefill']}")
    xs, st, y = POOL.take((5, 1000)), POOL.take((5, 3, 1000)).clone(), torch.empty(5, 1000, device="cuda", dtype=torch.bfloat16)
    ref_y, ref_s = K.ref_conv_update(xs, st, w, b)
    K.conv_update(xs, st, w, b, y)
    err = max(K.rel_err(y, ref_y), K.rel_err(st, ref_s))
    CONV_IMPL["decode"] = "triton" if err < 1e-2 else "torch"
    note("conv1d", f"decode update Triton kernel rel. error {err:.1e} -> timing {CONV_IMPL['decode']}")


def make_conv1d(p):
    import torch.nn.functional as F
    c, bsz = p["channels"], p["batch"]
    w, b = POOL.take((c, 4)), POOL.take((c,))
    if p["mode"] == "prefill":
        L = p["tokens"] // bsz          # tokens = batch x sequence length
        nbytes = 2 * 2 * bsz * L * c
        mk = lambda: (POOL.take((bsz, L, c)), torch.empty(bsz, L, c, device="cuda", dtype=torch.bfloat16))  # noqa: E731
        if CONV_IMPL.get("prefill") == "triton":
            f = lambda x, y: K.conv_prefill(x, w, b, y)  # noqa: E731
        else:
            f = lambda x, y: F.conv1d(x.transpose(1, 2), w.unsqueeze(1), b, padding=3, groups=c)  # noqa: E731
    else:
        nbytes = 2 * (bsz * c * 2 + 2 * bsz * 3 * c)
        mk = lambda: (POOL.take((bsz, c)), POOL.take((bsz, 3, c)), torch.empty(bsz, c, device="cuda", dtype=torch.bfloat16))  # noqa: E731
        if CONV_IMPL.get("decode") == "triton":
            f = lambda x, s, y: K.conv_update(x, s, w, b, y)  # noqa: E731
        else:
            f = lambda x, s, y: K.ref_conv_update(x, s, w, b)  # noqa: E731
    sets = [mk() for _ in range(n_sets(nbytes))]
    return cycler(sets, f), lambda ms: {"impl": CONV_IMPL.get(p["mode"], "torch"), "bytes": nbytes, "gbps": nbytes / ms / 1e6}


ATTN = {"gqa": True}


def setup_attention(family):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = POOL.take((1, 8, 256, 128)), POOL.take((1, 2, 256, 128)), POOL.take((1, 2, 256, 128))
    ref = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(4, 1), v.float().repeat_interleave(4, 1), is_causal=True)
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        note(family, f"flash SDPA with enable_gqa=True runs; rel. error vs float32 math {K.rel_err(out, ref):.1e}")
    except Exception as e:  # noqa: BLE001
        ATTN["gqa"] = False
        note(family, f"flash SDPA rejected enable_gqa ({str(e)[:100]}); KV heads expanded to query heads before timing")


def _sdpa(q, k, v, causal):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=ATTN["gqa"])


def _kv(shape, kvh, h):
    t = POOL.take(shape)
    return t if ATTN["gqa"] else t.repeat_interleave(h // kvh, 1)


def make_prefill(p):
    b, s, h, kv, d = p["batch"], p["seq"], p["heads"], p["kv_heads"], p["head_dim"]
    nbytes = 2 * b * s * d * (2 * h + 2 * kv)
    mk = lambda: (POOL.take((b, h, s, d)), _kv((b, kv, s, d), kv, h), _kv((b, kv, s, d), kv, h))  # noqa: E731
    sets = [mk() for _ in range(n_sets(nbytes))]
    flops = 2 * b * h * s * s * d      # causal: half of 4*b*h*s^2*d
    return cycler(sets, lambda q, k, v: _sdpa(q, k, v, True)), lambda ms: {"tflops": flops / ms / 1e9}


def make_decode(p):
    b, c, h, kv, d = p["batch"], p["context"], p["heads"], p["kv_heads"], p["head_dim"]
    nbytes = 2 * b * c * kv * d * 2
    mk = lambda: (POOL.take((b, h, 1, d)), _kv((b, kv, c, d), kv, h), _kv((b, kv, c, d), kv, h))  # noqa: E731
    sets = [mk() for _ in range(n_sets(nbytes))]
    return cycler(sets, lambda q, k, v: _sdpa(q, k, v, False)), lambda ms: {"kv_bytes": nbytes, "gbps": nbytes / ms / 1e6}


GROUPED = {"fp8": True}


def setup_grouped():
    counts = [16, 0, 32, 48]
    a, bw = POOL.take((96, 256)), POOL.take((4, 128, 256))
    offs = torch.tensor([16, 16, 48, 96], device="cuda", dtype=torch.int32)
    ref = torch.cat([a[o - c: o].float() @ bw[e].float().t() for e, (c, o) in enumerate(zip(counts, [16, 16, 48, 96]))])
    out = torch._grouped_mm(a, bw.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)
    note("grouped_gemm", f"torch._grouped_mm bf16 (an empty group included) rel. error vs per-expert float32 {K.rel_err(out, ref):.1e}")
    try:
        a8, b8 = a.to(torch.float8_e4m3fn), bw.to(torch.float8_e4m3fn)
        sa, sb = torch.ones(96, device="cuda"), torch.ones(4, 128, device="cuda")
        out = torch._scaled_grouped_mm(a8, b8.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16)
        ref8 = torch.cat([a8[o - c: o].float() @ b8[e].float().t() for e, (c, o) in enumerate(zip(counts, [16, 16, 48, 96]))])
        note("grouped_gemm", f"torch._scaled_grouped_mm fp8 (row-wise scales) rel. error {K.rel_err(out, ref8):.1e}")
    except Exception as e:  # noqa: BLE001
        GROUPED["fp8"] = False
        note("grouped_gemm", f"fp8 grouped GEMM not measured: torch._scaled_grouped_mm failed ({type(e).__name__}: {str(e)[:120]})")


def make_grouped(p):
    e, t, n, k = p["experts"], p["tokens"], p["n"], p["k"]
    counts = shapes.expert_counts(t, e, p["skew"])
    ends, acc = [], 0
    for c in counts:
        acc += c
        ends.append(acc)
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    fp8 = p["dtype"] == "fp8"
    if fp8 and not GROUPED["fp8"]:
        raise RuntimeError("fp8 grouped GEMM unavailable")
    dt = torch.float8_e4m3fn if fp8 else torch.bfloat16
    esz = 1 if fp8 else 2
    nbytes = esz * (t * k + e * n * k) + 2 * t * n
    mk = lambda: (POOL.take((t, k), dt), POOL.take((e, n, k), dt))  # noqa: E731
    sets = [mk() for _ in range(n_sets(nbytes))]
    if fp8:
        sa, sb = torch.ones(t, device="cuda"), torch.ones(e, n, device="cuda")
        f = lambda a, b: torch._scaled_grouped_mm(a, b.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        f = lambda a, b: torch._grouped_mm(a, b.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)  # noqa: E731
    extra = {"max_expert_tokens": max(counts), "active_experts": sum(1 for c in counts if c)}
    return cycler(sets, f), lambda ms: dict(extra, tflops=2 * t * n * k / ms / 1e9)


GEMM = {"fp8_pad_m": False}


def setup_gemm(dtype):
    a, b = POOL.take((64, 512)), POOL.take((256, 512))
    if dtype == "bf16":
        note("gemm", f"bf16 torch.mm rel. error vs float32 {K.rel_err(a @ b.t(), a.float() @ b.float().t()):.1e}")
    else:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        out = torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
        try:
            torch._scaled_mm(a8[:1], b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
        except Exception as e:  # noqa: BLE001
            GEMM["fp8_pad_m"] = True
            note("gemm", f"fp8 torch._scaled_mm rejected m=1 ({str(e)[:80]}); m padded up to a multiple of 16 (field m_padded)")
        note("gemm", f"fp8 torch._scaled_mm rel. error vs float32 on the same fp8 values {K.rel_err(out, a8.float() @ b8.float().t()):.1e}")


def make_gemm(p):
    m, n, k = p["m"], p["n"], p["k"]
    extra = {}
    if p["dtype"] == "bf16":
        nbytes = 2 * (m * k + n * k + m * n)
        mk = lambda: (POOL.take((m, k)), POOL.take((n, k)))  # noqa: E731
        f = lambda a, b: torch.mm(a, b.t())  # noqa: E731
    else:
        if n % 16 or k % 16:
            raise ValueError("torch._scaled_mm needs N and K divisible by 16")
        if GEMM["fp8_pad_m"] and m % 16:
            m = -(-m // 16) * 16
            extra["m_padded"] = m
        nbytes = m * k + n * k + 2 * m * n
        one = torch.ones((), device="cuda")
        mk = lambda: (POOL.take((m, k), torch.float8_e4m3fn), POOL.take((n, k), torch.float8_e4m3fn))  # noqa: E731
        f = lambda a, b: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)  # noqa: E731
    sets = [mk() for _ in range(n_sets(nbytes))]
    return cycler(sets, f), lambda ms: dict(extra, tflops=2 * p["m"] * n * k / ms / 1e9)


MAKERS = {"copy": make_copy, "elementwise": make_elementwise, "conv1d": make_conv1d,
          "attention_decode": make_decode, "attention_prefill": make_prefill, "grouped_gemm": make_grouped, GRID: make_grouped,
          "gemm_bf16": make_gemm, "gemm_fp8": make_gemm}
SETUPS = {"elementwise": setup_elementwise, "conv1d": setup_conv1d, "attention_decode": lambda: setup_attention("attention_decode"),
          "attention_prefill": lambda: setup_attention("attention_prefill"), "grouped_gemm": setup_grouped, GRID: setup_grouped,
          "gemm_bf16": lambda: setup_gemm("bf16"), "gemm_fp8": lambda: setup_gemm("fp8")}

ABOUT = {
    "copy": "HBM copy: dst.copy_(src) of 'bytes' bf16 bytes device to device (moves 2x bytes: read + write); gbps_rw counts both.",
    "elementwise": "Memory-bound ops of a step, one fused kernel each (Triton, checked against a float32 PyTorch reference; 'impl' says which ran): rmsnorm (T x hidden), residual_add, silu_mul (input T x 2*hidden -> T x hidden, SwiGLU), relu2 (ReLU^2), gated_rmsnorm (Mamba-2 output norm: rmsnorm over group_size of x*silu(z), times weight), softplus_dt (softplus(dt + dt_bias), T x mamba heads). bf16 in and out, float32 math. 'bytes' = minimal HBM traffic (inputs read once + outputs written once).",
    "conv1d": "Mamba-2 depthwise causal conv1d (kernel 4) + SiLU, channels-last bf16, channels = conv_dim per GPU (d_inner + 2*groups*d_state over TP). prefill: batch x tokens (tokens per sequence); decode: one token per sequence with the rolling (batch, 3, channels) state updated in place (tokens = batch). Triton kernels checked against F.conv1d ('impl'); 'bytes' = minimal traffic.",
    "attention_decode": "Decode attention, one query token per sequence: torch SDPA with the flash backend forced (flash-attn / FlashInfer paged kernels are not installed on the measuring machine), bf16, contiguous (non-paged) K/V of 'context' tokens per sequence, all sequences the same length, GQA via enable_gqa. heads/kv_heads per GPU after TP. gbps = K+V bytes read / ms.",
    "attention_prefill": "Prefill attention: causal GQA torch SDPA with the flash backend forced (PyTorch's bundled FlashAttention-2; no FA3), bf16, q (batch, heads, seq, 128), k/v (batch, kv_heads, seq, 128), enable_gqa. tflops counts causal work 2*b*h*s^2*d.",
    "grouped_gemm": "Grouped MoE GEMM: torch._grouped_mm (bf16, CUTLASS grouped kernel) or torch._scaled_grouped_mm (fp8 e4m3, row-wise float32 scales), 'tokens' routed token-slots (tokens x top-k) of width k spread over 'experts' local experts with weights (experts, n, k); routing 'balanced' = even split, 'skewed' = Zipf(skew) over expert rank (largest-remainder rounding, may leave experts empty). fp8 measured balanced only.",
    "gemm": "Dense GEMM y = x W^T, x (m, k), W (n, k) row-major: bf16 torch.mm (cuBLAS) and fp8 e4m3 torch._scaled_mm with per-tensor float32 scales, bf16 output, use_fast_accum=True (the fast-accumulation mode serving engines use for per-tensor fp8). (n, k) are the linear layers of the shipped models at TP 1/2/4/8 ('used_by' names one user and how many others share the shape); fp8 skips n or k not divisible by 16 (cuBLASLt requirement).",
}
METHOD = ("'ms' = median of CUDA-graph replay, triton.testing.do_bench_cudagraph(rep=%d ms: the graph holds enough calls for "
          "%d ms, replayed 10 times); 'ms_eager' = median of triton.testing.do_bench(warmup=%d ms, rep=%d ms), which zeroes "
          "a 256 MB buffer before every call, so it is cold-L2 GPU time plus whatever CPU launch time the ~0.1 ms flush does "
          "not hide. Inputs are random bf16 normal values (fp8 = the same values cast), never zeros, drawn as views of one "
          "random pool; each point rotates among enough distinct input (and output) copies that one pass covers >= 256 MB "
          "(at most %d copies), so graph replays do not run from the 50-60 MB L2. Clocks and power limit left as found.")


def run(args):
    global torch, triton, K, POOL
    import torch as _t
    import triton as _tr
    import triton.testing  # noqa: F401
    torch, triton = _t, _tr
    import kernels as _k
    K = _k
    t_start = time.time()
    deadline = t_start + args.deadline
    os.makedirs(args.out, exist_ok=True)
    env = environment()
    print("env:", json.dumps(env))
    POOL = Pool(args.pool_gib << 29)          # bf16 elements = GiB * 2^30 / 2
    torch.cuda.synchronize()
    method = METHOD % (GRAPH_REP_MS, GRAPH_REP_MS, EAGER_WARM_MS, EAGER_REP_MS, MAX_SETS)
    all_points, fams = plan(args)
    results, summary = {}, []
    carry = 0.0
    for fam in fams:
        budget = BUDGET_S[fam] * args.budget_scale + carry
        t0 = time.time()
        pts, errors, skipped = [], [], 0
        try:
            if fam in SETUPS:
                SETUPS[fam]()
        except Exception as e:  # noqa: BLE001
            note(fam, f"setup check failed: {type(e).__name__}: {str(e)[:160]}")
        points = all_points[fam]
        out_name = FILE_OF.get(fam, fam)
        for i, p in enumerate(points):
            if pts and i % CHECKPOINT_EVERY == 0:
                write_family(os.path.join(args.out, f"{out_name}.json"), out_name,
                             f"partial run: {len(pts)} of {len(points)} points", env, pts)
            now = time.time()
            if now - t0 > budget or now > deadline:
                skipped = len(points) - i
                break
            POOL.reset()
            try:
                fn, derive = MAKERS[fam](p)
                r = bench(fn)
                q = dict(p)
                q.update(r)
                q.update({k: round(v, 3) if isinstance(v, float) else v for k, v in derive(r["ms"]).items()})
                pts.append(q)
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {str(e).splitlines()[0][:140] if str(e) else ''}"
                errors.append({k: v for k, v in p.items() if k != "used_by"} | {"error": msg})
                if "out of memory" in msg:
                    torch.cuda.empty_cache()
            fn = None
        spent = time.time() - t0
        carry = max(0.0, budget - spent)
        results.setdefault(out_name, {"points": [], "notes": [], "fams": []})
        R = results[out_name]
        R["points"] += pts
        R["fams"].append(fam)
        R["notes"].append(f"{fam}: {len(pts)} points timed in {spent:.0f} s (budget {budget:.0f} s)"
                          + (f", {skipped} skipped when the budget ran out" if skipped else "")
                          + (f", {len(errors)} failed (e.g. {errors[0]['error']})" if errors else ""))
        R["notes"] += NOTES.pop(fam, [])
        R.setdefault("errors", []).extend(errors[:20])
        summary.append((fam, len(pts), skipped, len(errors), spent))
        about = " ".join([ABOUT[out_name], method, "Run notes: " + "; ".join(R["notes"]) + "."])
        write_family(os.path.join(args.out, f"{out_name}.json"), out_name, about, env, R["points"])
        if R["errors"]:
            with open(os.path.join(args.out, "errors.json"), "w") as f:
                json.dump({k: v.get("errors", []) for k, v in results.items()}, f, indent=0)
        print(f"[{fam}] done: {len(pts)} points, {skipped} skipped, {len(errors)} errors, {spent:.1f} s "
              f"(total {time.time() - t_start:.0f} s)", flush=True)
    env["clocks_at_end"] = nvsmi("clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu")
    print_summary(results, summary, time.time() - t_start, env)


def print_summary(results, summary, total_s, env):
    print("\n=== summary (%.0f s) clocks start: %s | end: %s" % (total_s, env["clocks_at_start"], env["clocks_at_end"]))
    print(f"{'family':18s} {'points':>6s} {'skipped':>7s} {'errors':>6s} {'sec':>5s}")
    for fam, n, s, e, t in summary:
        print(f"{fam:18s} {n:6d} {s:7d} {e:6d} {t:5.0f}")

    def best(name, key, flt=lambda p: True):
        pts = [p for p in results.get(name, {}).get("points", []) if key in p and flt(p)]
        return max(pts, key=lambda p: p[key]) if pts else None
    rows = [("copy GB/s (r+w)", best("copy", "gbps_rw")),
            ("gemm bf16 TFLOP/s", best("gemm", "tflops", lambda p: p["dtype"] == "bf16")),
            ("gemm fp8 TFLOP/s", best("gemm", "tflops", lambda p: p["dtype"] == "fp8")),
            ("grouped bf16 TFLOP/s", best("grouped_gemm", "tflops", lambda p: p["dtype"] == "bf16")),
            ("grouped fp8 TFLOP/s", best("grouped_gemm", "tflops", lambda p: p["dtype"] == "fp8")),
            ("prefill attn TFLOP/s", best("attention_prefill", "tflops")),
            ("decode attn GB/s", best("attention_decode", "gbps")),
            ("elementwise GB/s", best("elementwise", "gbps")),
            ("conv1d GB/s", best("conv1d", "gbps"))]
    for label, p in rows:
        if p:
            key = [k for k in ("gbps_rw", "tflops", "gbps") if k in p][0]
            shape = {k: v for k, v in p.items() if k not in ("ms", "ms_eager", "used_by", key, "impl")}
            print(f"  max {label:22s} {p[key]:9.1f}  ms {p['ms']:.4f} eager {p['ms_eager']:.4f}  {json.dumps(shape)[:110]}")
    small = [p["ms_eager"] / p["ms"] for R in results.values() for p in R["points"] if p["ms"] < 0.01 and p["ms"] > 0]
    if small:
        small.sort()
        print(f"  points with ms < 10 us: {len(small)}, median ms_eager/ms {small[len(small) // 2]:.2f}")


def plan(args):
    """The points of every family to run, and the families in order."""
    fp = shapes.family_points()
    if not args.grouped_grid:
        return fp, [f for f in ORDER if f in args.families.split(",")]
    exclude = []
    if args.exclude and os.path.exists(args.exclude):
        exclude = [shapes.grouped_shape_key(p) for p in read_points(json.load(open(args.exclude)))]
    fp[GRID] = shapes.grouped_grid_points(exclude)
    print(f"{GRID}: {len(fp[GRID])} points ({len(exclude)} shapes of {args.exclude} excluded)")
    return fp, [GRID]


def dry_run(args):
    fp, fams = plan(args)
    tot_est = tot_budget = 0
    print(f"{'family':18s} {'points':>6s} {'est s':>6s} {'budget':>6s}")
    for fam in fams:
        est = sum(shapes.est_point_s("gemm" if fam.startswith("gemm") else "grouped_gemm" if fam == GRID else fam, p)
                  for p in fp[fam])
        tot_est += est
        tot_budget += BUDGET_S[fam] * args.budget_scale
        print(f"{fam:18s} {len(fp[fam]):6d} {est:6.0f} {BUDGET_S[fam] * args.budget_scale:6.0f}")
    print(f"{'total':18s} {sum(len(fp[f]) for f in fams):6d} {tot_est:6.0f} {tot_budget:6.0f}  (deadline {args.deadline:.0f} s)")
    if args.grouped_grid:
        g = fp[GRID]
        for dt in ("fp8", "bf16"):
            for rt in ("balanced", "skewed"):
                print(f"  {dt} {rt}: {sum(1 for p in g if p['dtype'] == dt and p['routing'] == rt)} points")
        assert len({shapes.grouped_shape_key(p) for p in g}) == len(g), "duplicate grid shapes"
        big = max(g, key=lambda p: p["experts"] * p["n"] * p["k"])
        print("largest expert weights:", big["used_by"], big["experts"], "experts, GiB %.1f" % (big["experts"] * big["n"] * big["k"] * 2 / 2**30))
        return
    print(f"distinct GEMM (N, K): {len(shapes.gemm_nk())}; attention (heads, kv): {len(shapes.attention_heads())}")
    for fam in ORDER:
        assert all(isinstance(p, dict) for p in fp[fam])
    big = max(fp["gemm_bf16"], key=lambda p: p["m"] * p["n"] * p["k"])
    print("largest GEMM:", big, "set GiB %.2f" % ((big["m"] * big["k"] + big["n"] * big["k"]) * 2 / 2**30))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"), help="folder for <family>.json")
    ap.add_argument("--families", default=",".join(ORDER), help="comma list, from: " + ",".join(ORDER))
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiplies every family's time budget")
    ap.add_argument("--deadline", type=float, default=430.0, help="seconds after which no new point starts")
    ap.add_argument("--pool-gib", type=int, default=8, help="GiB of random bf16 input pool")
    ap.add_argument("--dry-run", action="store_true", help="enumerate shapes and plan budgets; needs no GPU")
    ap.add_argument("--grouped-grid", action="store_true",
                    help="time only the dense grouped-GEMM grid (fp8 and bf16, balanced and skewed), skipping shapes in --exclude")
    ap.add_argument("--exclude", default=DEFAULT_EXCLUDE, help="grouped-GEMM file whose shapes --grouped-grid skips")
    args = ap.parse_args()
    (dry_run if args.dry_run else run)(args)


if __name__ == "__main__":
    main()
