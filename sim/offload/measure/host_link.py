"""Host <-> GPU copy time of pinned host memory against transfer size, for the KV offload tiers.

Times cudaMemcpyAsync host->device and device->host of one contiguous pinned buffer (the way an
offload connector moves a block group), median of 30 copies per size after 5 warm-ups, with CUDA
events, and fits t = latency + bytes / bandwidth by least squares over sizes >= 256 KiB.
Writes JSON: GPU name, per-size medians, the fit per direction.

    python3 host_link.py OUT.json
"""
import json
import statistics
import sys

import torch


def time_copy(dst, src, reps=30, warm=5):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(warm + reps):
        s.record()
        dst.copy_(src, non_blocking=True)
        e.record()
        e.synchronize()
        if i >= warm:
            out.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(out)


def fit(points):
    xs = [b for b, _ in points]
    ys = [t for _, t in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"latency_s": my - slope * mx, "bytes_per_s": 1.0 / slope}


def main():
    sizes = [1 << k for k in range(16, 31)]   # 64 KiB .. 1 GiB
    big = sizes[-1]
    host = torch.empty(big, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(big, dtype=torch.uint8, device="cuda")
    rows = []
    for b in sizes:
        h2d = time_copy(dev[:b], host[:b])
        d2h = time_copy(host[:b], dev[:b])
        rows.append({"bytes": b, "h2d_s": h2d, "d2h_s": d2h})
        print(f"{b:>12} B  h2d {h2d*1e6:10.1f} us {b/h2d/1e9:6.1f} GB/s   d2h {d2h*1e6:10.1f} us {b/d2h/1e9:6.1f} GB/s", flush=True)
    sel = [r for r in rows if r["bytes"] >= 256 * 1024]
    res = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "method": __doc__.strip().splitlines()[0],
        "rows": rows,
        "fit_h2d": fit([(r["bytes"], r["h2d_s"]) for r in sel]),
        "fit_d2h": fit([(r["bytes"], r["d2h_s"]) for r in sel]),
        "smallest_copy_h2d_s": rows[0]["h2d_s"],
    }
    print(json.dumps({k: res[k] for k in ("gpu", "fit_h2d", "fit_d2h")}, indent=1))
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
