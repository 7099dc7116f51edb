#!/usr/bin/env python3
"""Copy measured family files into the calibration folder, rounding figures to 4 significant
digits (well under the run-to-run spread) so every file stays small.

Usage: compact.py SRC_DIR DEST_DIR [family ...]"""
import json
import os
import sys

from calib_io import read_points, write_family


def sig(v, digits=4):
    if isinstance(v, float):
        return float(f"{v:.{digits}g}")
    return v


def compact(src, dst):
    d = json.load(open(src))
    pts = [{k: sig(v) for k, v in p.items()} for p in read_points(d)]
    extra = {}
    if d["family"] == "gemm":     # one 'used_by' per (n, k) rather than per point
        extra["used_by"] = {}
        for p in pts:
            extra["used_by"][f"{p['n']}x{p['k']}"] = p.pop("used_by", None)
            p.pop("tflops", None)     # = 2*m*n*k / ms, derivable
    write_family(dst, d["family"], d["about"], d["env"], pts, extra)
    return len(pts), os.path.getsize(dst)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src_dir, dst_dir = sys.argv[1], sys.argv[2]
    fams = sys.argv[3:] or sorted(f[:-5] for f in os.listdir(src_dir) if f.endswith(".json") and f != "errors.json")
    for fam in fams:
        print(fam, *compact(os.path.join(src_dir, fam + ".json"), os.path.join(dst_dir, fam + ".json")))
