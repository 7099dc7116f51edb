"""Shapes to time on the GPU, derived from the shipped models' HF configs.

Pure Python (no torch) so that `measure_kernels.py --dry-run` can enumerate and count them
anywhere. A linear layer is y = x W^T with x (M, K) and W (N, K); column-parallel layers split
N over the TP ranks, row-parallel layers split K."""
import hashlib

# Architecture fields from the models' config.json files (hidden, heads, kv heads, head_dim,
# Mamba heads x head_dim, d_state, groups, dense MLP / shared expert / latent sizes, vocab).
MODELS = {
    "nemotron3-nano": dict(hidden=2688, heads=32, kv=2, hd=128, m_heads=64, m_hd=64, d_state=128,
                           groups=8, mlp=None, shared=3712, latent=None, experts=128, expert_inter=1856,
                           vocab=131072, gated_mlp=False),
    "nemotron3-super": dict(hidden=4096, heads=32, kv=2, hd=128, m_heads=128, m_hd=64, d_state=128,
                            groups=8, mlp=None, shared=5376, latent=1024, experts=512, expert_inter=2688,
                            vocab=131072, gated_mlp=False),
    "nemotron3-ultra": dict(hidden=8192, heads=64, kv=2, hd=128, m_heads=256, m_hd=64, d_state=128,
                            groups=8, mlp=None, shared=10240, latent=2048, experts=512, expert_inter=5120,
                            vocab=131072, gated_mlp=False),
    "nemotron-h-8b": dict(hidden=4096, heads=32, kv=8, hd=128, m_heads=128, m_hd=64, d_state=128,
                          groups=8, mlp=21504, shared=None, latent=None, experts=None, expert_inter=None,
                          vocab=131072, gated_mlp=False),
    "nemotron-h-56b": dict(hidden=8192, heads=64, kv=8, hd=128, m_heads=256, m_hd=64, d_state=256,
                           groups=8, mlp=32768, shared=None, latent=None, experts=None, expert_inter=None,
                           vocab=131072, gated_mlp=False),
    "llama-3.1-70b": dict(hidden=8192, heads=64, kv=8, hd=128, m_heads=None, mlp=28672, shared=None,
                          latent=None, experts=None, expert_inter=None, vocab=128256, gated_mlp=True),
    "mixtral-8x7b": dict(hidden=4096, heads=32, kv=8, hd=128, m_heads=None, mlp=None, shared=None,
                         latent=None, experts=8, expert_inter=14336, vocab=32000, gated_mlp=True),
}
TPS = (1, 2, 4, 8)
GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def _shuffle_key(obj):
    """Deterministic pseudo-random order, so that a family cut short by its time budget keeps
    an even spread of shapes rather than dropping whole models."""
    return hashlib.sha1(repr(obj).encode()).hexdigest()


def linear_layers(name, m, tp):
    """(layer, N, K) of every linear layer of one model at tensor parallelism tp, per GPU."""
    h, out = m["hidden"], []
    q = m["heads"] * m["hd"] // tp
    kv_local = max(1, m["kv"] // tp)          # KV heads are replicated when kv < tp
    out.append(("qkv", q + 2 * kv_local * m["hd"], h))
    out.append(("o_proj", h, q))
    if m.get("m_heads"):
        d_inner = m["m_heads"] * m["m_hd"]
        g_local = max(1, m["groups"] // tp)
        in_proj = (2 * d_inner + m["m_heads"]) // tp + 2 * g_local * m["d_state"]
        out.append(("mamba_in_proj", in_proj, h))
        out.append(("mamba_out_proj", h, d_inner // tp))
    if m.get("mlp"):
        up = m["mlp"] * (2 if m["gated_mlp"] else 1)
        out.append(("mlp_up", up // tp, h))
        out.append(("mlp_down", h, m["mlp"] // tp))
    if m.get("shared"):
        out.append(("shared_expert_up", m["shared"] // tp, h))
        out.append(("shared_expert_down", h, m["shared"] // tp))
    if m.get("latent") and tp == 1:           # replicated, not TP-split: one shape for all tp
        out.append(("latent_down", m["latent"], h))
        out.append(("latent_up", h, m["latent"]))
    if m.get("experts") and tp == 1:          # router, replicated
        out.append(("router", m["experts"], h))
    if m.get("experts") and m["gated_mlp"]:   # Mixtral experts as dense GEMMs (TP-split experts)
        out.append(("expert_up", 2 * m["expert_inter"] // tp, h))
        out.append(("expert_down", h, m["expert_inter"] // tp))
    out.append(("lm_head", -(-m["vocab"] // tp), h))
    return out


def gemm_nk():
    """Deduplicated (N, K) -> list of 'model/tpN/layer' users, in budget order."""
    users = {}
    for name, m in MODELS.items():
        for tp in TPS:
            for layer, n, k in linear_layers(name, m, tp):
                users.setdefault((n, k), []).append(f"{name}/tp{tp}/{layer}")
    return sorted(users.items(), key=lambda kv: _shuffle_key(kv[0]))


def gemm_points(dtype):
    for (n, k), used_by in gemm_nk():
        for mm in GEMM_M:
            yield dict(dtype=dtype, m=mm, n=n, k=k, used_by=used_by[0] + (f" +{len(used_by) - 1}" if len(used_by) > 1 else ""))


# Grouped MoE GEMM: (label, N, K per expert, experts per GPU) and routed token-slots.
GROUPED_SHAPES = [
    ("nemotron3-nano/up", 1856, 2688, (128, 16)),
    ("nemotron3-nano/down", 2688, 1856, (128, 16)),
    ("nemotron3-super/latent_up", 2688, 1024, (512, 64)),
    ("nemotron3-super/latent_down", 1024, 2688, (512, 64)),
    ("mixtral-8x7b/up_gate", 28672, 4096, (8, 2)),
    ("mixtral-8x7b/down", 4096, 14336, (8, 2)),
]
GROUPED_SLOTS = (16, 64, 256, 1024, 4096, 16384, 65536)
SKEW = 1.0   # Zipf exponent of expert popularity for "skewed" routing


def expert_counts(slots, experts, skew):
    """Token-slots per expert: even split (skew 0) or Zipf(skew) over expert rank, rounded by
    largest remainder so the counts sum to slots exactly."""
    w = [1.0 if skew == 0 else (e + 1) ** -skew for e in range(experts)]
    tot = sum(w)
    exact = [slots * x / tot for x in w]
    counts = [int(x) for x in exact]
    rest = slots - sum(counts)
    order = sorted(range(experts), key=lambda e: (-(exact[e] - counts[e]), e))
    for e in order[:rest]:
        counts[e] += 1
    return counts


def grouped_points(dtype):
    pts = []
    for label, n, k, experts in GROUPED_SHAPES:
        for e in experts:
            for slots in GROUPED_SLOTS:
                for routing, skew in (("balanced", 0.0), ("skewed", SKEW)):
                    if dtype == "fp8" and routing == "skewed":
                        continue
                    pts.append(dict(dtype=dtype, experts=e, tokens=slots, n=n, k=k, routing=routing,
                                    skew=skew, used_by=label))
    return sorted(pts, key=lambda p: _shuffle_key((p["used_by"], p["experts"], p["tokens"], p["routing"])))


# Dense grid for a second grouped-GEMM run: every power-of-two expert count up to 128 (capped at
# the model's own expert count: Mixtral has 8) x token-slots 16 .. 65,536 at two points per octave,
# both dtypes, balanced and skewed routing. It samples the per-expert row counts (tokens / experts)
# where the grouped kernels change tile regime, which the first grid's powers of four skipped.
GRID_EXPERTS = (1, 2, 4, 8, 16, 32, 64, 128)
GRID_SLOTS = tuple(int(round(16 * 2 ** (i / 2))) for i in range(25))     # 16, 23, 32, 45, ..., 65536
GRID_MAX_EXPERTS = {"nemotron3-nano": 128, "nemotron3-super": 512, "mixtral-8x7b": 8}


def grouped_shape_key(p):
    """The fields that identify a grouped-GEMM point (its measurement aside)."""
    return (p["dtype"], p["experts"], p["tokens"], p["n"], p["k"], p["routing"])


def grouped_grid_points(exclude=()):
    """The dense grid, fp8 first (the dtype whose slow tile regime the first grid under-sampled),
    each dtype in a deterministic shuffled order; shapes in `exclude` (grouped_shape_key) skipped.
    Skewed routing over one expert is the balanced point, so it is left out."""
    exclude = set(exclude)
    out = []
    for dtype in ("fp8", "bf16"):
        pts = []
        for label, n, k, _ in GROUPED_SHAPES:
            cap = GRID_MAX_EXPERTS[label.split("/")[0]]
            for e in GRID_EXPERTS:
                if e > cap:
                    continue
                for slots in GRID_SLOTS:
                    for routing, skew in (("balanced", 0.0), ("skewed", SKEW)):
                        if routing == "skewed" and e == 1:
                            continue
                        p = dict(dtype=dtype, experts=e, tokens=slots, n=n, k=k, routing=routing, skew=skew, used_by=label)
                        if grouped_shape_key(p) not in exclude:
                            pts.append(p)
        out += sorted(pts, key=lambda p: _shuffle_key((p["used_by"], p["experts"], p["tokens"], p["routing"], "grid")))
    return out


def attention_heads():
    """Distinct (heads, kv_heads) per GPU over the shipped models and TP 1..8 (head_dim 128)."""
    hk = {}
    for name, m in MODELS.items():
        for tp in TPS:
            hk.setdefault((m["heads"] // tp, max(1, m["kv"] // tp)), f"{name}/tp{tp}")
    return hk


def prefill_points():
    pts = []
    for (h, kv), user in attention_heads().items():
        for seq in (128, 512, 1024, 2048, 4096, 8192, 16384, 32768):
            for batch in (1, 4, 16):
                if batch * seq <= 32768 or (batch == 1) or (batch == 4 and seq <= 16384 and h <= 16):
                    pts.append(dict(batch=batch, seq=seq, heads=h, kv_heads=kv, head_dim=128, used_by=user))
    return sorted(pts, key=lambda p: _shuffle_key((p["heads"], p["kv_heads"])) + f"{p['seq']:06d}{p['batch']:03d}")


KV_CAP_BYTES = 24e9


def decode_points():
    pts = []
    for (h, kv), user in attention_heads().items():
        for batch in (1, 4, 16, 64, 256, 512):
            for ctx in (1024, 4096, 16384, 65536, 131072):
                if 2 * batch * ctx * kv * 128 * 2 <= KV_CAP_BYTES:
                    pts.append(dict(batch=batch, context=ctx, heads=h, kv_heads=kv, head_dim=128, used_by=user))
    return sorted(pts, key=lambda p: _shuffle_key((p["heads"], p["kv_heads"])) + f"{p['batch']:04d}{p['context']:07d}")


def mamba_conv_channels():
    """conv_dim = d_inner + 2 * groups * d_state, per GPU at TP 1..8."""
    ch = {}
    for name, m in MODELS.items():
        if m.get("m_heads"):
            d_inner = m["m_heads"] * m["m_hd"]
            for tp in TPS:
                ch.setdefault(d_inner // tp + 2 * max(1, m["groups"] // tp) * m["d_state"], f"{name}/tp{tp}")
    return ch


def conv1d_points():
    pts = []
    chans = sorted(mamba_conv_channels().items())
    for c, user in chans[::2] + chans[1::2][-3:]:
        for batch, seqlen in ((1, 128), (1, 512), (1, 2048), (1, 8192), (1, 32768), (8, 2048), (8, 8192)):
            pts.append(dict(mode="prefill", batch=batch, tokens=batch * seqlen, channels=c, kernel=4, used_by=user))
        for batch in (1, 4, 16, 64, 256, 1024):
            pts.append(dict(mode="decode", batch=batch, tokens=batch, channels=c, kernel=4, used_by=user))
    return pts


ELEM_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)


def elementwise_points():
    """(op, hidden) combinations; bytes = minimal HBM traffic (inputs read + outputs written)."""
    combos = []
    for h in (2688, 4096, 8192):
        combos += [("rmsnorm", h, {}), ("residual_add", h, {})]
    for i in (28672, 14336, 7168, 3584):            # Llama / Mixtral SwiGLU inter per GPU
        combos.append(("silu_mul", i, {}))
    for i in (3712, 10752, 21504, 32768):           # ReLU^2 MLPs / shared experts per GPU
        combos.append(("relu2", i, {}))
    for d_inner, gsize in ((4096, 512), (8192, 1024), (16384, 2048), (2048, 1024), (4096, 2048)):
        combos.append(("gated_rmsnorm", d_inner, {"group_size": gsize}))
    for nh in (256, 128, 64, 32):
        combos.append(("softplus_dt", nh, {}))
    pts = []
    for op, h, extra in combos:
        for t in ELEM_TOKENS:
            if t * h > 2 ** 30:
                continue
            per_elem = {"rmsnorm": 4, "residual_add": 6, "silu_mul": 6, "relu2": 4,
                        "gated_rmsnorm": 6, "softplus_dt": 4}[op]
            pts.append(dict(op=op, bytes=per_elem * t * h, tokens=t, hidden=h, **extra))
    return pts


def copy_points():
    return [dict(bytes=2 ** e) for e in range(10, 33)]   # 1 KiB .. 4 GiB


NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
NCCL_BYTES = tuple(2 ** e for e in range(10, 31))        # 1 KiB .. 1 GiB


def family_points():
    return {
        "copy": copy_points(),
        "elementwise": elementwise_points(),
        "conv1d": conv1d_points(),
        "attention_decode": decode_points(),
        "attention_prefill": prefill_points(),
        "grouped_gemm": grouped_points("bf16") + grouped_points("fp8"),
        "gemm_bf16": list(gemm_points("bf16")),
        "gemm_fp8": list(gemm_points("fp8")),
    }


# Crude cost of timing one point (both benches), used only to plan budgets in --dry-run:
# about 25 kernel executions of the roofline time plus ~60 ms of fixed overhead.
PEAK_FLOPS = {"bf16": 700e12, "fp8": 1200e12}
BW = 4.0e12


def est_kernel_s(family, p):
    if family.startswith("gemm"):
        return max(2 * p["m"] * p["n"] * p["k"] / PEAK_FLOPS[p["dtype"]],
                   (p["m"] * p["k"] + p["n"] * p["k"] + p["m"] * p["n"]) * 2 / BW)
    if family == "grouped_gemm":
        return max(2 * p["tokens"] * p["n"] * p["k"] / PEAK_FLOPS[p["dtype"]] * 1.3,
                   p["experts"] * p["n"] * p["k"] * 2 / BW)
    if family == "attention_prefill":
        return 2 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"] / 350e12
    if family == "attention_decode":
        return 4 * p["batch"] * p["context"] * p["kv_heads"] * p["head_dim"] / BW
    if family == "conv1d":
        return 4 * p["batch"] * p["tokens"] * p["channels"] / BW
    if family in ("elementwise", "copy"):
        return p["bytes"] * (2 if family == "copy" else 1) / BW
    return 0.0


def est_point_s(family, p):
    return 25 * est_kernel_s(family, p) + 0.06
