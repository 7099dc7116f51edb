#!/usr/bin/python3
"""Reduce NVIDIA AIConfigurator's measured vLLM 0.24 kernel tables to servesim calibration files.

Input: a folder of the AIC tables as CSV (one sub-folder per system: h100_sxm, h200_sxm, b200_sxm,
b300_sxm, gb200, gb300; files <family>_<table>.csv[.gz], every column as AIC stores it).
Output: hwmodels/calibration/<gpu>/vllm/<family>.json, in the calibration layout the C++ loader
reads (hwmodels/calibration.hpp): {"family", "method", "about", "env", "kernels", "columns", "points"}.

The raw tables (about 1.9M rows, 36 MB) stay out of the repository; this keeps a grid subset of
each (documented per family in "about"), enough to fit and to cross-validate every family, and
rounds latencies to 4 significant digits. Nothing is modelled or interpolated here.

    /usr/bin/python3 hwmodels/aic/reduce_aic.py --aic DIR [--out hwmodels/calibration]
"""
import argparse
import datetime
import json
import os
import sys

import pandas as pd

AIC_REPO = "https://github.com/ai-dynamo/aiconfigurator"
AIC_COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
AIC_DATE = "2026-08-21"
SYSTEMS = {"h100_sxm": "H100", "h200_sxm": "H200", "b200_sxm": "B200", "b300_sxm": "B300", "gb200": "GB200",
           "gb300": "GB300"}

POW2 = [1 << i for i in range(0, 21)]
# GEMM grid kept: every power-of-two m, and the (n, k) below (a third of the measured widths,
# spanning 256 .. 65,536 and the common model widths 3072/6144/12288).
GEMM_M = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}
GEMM_NK = {256, 1024, 2048, 4096, 6144, 8192, 16384, 65536}
DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}
# Attention grid kept: query/KV head pairs of GQA models at TP 1..8 and the MHA rows.
ATTN_HEADS = {(64, 8), (64, 1), (32, 4), (32, 1), (16, 2), (16, 1), (8, 1), (4, 1), (2, 1), (1, 1), (48, 48), (12, 12)}
GEN_BATCH = {1, 4, 16, 64, 256, 1024}
GEN_CTX = {2, 8, 32, 128, 512, 1024, 2048, 4096, 8192, 32768, 131072}  # step + 1
CTX_ISL = {1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
ENC_HEADS = {1, 2, 4, 8, 16, 32}
# Sliding-window rows kept for one head pair per head_dim (the window's effect, not every shape).
WINDOW_HEADS = {(32, 4), (16, 2)}
MOE_TOKENS = {1, 4, 16, 64, 256, 1024, 2048, 4096, 8192, 16384}
MOE_PAR = {(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (1, 4), (1, 8), (1, 16), (1, 64)}
MOE_DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4", "int4_wo": "int4_wo",
             "w4a16_mxfp4": "mxfp4_w4a16", "w4a8_mxfp4_mxfp8": "mxfp4_w4a8"}
MOE_DIST = {"balanced", "power_law_1.2"}
# Routed experts without a gate projection (Nemotron's ReLU^2 MLPs): (hidden, inter, topk, experts).
NON_GATED = {(2688, 1856, 6, 128), (2048, 5120, 22, 512), (1024, 2688, 22, 512), (4096, 2688, 22, 512)}
# MoE kernels whose timings are not used, with the reason (written into the file's provenance and
# shown by `servesim calibrate report`; hwmodels/README.md, MoE kernels, has the evidence).
MOE_REJECTED = {
    "h100_sxm": {'vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts':
                 'rejected: these ModelOpt per-tensor FP8 rows (FlashInfer CUTLASS on SM90) take a median 2.2x the time of the BF16 Triton MoE at the same shapes, which streams twice the weight bytes, 3.7x the Triton FP8 128-block MoE and 2.9x FlashInfer CUTLASS itself with 128-block scales, and are nearly flat in tokens; on B200 the same ModelOpt FP8 rows take 0.6-0.8x the BF16 time, as the bytes say. servesim times per-tensor FP8 MoE on Hopper with the FP8 Triton (EP 1) and FlashInfer CUTLASS block (EP > 1) rows instead, which predict the Hopper MoE serving rows (hwmodels/README.md, MoE kernels).'},
    "h200_sxm": {'vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts':
                 'rejected: these ModelOpt per-tensor FP8 rows (FlashInfer CUTLASS on SM90) take a median 2.5x the time of the BF16 Triton MoE at the same shapes, which streams twice the weight bytes, 4.2x the Triton FP8 128-block MoE and 3.3x FlashInfer CUTLASS itself with 128-block scales, and are nearly flat in tokens (hidden 3072, inter 1024, top-8 of 256, 64 tokens: 3.71 ms = 0.65 TB/s of the 4.8 TB/s HBM, Triton FP8 0.61 ms); on B200 the same ModelOpt FP8 rows take 0.6-0.8x the BF16 time, as the bytes say. servesim times per-tensor FP8 MoE on Hopper with the FP8 Triton (EP 1) and FlashInfer CUTLASS block (EP > 1) rows instead, which predict the Hopper MoE serving rows (hwmodels/README.md, MoE kernels).'},
}
SKEW = {"balanced": 0.0, "power_law_1.01": 1.01, "power_law_1.2": 1.2}


def sig(x, n=4):
    return float(f"{x:.{n}g}")


class Source:
    """Where one release's tables sit and how its files name it. The vLLM 0.24 tables: DIR/<system>/;
    another release (reduce_releases.py): DIR/<system>/<engine>-<version>/ with its collection_meta."""

    def __init__(self, aic, system, folder="", label="vLLM 0.24", runtime="vLLM 0.24.0", backend="vllm/0.24.0",
                 meta=None):
        self.dir = os.path.join(aic, system, folder)
        self.system, self.label, self.runtime, self.backend, self.meta = system, label, runtime, backend, meta or {}
        self.vllm = backend.startswith("vllm/")

    def read(self, stem):
        for ext in (".csv.gz", ".csv"):
            p = os.path.join(self.dir, stem + ext)
            if os.path.exists(p):
                return pd.read_csv(p), os.path.basename(p)
        return None, None

    def table(self, family, name):
        return f"{family}/{self.backend}/{name}.parquet"

    def env(self, df, table, runtime=None):
        dev = str(df["device"].iloc[0])
        versions = sorted(str(v) for v in df["version"].unique())
        e = {"gpu": dev, "runtime": runtime or self.runtime, "versions": versions,
             "source": f"{AIC_REPO} @ {AIC_COMMIT[:12]} ({AIC_DATE}), aic-core/src/aiconfigurator_core/systems/data/"
                       f"{self.system}/{table}",
             "date": AIC_DATE, "reduced": datetime.date.today().isoformat(),
             "rows_in_table": int(len(df))}
        if table.split("/")[0] in self.meta:
            e["collection"] = self.meta[table.split("/")[0]]
        return e


def kernels_index(series):
    names = sorted(series.unique())
    return names, {k: i for i, k in enumerate(names)}


def write(out_dir, name, doc):
    if not doc["points"]:  # a table with none of the kept rows (vLLM 0.19 GDN: conv1d rows only)
        return None, 0
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".json")
    with open(path, "w") as f:
        # One point per line keeps the files diffable and small.
        pts = doc.pop("points")
        f.write(json.dumps(doc, indent=1)[:-2] + ',\n "points": [\n')
        f.write(",\n".join(json.dumps(p, separators=(",", ":")) for p in pts))
        f.write("\n ]\n}\n")
    return path, len(pts)


def block_fp8_rejected(d):
    """The block-FP8 GEMM kernel(s), rejected with the reason: the collector timed these rows eagerly,
    so a small-m row measures the CPU launch path, not the kernel; servesim times block-FP8 GEMMs on
    the CUDA-graph per-tensor FP8 rows with the block format's bytes (kernel_model.cpp). Figures from
    the kept rows: small m (<= 64) and large m (>= 2048, per-tensor FP8 over 50 us) against the
    per-tensor FP8 row of the same shape."""
    if not {"fp8", "fp8_block"} <= set(d.gemm_dtype):
        return {}
    pv = d[d.gemm_dtype.isin(["fp8", "fp8_block"])].pivot_table(index=["m", "n", "k"], columns="gemm_dtype",
                                                                 values="latency").dropna()
    m = pv.index.get_level_values("m")
    small, big = pv[m <= 64], pv[(m >= 2048) & (pv.fp8 > 0.05)]
    ratio = big.fp8_block / big.fp8
    reason = (f"rejected: timed eagerly with one weight copy (the collector's choice), so at small m these rows "
              f"measure the CPU launch path: m <= 64 takes a median {small.fp8_block.median():.3f} ms "
              f"(p10-p90 {small.fp8_block.quantile(0.1):.3f}-{small.fp8_block.quantile(0.9):.3f}) where the "
              f"CUDA-graph per-tensor FP8 GEMM of the same shape takes {small.fp8.median():.4f} ms; at m >= 2048 "
              f"they take a median {ratio.median():.2f}x the per-tensor FP8 time. servesim times block-FP8 "
              f"GEMMs on the CUDA-graph per-tensor FP8 rows with the block format's bytes (hwmodels/README.md, "
              f"Held-out error).")
    # Only kernels that timed nothing but fp8_block rows (vLLM 0.14-0.22 name every dtype's kernel
    # "vllm_default": nothing is marked there, and the kernel model times fp8_block on the fp8 rows anyway).
    others = set(d[d.gemm_dtype != "fp8_block"].kernel_source)
    return {k: reason for k in sorted(d[d.gemm_dtype == "fp8_block"].kernel_source.unique()) if k not in others}


def reduce_gemm(src, out):
    df, fn = src.read("gemm_gemm_perf")
    d = df[df.m.isin(GEMM_M) & df.n.isin(GEMM_NK) & df.k.isin(GEMM_NK) & df.gemm_dtype.isin(DTYPE)]
    names, idx = kernels_index(d.kernel_source)
    pts = [[DTYPE[r.gemm_dtype], int(r.m), int(r.n), int(r.k), sig(r.latency), idx[r.kernel_source]]
           for r in d.itertuples()]
    return write(out, "gemm", {
        "family": "gemm", "kernels_from": "vllm", "method": "local-linear-log-interp",
        "about": src.label + " dense linear layer (RowParallelLinear, TP off) y[m,n] = x[m,k] W[k,n], ms per call "
                 "including the activation quantisation the layer runs (fp8, fp8_block, nvfp4). CUDA-graph timed, 6 "
                 "weight copies against L2 reuse, except fp8_block: timed eagerly with one copy (small-m points sit "
                 "on a launch floor) and nvfp4: one copy. Kept: m = powers of two, n and k in "
                 + str(sorted(GEMM_NK)) + f"; {len(d)} of {len(df)} rows.",
        "env": src.env(df, src.table("gemm", "gemm_perf")),
        "kernels": names,
        **({"rejected_kernels": rk} if src.vllm and (rk := block_fp8_rejected(d)) else {}),
        "columns": ["dtype", "m", "n", "k", "ms", "kid"], "points": pts})


def reduce_attention(src, out):
    res = []
    for phase, stem in (("prefill", "attention_context_attention_perf"), ("decode", "attention_generation_attention_perf")):
        df, fn = src.read(stem)
        if "window_size" not in df:
            df["window_size"] = 0
        pairs = list(zip(df.num_heads, df.num_key_value_heads))
        keep = pd.Series([p in ATTN_HEADS for p in pairs], index=df.index)
        keep &= (df.window_size == 0) | pd.Series([p in WINDOW_HEADS for p in pairs], index=df.index)
        if phase == "decode":
            keep &= df.batch_size.isin(GEN_BATCH) & (df.step + 1).isin(GEN_CTX)
        else:
            keep &= df.isl.isin(CTX_ISL)
        d = df[keep]
        names, idx = kernels_index(d.kernel_source)
        if phase == "decode":
            pts = [[int(r.batch_size), int(r.step) + 1, int(r.num_heads), int(r.num_key_value_heads), int(r.head_dim),
                    "fp8" if r.kv_cache_dtype == "fp8" else "bf16", int(r.window_size), sig(r.latency),
                    idx[r.kernel_source]] for r in d.itertuples()]
            cols = ["batch", "context", "heads", "kv_heads", "head_dim", "kv_dtype", "window", "ms", "kid"]
        else:
            pts = [[int(r.batch_size), int(r.isl), int(r.num_heads), int(r.num_key_value_heads), int(r.head_dim),
                    "fp8" if r.kv_cache_dtype == "fp8" else "bf16", int(r.window_size), sig(r.latency),
                    idx[r.kernel_source]] for r in d.itertuples()]
            cols = ["batch", "seq", "heads", "kv_heads", "head_dim", "kv_dtype", "window", "ms", "kid"]
        table = "context_attention_perf" if phase == "prefill" else "generation_attention_perf"
        res.append(write(out, "attention_" + phase, {
            "family": "attention_" + phase, "kernels_from": "vllm", "method": "local-linear-log-interp",
            "about": src.label + f" attention backend call for one layer ({'prefill: causal, no prefix cached' if phase == 'prefill' else 'decode: one query token per sequence, context = KV tokens incl. the new one'}), "
                     "paged KV cache (block 64), bf16 activations, KV cache bf16 or fp8, window 0 = full attention; "
                     "ms per call for the whole batch, CUDA-graph timed. Heads are TP-local. Kept: head pairs "
                     + str(sorted(ATTN_HEADS)) + (f", batch {sorted(GEN_BATCH)}, context {sorted(GEN_CTX)}" if phase == "decode" else f", seq {sorted(CTX_ISL)}")
                     + f"; {len(d)} of {len(df)} rows.",
            "env": src.env(df, src.table("attention", table)),
            "kernels": names, "columns": cols, "points": pts}))
    return res


def reduce_encoder(src, out):
    df, fn = src.read("encoder_attention_encoder_attention_perf")
    # Every measured patch count (the kernel's cost steps with its tile count, so a sparse grid
    # misses the steps) for the TP-local head counts of 16-head ViTs at TP 1..16 and of 32 heads.
    d = df[df.num_heads.isin(ENC_HEADS)]
    names, idx = kernels_index(d.kernel_source)
    pts = [[int(r.batch_size), int(r.isl), int(r.num_heads), int(r.head_dim), sig(r.latency), idx[r.kernel_source]]
           for r in d.itertuples()]
    return write(out, "encoder_attention", {
        "family": "encoder_attention", "kernels_from": "vllm", "method": "local-linear-log-interp",
        "about": src.label + " ViT encoder attention (vit_flash_attn_wrapper): bidirectional (non-causal), MHA, bf16; "
                 f"ms per call, CUDA-graph timed. Kept: every patch count, heads {sorted(ENC_HEADS)}; {len(d)} of {len(df)} rows.",
        "env": src.env(df, src.table("encoder_attention", "encoder_attention_perf")),
        "kernels": names, "columns": ["batch", "seq", "heads", "head_dim", "ms", "kid"], "points": pts})


def reduce_moe(src, out):
    df, fn = src.read("moe_moe_perf")
    par = pd.Series([p in MOE_PAR for p in zip(df.moe_tp_size, df.moe_ep_size)], index=df.index)
    d = df[df.num_tokens.isin(MOE_TOKENS) & par & df.distribution.isin(MOE_DIST) & df.moe_dtype.isin(MOE_DTYPE)]
    names, idx = kernels_index(d.kernel_source)
    pts = []
    for r in d.itertuples():
        nongated = (r.hidden_size, r.inter_size, r.topk, r.num_experts) in NON_GATED or "nongated" in r.kernel_source
        gated = 0 if nongated else 1
        pts.append([MOE_DTYPE[r.moe_dtype], int(r.num_tokens), int(r.hidden_size), int(r.inter_size), int(r.topk),
                    int(r.num_experts), int(r.moe_tp_size), int(r.moe_ep_size), SKEW[r.distribution], gated,
                    sig(r.latency), idx[r.kernel_source]])
    return write(out, "moe", {
        "family": "moe", "kernels_from": "vllm", "method": "local-linear-series-log-interp",
        "about": src.label + " FusedMoE layer forward on one GPU as rank 0 of its TP or EP group (routing, expert GEMMs, "
                 "activation, weighted sum; no communication). tokens = tokens entering the layer on this rank; "
                 "hidden, inter (per expert), experts global; skew 0 = balanced routing, 1.01 / 1.2 = power-law "
                 "expert loads with rank 0 the heaviest; gated 0 = ReLU^2 experts without a gate projection "
                 "(Nemotron shapes), 1 = SwiGLU. ms per call, CUDA-graph timed. Kept: token counts "
                 + str(sorted(MOE_TOKENS)) + ", (tp, ep) " + str(sorted(MOE_PAR)) + ", routing balanced and power_law_1.2" + f"; {len(d)} of {len(df)} rows.",
        "env": src.env(df, src.table("moe", "moe_perf")),
        "kernels": names,
        **({"rejected_kernels": MOE_REJECTED[src.system]} if src.system in MOE_REJECTED else {}),
        "columns": ["dtype", "tokens", "hidden", "inter", "topk", "experts", "tp", "ep", "skew", "gated", "ms", "kid"],
        "points": pts})


def reduce_gdn(src, out):
    df, fn = src.read("linear_attention_gdn_perf")
    key = ["phase", "batch_size", "seq_len", "d_model", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"]
    conv = df[df.kernel_source.str.startswith("causal_conv1d")]
    core = df[~df.kernel_source.str.startswith("causal_conv1d")]
    # Keep powers of 4 in batch and sequence length (prefill) to stay compact.
    keep_b = {1, 4, 16, 64, 256, 1024}
    keep_s = {1, 16, 256, 1024, 4096, 16384}
    core = core[core.batch_size.isin(keep_b) & core.seq_len.isin(keep_s)]
    conv = conv[conv.batch_size.isin(keep_b) & conv.seq_len.isin(keep_s)]
    names, idx = kernels_index(core.kernel_source)
    pts = [[r.phase, int(r.batch_size), int(r.seq_len), int(r.num_k_heads), int(r.head_k_dim), int(r.num_v_heads),
            int(r.head_v_dim), sig(r.latency), idx[r.kernel_source]] for r in core.itertuples()]
    # Duplicate shapes from different checkpoints with the same local geometry: keep the first.
    seen, uniq = set(), []
    for p in pts:
        k = tuple(p[:7])
        if k not in seen:
            seen.add(k)
            uniq.append(p)
    a = write(out, "gdn", {
        "family": "gdn", "kernels_from": "vllm", "method": "local-linear-log-interp",
        "about": src.label + " Gated DeltaNet core kernel of one layer (prefill: chunk_gated_delta_rule (FlashInfer); "
                 "decode: fused_recurrent_gated_delta_rule_packed_decode), TP-local heads, without the causal conv1d "
                 "(conv1d.json) and the projections (GEMMs). ms per call, CUDA-graph timed. Kept: batch and "
                 f"sequence lengths at powers of 4; {len(uniq)} of {len(df[~df.kernel_source.str.startswith('causal_conv1d')])} rows.",
        "env": src.env(df, src.table("linear_attention", "gdn_perf")),
        "kernels": names, "columns": ["phase", "batch", "seq", "k_heads", "head_k_dim", "v_heads", "head_v_dim", "ms", "kid"],
        "points": uniq})
    cnames, cidx = kernels_index(conv.kernel_source)
    cpts, seen = [], set()
    for r in conv.itertuples():
        ch = int(r.num_k_heads * r.head_k_dim * 2 + r.num_v_heads * r.head_v_dim)
        mode = "prefill" if r.phase == "context" else "decode"
        tokens = int(r.batch_size * r.seq_len)
        k = (mode, tokens, int(r.batch_size), ch)
        if k in seen:
            continue
        seen.add(k)
        cpts.append([mode, int(r.batch_size), tokens, ch, int(r.d_conv), sig(r.latency), cidx[r.kernel_source]])
    b = write(out, "conv1d", {
        "family": "conv1d", "kernels_from": "vllm", "method": "local-linear-log-interp",
        "about": src.label + " causal depthwise conv1d (causal_conv1d_fn over all tokens of a prefill; causal_conv1d_update "
                 "for one token per sequence in decode), the kernels Mamba-2 and Gated DeltaNet layers share; measured "
                 "inside the GDN tables (channels = 2 x key heads x 128 + value heads x 128). ms per call, CUDA-graph "
                 f"timed; {len(cpts)} of {len(df[df.kernel_source.str.startswith('causal_conv1d')])} rows.",
        "env": src.env(df, src.table("linear_attention", "gdn_perf")),
        "kernels": cnames, "columns": ["mode", "batch", "tokens", "channels", "kernel", "ms", "kid"], "points": cpts})
    return [a, b]


def reduce_comm(src, out):
    nccl, _ = src.read("comm_nccl_perf")
    d = nccl[nccl.nccl_dtype == "half"]
    op = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all"}
    pts = [[op[r.op_name], int(r.num_gpus), int(r.message_size) * 2, sig(r.latency)] for r in d.itertuples()]
    a = write(out, "nccl", {
        "family": "nccl", "kernels_from": "vllm", "method": "local-linear-log-interp",
        "about": "NCCL 2.29.2 collectives from nccl-tests (-w 40 -n 100, 60 above 16 MiB; out-of-place time, averaged "
                 "over ranks), one process driving num_gpus GPUs of one node. bytes = nccl-tests size = message_size "
                 "elements x 2 (fp16 rows; the int8 rows are left out): all_reduce the per-rank buffer, all_gather the "
                 "gathered output, reduce_scatter the input, all_to_all the per-rank send buffer.",
        "env": src.env(nccl, "comm/nccl/2.29.2/nccl_perf.parquet", "NCCL 2.29.2"),
        "columns": ["op", "gpus", "bytes", "ms"], "points": pts})
    return [a, reduce_comm_custom(src, out)]


def reduce_comm_custom(src, out):
    car, _ = src.read("comm_custom_allreduce_perf")
    d = car[car.backend.str.endswith("_graph")] if "backend" in car else car
    pts = [[int(r.num_gpus), int(r.message_size) * 2, sig(r.latency)] for r in d.itertuples()]
    return write(out, "custom_all_reduce", {
        "family": "custom_all_reduce", "kernels_from": "vllm", "method": "local-linear-log-interp",
        "about": src.label + " custom all-reduce (tensor_model_parallel_all_reduce, one-shot below the size switch, "
                 "two-shot above), bf16, CUDA-graph rows (5 all-reduces per replay; the eager rows are left out as "
                 "AIC's loader does). bytes = message_size elements x 2.",
        "env": src.env(car, src.table("comm", "custom_allreduce_perf")),
        "columns": ["gpus", "bytes", "ms"], "points": pts})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aic", required=True, help="folder with <system>/<family>_<table>.csv[.gz]")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "calibration"))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    a = ap.parse_args()
    for system in a.systems.split(","):
        if system not in SYSTEMS:
            sys.exit(f"reduce_aic: --systems: unknown system {system!r} (known: {', '.join(SYSTEMS)})")
        out = os.path.join(a.out, SYSTEMS[system].lower(), "vllm")
        src = Source(a.aic, system)
        written = [reduce_gemm(src, out)]
        written += reduce_attention(src, out)
        written.append(reduce_encoder(src, out))
        written.append(reduce_moe(src, out))
        written += reduce_gdn(src, out)
        written += reduce_comm(src, out)
        for path, n in written:
            if path:
                print(f"{path}: {n} points, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
