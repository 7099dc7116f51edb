#!/usr/bin/env python3
"""Convert the H200 timings of the production Mamba-2 Triton kernels into the
calibration format (hwmodels/calibration/h200/mamba_scan.json, mamba_step.json).

Usage: convert_mamba_triton.py SOURCE.json OUT_DIR

SOURCE holds {"about", "env", "scan": [...], "step": [...]}; every figure is kept
(ms, ms_eager, shape, the model/tp it came from, state_GBps_rw for the step)."""
import json
import sys

from calib_io import write_family

ORIGIN = ("Production Mamba-2 Triton kernels of state-spaces/mamba (ops/triton at commit e9594ce), "
          "timed on one NVIDIA H200 with PyTorch 2.11.0+cu130 and Triton 3.6 on 2026-11-30. ")
METHOD = ("'ms' is GPU time, median of CUDA-graph replay (triton.testing.do_bench_cudagraph); "
          "'ms_eager' is the same call launched eagerly from Python (triton.testing.do_bench, median), "
          "which adds CPU launch overhead. Random bf16 inputs. heads/groups are per GPU after tensor "
          "parallelism (model and tp name the mixer shape they come from). Driver, NCCL version and "
          "L2 handling were not recorded with the source timings.")
WHAT = {
    "mamba_scan": "mamba_chunk_scan_combined (chunked SSD scan, prefill): chunk size 128, with D, dt_bias, "
                  "softplus on dt, final states returned. ",
    "mamba_step": "selective_state_update (single-token decode state update) with a float32 SSM state; "
                  "state_GBps_rw = state bytes read + written / ms. ",
}
SHAPE_KEYS = ["batch", "seqlen", "heads", "head_dim", "d_state", "groups", "model", "tp"]


def convert(src, out_dir):
    data = json.load(open(src))
    torch_v = data.get("env", {}).get("torch", "2.11.0+cu130")
    env = {"gpu": data.get("env", {}).get("gpu", "NVIDIA H200"), "driver": None,
           "cuda": torch_v.split("+cu")[1][:2] + "." + torch_v.split("+cu")[1][2:] if "+cu" in torch_v else None,
           "torch": torch_v, "triton": "3.6", "nccl": None, "date": "2026-11-30",
           "kernels": data.get("env", {}).get("kernels", "state-spaces/mamba e9594ce ops/triton")}
    counts = {}
    for key, family in (("scan", "mamba_scan"), ("step", "mamba_step")):
        points = []
        for p in data[key]:
            q = {k: p[k] for k in SHAPE_KEYS if k in p}
            q["ms"] = p["ms"]
            q["ms_eager"] = p["ms_eager"]
            for k, v in p.items():          # keep every other figure too
                if k not in q:
                    q[k] = v
            points.append(q)
        write_family(f"{out_dir}/{family}.json", family, WHAT[family] + ORIGIN + METHOD, env, points)
        counts[family] = len(points)
    return counts


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(convert(sys.argv[1], sys.argv[2]))
