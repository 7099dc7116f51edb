#!/usr/bin/env python3
"""Time NCCL collectives between the GPUs of one host and write nccl.json.

    NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 python3 measure_nccl.py --out DIR [--gpus 2]
    python3 measure_nccl.py --dry-run

One process per GPU (torch.multiprocessing), torch.distributed with the NCCL backend, bf16
buffers of random values. 'bytes' follows nccl-tests: the buffer size for all-reduce, the full
output for all-gather, the full input for reduce-scatter, the per-rank send buffer for
all-to-all and send/recv. Per point: 'ms' = a CUDA graph holding `iters` back-to-back calls,
replayed 7 times, CUDA events around each replay, median per call; 'ms_eager' = the same calls
launched eagerly back to back, events around each block of `iters`, median per call. Each figure
is the maximum over ranks. algbw = bytes / time; busbw = algbw x the nccl-tests factor."""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shapes  # noqa: E402
from calib_io import write_family  # noqa: E402

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
              "send_recv": lambda n: 1.0}
REPLAYS = 7


def iters_for(nbytes):
    return 100 if nbytes <= 1 << 20 else 40 if nbytes <= 16 << 20 else 10 if nbytes <= 256 << 20 else 4


def make_op(op, nbytes, rank, world):
    import torch
    import torch.distributed as dist
    n = nbytes // 2
    rnd = lambda m: torch.randn(m, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    if op == "all_reduce":
        x = rnd(n)
        return lambda: dist.all_reduce(x)
    if op == "all_gather":
        x, y = rnd(n // world), rnd(n)
        return lambda: dist.all_gather_into_tensor(y, x)
    if op == "reduce_scatter":
        x, y = rnd(n), rnd(n // world)
        return lambda: dist.reduce_scatter_tensor(y, x)
    if op == "all_to_all":
        x, y = rnd(n), rnd(n)
        return lambda: dist.all_to_all_single(y, x)
    if op == "send_recv":      # ring: send to the next rank, receive from the previous one
        x, y = rnd(n), rnd(n)
        nxt, prv = (rank + 1) % world, (rank - 1) % world

        def fn():
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, y, prv)])
            for r in reqs:
                r.wait()
        return fn
    raise ValueError(op)


def time_eager(fn, iters):
    import torch
    import torch.distributed as dist
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    out = []
    for _ in range(REPLAYS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters):
            fn()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / iters)
    return statistics.median(out)


def time_graph(fn, iters):
    import torch
    import torch.distributed as dist
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(REPLAYS):
        dist.barrier()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / iters)
    del g
    return statistics.median(out)


def worker(rank, world, args):
    import torch
    import torch.distributed as dist
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    t0 = time.time()
    points, notes = [], []
    graph_ok = {op: True for op in shapes.NCCL_OPS}
    for op in args.ops.split(","):
        for nbytes in shapes.NCCL_BYTES:
            if nbytes > args.max_bytes:
                continue
            stop = torch.tensor([float(time.time() - t0 > args.budget)], device="cuda")
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)      # every rank takes the same branch
            if stop.item() > 0:
                notes.append(f"{op} {nbytes} B and larger skipped: time budget spent")
                break
            fn = make_op(op, nbytes, rank, world)
            iters = iters_for(nbytes)
            eager = time_eager(fn, iters)
            graph = None
            if graph_ok[op]:
                try:
                    graph = time_graph(fn, iters)
                except Exception as e:  # noqa: BLE001
                    graph_ok[op] = False
                    torch.cuda.synchronize()
                    if rank == 0:
                        print(f"graph capture failed for {op}: {e}", flush=True)
                    notes.append(f"{op}: CUDA-graph capture failed ({type(e).__name__}: {str(e)[:100]}); "
                                 "'ms' is the eager event time for this op")
            vals = torch.tensor([eager, graph if graph is not None else -1.0], device="cuda", dtype=torch.float64)
            dist.all_reduce(vals, op=dist.ReduceOp.MAX)
            eager, graph = float(vals[0]), float(vals[1])
            ms = graph if graph > 0 else eager
            algbw = nbytes / ms / 1e6
            p = {"op": op, "gpus": world, "bytes": nbytes, "ms": ms, "ms_eager": eager,
                 "algbw_GBps": round(algbw, 3), "busbw_GBps": round(algbw * BUS_FACTOR[op](world), 3), "iters": iters}
            if graph <= 0:
                p["ms_from"] = "eager"
            points.append(p)
            del fn
            if rank == 0:
                print(f"{op:15s} {nbytes:>11d} B  graph {graph * 1e3:9.1f} us  eager {eager * 1e3:9.1f} us  "
                      f"busbw {p['busbw_GBps']:8.1f} GB/s", flush=True)
        torch.cuda.empty_cache()
        if rank == 0:
            write(args, world, points, notes, t0)
    dist.barrier()
    dist.destroy_process_group()


def write(args, world, points, notes, t0):
    import torch
    if True:  # rank 0 only
        env = {"gpu": torch.cuda.get_device_name(0), "driver": nvsmi("driver_version"), "cuda": torch.version.cuda,
               "torch": torch.__version__, "triton": triton_version(), "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "gpus": world,
               "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"), "topology": topology()}
        about = (f"NCCL collectives on {world} GPUs of one host (link in env.topology; NCCL_NVLS_ENABLE=0, so no NVLink "
                 "multicast); all-reduce and reduce-scatter sum. 'iters' = calls per graph / per timed eager block. "
                 + __doc__.split("\n\n", 2)[2].replace("\n", " ")
                 + " Run notes: " + ("; ".join(notes) if notes else "none") + f"; {len(points)} points in {time.time() - t0:.0f} s.")
        write_family(os.path.join(args.out, "nccl.json"), "nccl", about, env, points)
        print(f"wrote {len(points)} points; notes: {notes}", flush=True)


def nvsmi(q):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({e})"


def topology():
    try:
        out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20).stdout
        out = re.sub(r"\x1b\[[0-9;]*m", "", out)
        return " | ".join(" ".join(line.split()) for line in out.splitlines()[:3] if line.strip())
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({e})"


def triton_version():
    try:
        import triton
        return triton.__version__
    except Exception:  # noqa: BLE001
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--ops", default=",".join(shapes.NCCL_OPS))
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--budget", type=float, default=150.0, help="seconds; larger sizes are skipped after it")
    ap.add_argument("--port", type=int, default=29531)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.dry_run:
        n = sum(1 for op in args.ops.split(",") for b in shapes.NCCL_BYTES if b <= args.max_bytes)
        print(f"{n} points: ops {args.ops}; bytes {shapes.NCCL_BYTES[0]} .. {max(b for b in shapes.NCCL_BYTES if b <= args.max_bytes)}")
        return
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    os.makedirs(args.out, exist_ok=True)
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(args.gpus, args), nprocs=args.gpus, join=True)


if __name__ == "__main__":
    main()
