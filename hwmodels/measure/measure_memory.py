#!/usr/bin/python3
"""GPU memory as vLLM's budget sees it, on one GPU.

vLLM sizes its KV cache from torch.cuda.mem_get_info(): requested = total x gpu_memory_utilization,
where total is the driver's usable memory (less than the datasheet's HBM), and the CUDA context is
already allocated when it takes that first snapshot. This script records, in a fresh process:

- nvidia-smi's memory.total and the driver/GPU names;
- torch.cuda.mem_get_info() (free, total) right after CUDA initialises: total is what vLLM
  multiplies by gpu_memory_utilization, total - free the CUDA context (and anything else resident);
- the non-torch memory a first cuBLAS GEMM adds (its workspace), which vLLM's profile run counts
  against the budget as non-torch growth;
- the memory one CUDA-graph capture of a small decoder-layer-like forward pins beyond PyTorch's
  tensors (the graph's private pool), for a sense of the per-graph cost.

    python3 measure_memory.py --out OUT      # writes OUT/memory.json
"""
import argparse
import datetime
import json
import os
import subprocess

import torch


def smi(query):
    try:
        return subprocess.check_output(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                                       text=True).strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    torch.cuda.init()
    torch.cuda.synchronize()
    free0, total = torch.cuda.mem_get_info()

    # cuBLAS workspace: non-torch growth of a first bf16 GEMM.
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info()
    reserved1 = torch.cuda.memory_reserved()
    y = x @ x
    torch.cuda.synchronize()
    free2, _ = torch.cuda.mem_get_info()
    reserved2 = torch.cuda.memory_reserved()
    cublas = (free1 - free2) - (reserved2 - reserved1)
    del y

    # One CUDA graph of a small layer-like forward (norm, two GEMMs, activation), batch 256.
    h, ff, b = 4096, 14336, 256
    w1 = torch.randn(h, ff, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(ff, h, device="cuda", dtype=torch.bfloat16)
    inp = torch.randn(b, h, device="cuda", dtype=torch.bfloat16)

    def layer(t):
        t = torch.nn.functional.rms_norm(t, (h,))
        return torch.nn.functional.silu(t @ w1) @ w2 + t

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            layer(inp)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    free3, _ = torch.cuda.mem_get_info()
    reserved3 = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = layer(inp)
    g.replay()
    torch.cuda.synchronize()
    free4, _ = torch.cuda.mem_get_info()
    reserved4 = torch.cuda.memory_reserved()

    gib = float(1 << 30)
    rec = {
        "gpu": torch.cuda.get_device_name(0),
        "driver": smi("driver_version"),
        "nvidia_smi_memory_total_mib": smi("memory.total"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "mem_get_info_total_bytes": total,
        "mem_get_info_total_gib": total / gib,
        "context_and_resident_bytes": total - free0,
        "cublas_first_gemm_non_torch_bytes": cublas,
        "graph_capture_device_bytes": free3 - free4,
        "graph_capture_torch_reserved_bytes": reserved4 - reserved3,
        "graph_shape": {"batch": b, "hidden": h, "ffn": ff, "ops": "rms_norm, gemm, silu, gemm, add"},
        "method": "fresh process; torch.cuda.mem_get_info() after torch.cuda.init(); differences of free memory "
                  "around each step, torch's own reservations (memory_reserved) separated from non-torch growth",
    }
    del out
    with open(os.path.join(a.out, "memory.json"), "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
