#!/usr/bin/python3
"""Reduce AIConfigurator's measured tables of other engine releases (vLLM 0.14 / 0.18 / 0.19 / 0.22,
SGLang 0.5.14, TensorRT-LLM 1.3.0rc20 / rc23) to servesim calibration files, with reduce_aic.py's
grid subsets and point layout.

Input: DIR/<system>/<engine>-<version>/<family>_<table>.csv[.gz] with <family>_collection_meta.yaml
beside each family (the collection metadata as AIC ships it).
Output: hwmodels/calibration/<gpu>/<engine>-<version>/<family>.json, one folder per measured release;
the kernel model discovers the folders from the embedded files (hwmodels/aic/README.md).

Reduced: gemm, attention (prefill, decode), moe, gdn + conv1d, custom_all_reduce; for TensorRT-LLM
and SGLang releases also the MLA decode kernel (mla_generation_mla_perf), as attention_decode rows of the shape the
step model asks for an absorbed MLA decode (reduce_mla_decode). Not reduced: the other MLA tables
(context, BMM, module: MLA layers are timed from GEMM and attention), the Mamba-2 module table,
SGLang 0.5.16's DeepSeek-V4 MegaMoE module table.

    /usr/bin/python3 hwmodels/aic/reduce_releases.py --aic DIR [--out hwmodels/calibration]
"""
import argparse
import json
import os
import re
import sys

import yaml

import reduce_aic as base

ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
FAMILIES = {  # AIC family folder -> (reducer, the table stems it needs)
    "gemm": (base.reduce_gemm, ["gemm_gemm_perf"]),
    "attention": (base.reduce_attention, ["attention_context_attention_perf", "attention_generation_attention_perf"]),
    "moe": (base.reduce_moe, ["moe_moe_perf"]),
    "linear_attention": (base.reduce_gdn, ["linear_attention_gdn_perf"]),
    "comm": (lambda src, out: [base.reduce_comm_custom(src, out)], ["comm_custom_allreduce_perf"]),
}


# Engines whose MLA decode rows join their attention_decode table. TensorRT-LLM never runs an MLA
# model through the attention op its generation_attention table times (its MLA layers call their own
# MLA generation kernel), and that op's rows stop at 64 query heads per KV head, where they run
# several-fold slower than at 32 (H200, 16 x 1,024 tokens, head size 256: 0.173 ms at 64 heads, 0.026
# at 32). SGLang runs an MLA model's decode through its MLA backends too (trtllm_mla on SM100/SM103,
# the FA3 MLA kernel on Hopper: AIC's SGLang 0.5.14 mla_generation rows, kernel_source trtllm_mla /
# flash_attention), not through the MHA kernels its generation_attention table times (trtllm_mha on
# Blackwell, 6.3x the HBM bound for DeepSeek-R1 NVFP4 TP4 at 128 x 5,000 tokens on the B200).
MLA_ENGINES = {"trtllm", "sglang"}
MLA_LATENT, MLA_ROPE = 512, 64  # kv_lora_rank and rope width of every MLA row (DeepSeek-V3 / Kimi-K2 layers)


def reduce_mla_decode(src, out, path):
    """Appends the release's MLA decode rows (mla_generation_mla_perf: absorbed MLA over the cached
    latent, TP-local heads) to the attention_decode table at `path`, as the step model queries them
    (models/step_cost.cpp): `heads` query heads over one KV head of (kv_lora_rank + rope) / 2 = 288,
    the same KV bytes per token as the 576-wide latent; context = step + 1; batch and context on the
    attention grid. Kernel "mla_generation" (rows of another kernel are never interpolated with the
    attention op's)."""
    df, _ = src.read("mla_generation_mla_perf")
    if df is None or not path:
        return 0
    d = df[df.batch_size.isin(base.GEN_BATCH) & (df.step + 1).isin(base.GEN_CTX) & (df.mla_dtype == "bfloat16")]
    with open(path) as f:
        doc = json.load(f)
    kernel = "mla_generation"
    doc["kernels"].append(kernel)
    kid = len(doc["kernels"]) - 1
    dim = (MLA_LATENT + MLA_ROPE + 1) // 2
    doc["points"] += [[int(r.batch_size), int(r.step) + 1, int(r.num_heads), 1, dim,
                       "fp8" if r.kv_cache_dtype == "fp8" else "bf16", 0, base.sig(r.latency), kid] for r in d.itertuples()]
    doc["about"] += (f" Plus {len(d)} of {len(df)} MLA decode rows (mla_generation_mla_perf, kernel {kernel}): heads = the "
                     f"TP-local query heads over one KV head of ({MLA_LATENT} + {MLA_ROPE}) / 2 = {dim}, the latent's bytes "
                     "per token, as the step model asks for an absorbed MLA decode.")
    doc["env"]["mla_generation"] = src.env(df, src.table("mla", "generation_mla_perf"))
    base.write(out, "attention_decode", doc)
    return len(d)


def collection_meta(path):
    """The collection_meta.yaml of one family: runtime, image, and per table collector, date, status, notes."""
    if not os.path.exists(path):
        return None
    text = open(path).read()
    doc = yaml.safe_load(text) or {}
    out = {k: v for k, v in doc.items() if k not in ("tables",) and not isinstance(v, dict)}
    out.update({"runtime": doc.get("runtime", {})})
    tables = {}
    for name, t in (doc.get("tables") or {}).items():
        tables[name] = {k: (str(v) if not isinstance(v, (int, float, bool)) else v) for k, v in (t or {}).items()}
    out["tables"] = tables
    notes = [ln.strip()[1:].strip() for ln in text.splitlines()
             if ln.strip().startswith("#") and "SPDX" not in ln]
    if notes:
        out["notes"] = " ".join(notes)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aic", required=True, help="folder with <system>/<engine>-<version>/<family>_<table>.csv[.gz]")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "calibration"))
    ap.add_argument("--systems", default=",".join(base.SYSTEMS))
    a = ap.parse_args()
    total = 0
    for system in a.systems.split(","):
        if system not in base.SYSTEMS:
            sys.exit(f"reduce_releases: --systems: unknown system {system!r} (known: {', '.join(base.SYSTEMS)})")
        sdir = os.path.join(a.aic, system)
        for folder in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
            m = re.fullmatch(r"(vllm|sglang|trtllm)-(\d[\w.]*)", folder)
            if not m:
                continue
            engine, version = m.groups()
            if engine == "vllm" and version == "0.24.0":
                continue  # reduce_aic.py's tables (hwmodels/calibration/<gpu>/vllm/)
            meta = {fam: collection_meta(os.path.join(sdir, folder, f"{fam}_collection_meta.yaml"))
                    for fam in list(FAMILIES) + (["mla"] if engine in MLA_ENGINES else [])}
            src = base.Source(a.aic, system, folder, label=f"{ENGINES[engine]} {version}",
                              runtime=f"{ENGINES[engine]} {version}", backend=f"{engine}/{version}",
                              meta={k: v for k, v in meta.items() if v})
            out = os.path.join(a.out, base.SYSTEMS[system].lower(), folder)
            written = []
            for fam, (reduce, stems) in FAMILIES.items():
                if all(src.read(s)[0] is not None for s in stems):
                    r = reduce(src, out)
                    r = r if isinstance(r, list) else [r]
                    if fam == "attention" and engine in MLA_ENGINES:
                        r = [(p, n + reduce_mla_decode(src, out, p)) if p and p.endswith("attention_decode.json") else (p, n)
                             for p, n in r]
                    written += r
            for path, n in [w for w in written if w[0]]:
                size = os.path.getsize(path)
                total += size
                if size >= 2 << 20:
                    sys.exit(f"reduce_releases: {path}: {size} bytes, over the 2 MB a file may take")
                print(f"{path}: {n} points, {size} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
