#!/usr/bin/env python3
"""Run-to-run spread: match the points of two measurement folders by shape and print, per
family, the median and p90 of |b - a| / a for 'ms' and 'ms_eager'.

Usage: compare_runs.py DIR_A DIR_B"""
import json
import os
import sys

from calib_io import read_points

FIGURES = {"ms", "ms_eager", "tflops", "gbps", "gbps_rw", "used_by", "graph_error", "ms_from"}


def key(p):
    """The shape of a point: every field that is not a timing or derived from one."""
    return tuple(sorted((k, v) for k, v in p.items() if k not in FIGURES))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main(a_dir, b_dir):
    print(f"{'family':18s} {'matched':>7s} {'ms med':>7s} {'ms p90':>7s} {'eager med':>9s} {'eager p90':>9s}")
    for f in sorted(os.listdir(b_dir)):
        if not f.endswith(".json") or f == "errors.json" or not os.path.exists(os.path.join(a_dir, f)):
            continue
        a = {key(p): p for p in read_points(json.load(open(os.path.join(a_dir, f))))}
        rel = {"ms": [], "ms_eager": []}
        for p in read_points(json.load(open(os.path.join(b_dir, f)))):
            q = a.get(key(p))
            if q:
                for m in rel:
                    rel[m].append(abs(p[m] - q[m]) / q[m])
        n = len(rel["ms"])
        print(f"{f[:-5]:18s} {n:7d} {pct(rel['ms'], .5):7.3f} {pct(rel['ms'], .9):7.3f} "
              f"{pct(rel['ms_eager'], .5):9.3f} {pct(rel['ms_eager'], .9):9.3f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
