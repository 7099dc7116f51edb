#!/usr/bin/env python3
"""Adds the points of a later run to a calibration family file: the file's points stay as they
are (first, in their order), the run's points of shapes the file lacks follow in run order, each
tagged with its run number; figures rounded to 4 significant digits; written as rows under
"columns" with one 'used_by' per (n, k). The run's date, environment and `--added` text are
appended to "about"; its env goes under "env_runs".

Usage: merge_runs.py FILE RUN_FILE --added "what the run added" [--out DEST]"""
import argparse
import json

from calib_io import read_points, write_family
from compact import sig

DERIVED = {"tflops", "used_by", "gbps", "gbps_rw"}   # recomputed from the shape, or kept once per (n, k)


def shape_key(p):
    return tuple(sorted((k, v) for k, v in p.items() if k not in DERIVED | {"ms", "ms_eager", "run", "max_expert_tokens",
                                                                           "active_experts"}))


def merge(base, run, added):
    old, new = read_points(base), read_points(run)
    runs = base.get("env_runs", [base["env"]])
    n_run = len(runs) + 1
    for p in old:
        p.setdefault("run", 1)
    seen = {shape_key(p) for p in old}
    fresh = [dict(p, run=n_run) for p in new if shape_key(p) not in seen]
    used_by = dict(base.get("used_by", {}))
    pts = []
    for p in old + fresh:
        if "used_by" in p:
            used_by.setdefault(f"{p['n']}x{p['k']}", p["used_by"])
        pts.append({k: sig(v) for k, v in p.items() if k not in DERIVED})
    cols = []
    for p in pts:
        cols += [k for k in p if k not in cols]
    env = run["env"]
    about = (base["about"] + f" Run {n_run} ({env.get('date')}, {env.get('gpu')}, driver {env.get('driver')}, CUDA "
             f"{env.get('cuda')}, torch {env.get('torch')}, Triton {env.get('triton')}; field 'run'): {added} "
             f"{len(fresh)} points added, {len(new) - len(fresh)} already present skipped.")
    extra = {"env_runs": runs + [env], "used_by": used_by}
    return about, base["env"], pts, extra, cols


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("run_file")
    ap.add_argument("--added", required=True, help="what the run measured and why")
    ap.add_argument("--out", help="destination (default: FILE itself)")
    a = ap.parse_args()
    base, run = json.load(open(a.file)), json.load(open(a.run_file))
    assert base["family"] == run["family"], "different families"
    about, env, pts, extra, cols = merge(base, run, a.added)
    write_family(a.out or a.file, base["family"], about, env, pts, extra, cols)
    print(f"{len(pts)} points, columns {cols}")


if __name__ == "__main__":
    main()
