#!/usr/bin/env python3
"""The calibrate-to-my-cluster acceptance check on a silicon-sample CSV (docs/calibration.md).

For each (engine, model, GPU, engine release) group of aggregated rows (--engine: vLLM's by default; --mode disagg
the disaggregated rows) with at least
--min-points distinct points, it draws a seeded random third of the group's points, runs
`servesim calibrate e2e` on that third (--folds 4 --seed N), then `servesim validate` on the other
two thirds with and without `--calibration` the profile, and prints each group's held-out median
|error| of TTFT and TPOT before -> after, whether it meets the target (TTFT <= 10 %, TPOT <= 5 %)
and whether it got worse than uncalibrated by more than a point.

Points are what `validate` merges: rows equal in every column but id, silicon_data_source and the
two measured figures, at the same concurrency. The third is the one `calibrate e2e
--train-fraction 0.33 --seed N` draws (the same shuffle), written in that order, so the fit, its
folds and the held-out figures are those of `--train-fraction`.

    tools/calibration_acceptance.py --servesim build/servesim --seeds 1,2,3
    tools/calibration_acceptance.py --engine sglang,trtllm --seeds 1,2,3
    tools/calibration_acceptance.py --group kimi-k2.5 --seeds 1 --json out.json
    tools/calibration_acceptance.py --engine vllm,sglang,trtllm --mode disagg --seeds 1,2,3
    tools/calibration_acceptance.py --group "gpt-oss-120b h200" --cluster no-graphs.json

--cluster SCENARIO.json makes each group's points a cluster known exactly: its measured TTFT and
TPOT are replaced by servesim's own prediction of every layout under that scenario (`validate
--scenario`: e.g. {"engine": {"cudagraph_mode": "NONE"}}, a build that issues its decode from the
host), so what calibration recovers from a third of them, and what it misses, is measured against a
truth the priors do not hold.

Under each group, per seed, the parameters the profile applies (chosen by the nested cross-validation
and kept by the gate) with their fitted values. Flags: K the profile kept the priors, Kt / Kp it kept them for TTFT / TPOT (only the parameters
that act on the other metric alone apply), A no point of the third measures the first-token floor; "not placed"
a third none of whose points servesim can set up (the reason, as `validate` lists it).

Every run is `nice`d and single-threaded (--threads 1); a group of 5 fitted points takes minutes.
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

DEFAULT_CSV = "/work/shared/calibration/e2e/aic_silicon_calibration.csv"
MASK = (1 << 64) - 1
TTFT_TARGET, TPOT_TARGET, WORSE_BY = 10.0, 5.0, 1.0


def splitmix64(x):
    """common/splitmix.hpp, bit for bit."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def train_indices(n, seed, fraction):
    """The points calibrate e2e --train-fraction fits on, in its order (calibrate_e2e.cpp)."""
    idx = list(range(n))
    for i in range(n - 1, 0, -1):
        j = splitmix64((seed * 31 + i) & MASK) % (i + 1)
        idx[i], idx[j] = idx[j], idx[i]
    # std::llround: halves away from zero (Python's round() goes to even)
    n_train = max(1, int(fraction * n + 0.5))
    return idx[:n_train], idx[n_train:]


def concurrency(row):
    m = re.search(r"silicon_concurrency=(\d+)", row["silicon_data_source"])
    if m:
        return int(m.group(1))
    m = re.search(r"_c(\d+)_", row["id"])
    return int(m.group(1)) if m else 0


def point_key(header, row):
    """validate's merge key (sim/validate/measured.cpp), with its TP e x e MoE-grid rewrite."""
    def num(k):
        try:
            return int(float(row[k])) if row[k] else 0
        except ValueError:
            return 0
    e = num("moe_ep_size")
    grid = row["mode"] == "agg" and e > 1 and num("moe_tp_size") == e and num("tp_size") == e * e and num("attention_dp_size") <= 1
    key = []
    for h in header:
        if h in ("id", "silicon_data_source", "silicon_ttft_ms", "silicon_tpot_ms"):
            continue
        key.append(str(e) if grid and h == "tp_size" else "1" if grid and h == "moe_tp_size" else row[h])
    key.append(str(concurrency(row)))
    return tuple(key)


def groups_of(path, engine, mode):
    with open(path, newline="") as f:
        rd = csv.DictReader(f)
        header = rd.fieldnames
        rows = list(rd)
    groups = {}
    for r in rows:
        if r["backend"] not in engine.split(",") or r["mode"] != mode:
            continue
        g = groups.setdefault((r["backend"], r["model_path"], r["system"], r["backend_version"] or "-"), {})
        g.setdefault(point_key(header, r), []).append(r)   # dicts keep first-row order, as validate
    return header, {k: list(v.values()) for k, v in groups.items()}


def group_name(key):
    """engine, model, GPU, release: what --group matches and the table prints."""
    return f"{key[0]} {key[1].split('/')[-1]} {key[2].split('_')[0].upper()} {key[3]}"


def as_cluster(servesim, header, groups, scenario, mode):
    """Every group's points with servesim's prediction under `scenario` as their measured figures
    (points it cannot place are dropped)."""
    with tempfile.TemporaryDirectory() as tmp:
        rows_csv, pred_csv = os.path.join(tmp, "rows.csv"), os.path.join(tmp, "pred.csv")
        write_rows(rows_csv, header, [rows for pts in groups.values() for rows in pts])
        subprocess.run(["nice", servesim, "validate", rows_csv, "--mode", mode, "--scenario", scenario, "--threads", "2",
                        "--output", pred_csv], check=True, capture_output=True)
        with open(pred_csv, newline="") as f:
            pred = {r["id"]: r for r in csv.DictReader(f) if r["predicted_ttft_ms"] and r["predicted_itl_ms"]}
    out = {}
    for key, pts in groups.items():
        kept = []
        for rows in pts:
            rows = [dict(r, silicon_ttft_ms=pred[r["id"]]["predicted_ttft_ms"], silicon_tpot_ms=pred[r["id"]]["predicted_itl_ms"])
                    for r in rows if r["id"] in pred]
            if rows:
                kept.append(rows)
        out[key] = kept
    return out


def write_rows(path, header, points):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        for rows in points:
            w.writerows(rows)


def run_json(cmd):
    out = subprocess.run(["nice"] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + (out.stderr.strip() or out.stdout.strip()))
    return json.loads(out.stdout)


def medians(report):
    t = [abs(p["error_pct"]["ttft"]) for p in report["points"] if p.get("error_pct", {}).get("ttft") is not None]
    i = [abs(p["error_pct"]["itl"]) for p in report["points"] if p.get("error_pct", {}).get("itl") is not None]
    return (statistics.median(t) if t else float("nan"), statistics.median(i) if i else float("nan"))


def one(servesim, header, pts, seed, tmp, extra, mode="agg"):
    train, test = train_indices(len(pts), seed, 0.33)
    third, rest, prof = (os.path.join(tmp, n) for n in ("third.csv", "rest.csv", "profile.json"))
    write_rows(third, header, [pts[i] for i in train])
    write_rows(rest, header, [pts[i] for i in test])
    cal = run_json([servesim, "calibrate", "e2e", third, "--output", prof, "--folds", "4", "--seed", str(seed),
                    "--threads", "1", "--format", "json"] + extra)
    common = [servesim, "validate", rest, "--mode", mode, "--seed", str(seed), "--threads", "1", "--format", "json"]
    uncal, calib = run_json(common), run_json(common + ["--calibration", prof])
    before, after = medians(uncal), medians(calib)
    cv = cal["cross_validation"]
    return {"seed": seed, "train": len(train), "held_out": len(test),
            "ttft": [before[0], after[0]], "tpot": [before[1], after[1]],
            # the held-out figures inside the band their prediction carries: uncalibrated (the shipped
            # bands), calibrated (the profile's own where it applies), validate's band_cover
            "band_cover": [uncal.get("band_cover"), calib.get("band_cover")],
            "kept_priors": bool(cv.get("kept_priors")),
            "shrinkage": cv.get("shrinkage"),
            "priors_kept_for": cv.get("priors_kept_for", []),
            "anchored": bool(cal.get("first_token_floor_anchored")),
            "parameters": {p["name"]: [p["prior"], p["value"], p["sd"]] for p in cal["parameters"]},
            "chosen": [p["name"] for p in cal["parameters"] if p["name"] not in cal.get("dropped_by_cross_validation", [])]}


def verdict(r):
    (t0, t1), (i0, i1) = r["ttft"], r["tpot"]
    worse = t1 - t0 > WORSE_BY or i1 - i0 > WORSE_BY
    meets = t1 <= TTFT_TARGET and i1 <= TPOT_TARGET
    return meets, worse


def cell(r):
    (t0, t1), (i0, i1) = r["ttft"], r["tpot"]
    meets, worse = verdict(r)
    kept_for = r.get("priors_kept_for", [])
    flags = ("K" if r["kept_priors"] else "Kt" if kept_for == ["ttft"] else "Kp" if kept_for == ["tpot"] else "") + \
        ("A" if r["anchored"] else "")
    return f"{t0:.1f} -> {t1:.1f} / {i0:.1f} -> {i1:.1f}" + (" " + flags if flags else "") + \
        (" (worse)" if worse else " meets" if meets else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--csv", default=DEFAULT_CSV, help="silicon-sample CSV (default: the calibration split)")
    ap.add_argument("--servesim", default="build/servesim", help="the servesim binary")
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (each draws its own third)")
    ap.add_argument("--engine", default="vllm", help="engines of the rows (backend column), comma-separated: vllm,sglang,trtllm")
    ap.add_argument("--mode", default="agg", choices=["agg", "disagg"], help="aggregated or disaggregated rows")
    ap.add_argument("--min-points", type=int, default=12, help="smallest group scored (distinct points)")
    ap.add_argument("--group", default="", help="only groups whose 'model gpu release' contains one of these (comma-separated, "
                                                 "case-insensitive)")
    ap.add_argument("--max-points", type=int, default=0, help="skip groups with more points (0: none skipped)")
    ap.add_argument("--parameters", default="", help="passed to calibrate e2e --parameters")
    ap.add_argument("--no-shrink", action="store_true", help="pass calibrate e2e --no-shrink (the gate alone, no shrinkage toward the priors)")
    ap.add_argument("--cluster", default="", help="scenario JSON: score a cluster known exactly, each point's measured figures "
                                                   "replaced by servesim's prediction under it (validate --scenario)")
    ap.add_argument("--json", default="", help="also write every result here (rewritten after each group)")
    a = ap.parse_args()
    extra = (["--parameters", a.parameters] if a.parameters else []) + (["--no-shrink"] if a.no_shrink else [])
    header, groups = groups_of(a.csv, a.engine, a.mode)
    groups = {k: v for k, v in groups.items() if any(g.strip().lower() in group_name(k).lower() for g in a.group.split(","))}
    if a.cluster:
        groups = as_cluster(a.servesim, header, groups, a.cluster, a.mode)
    seeds = [int(s) for s in a.seeds.split(",") if s]
    results = []
    print("group | points | " + " | ".join(f"seed {s}: TTFT / TPOT %" for s in seeds))
    for key in sorted(groups):
        pts = groups[key]
        name = group_name(key)
        if len(pts) < a.min_points or (a.max_points and len(pts) > a.max_points):
            continue
        cells = []
        for s in seeds:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    r = one(a.servesim, header, pts, s, tmp, extra, a.mode)
                except RuntimeError as e:
                    print(f"{name}: seed {s}: {e}", file=sys.stderr)
                    # a third none of whose points servesim can place is no calibration: say why
                    cells.append("not placed: " + str(e).split("cannot place this run: ")[-1][:80] if "cannot place" in str(e) else "failed")
                    continue
            r["group"], r["points"] = name, len(pts)
            results.append(r)
            cells.append(cell(r))
        print(f"{name} | {len(pts)} | " + " | ".join(cells), flush=True)
        for r in results:   # the set the nested cross-validation and the gate chose, with its fitted values
            if r["group"] == name:
                sh = r.get("shrinkage")
                at = f" (shrinkage strength {sh['strength'] if sh['strength'] is not None else 'priors'})" if sh else ""
                print(f"  seed {r['seed']} chose{at}: " + (", ".join(f"{c} {r['parameters'][c][1]:.3g}" for c in r["chosen"]) or "nothing (priors)"),
                      flush=True)
        if a.json:   # after every group: a long run stopped part way keeps what it measured
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)
    for s in seeds:
        rs = [r for r in results if r["seed"] == s]
        v = [verdict(r) for r in rs]
        print(f"seed {s}: {sum(m for m, _ in v)} of {len(rs)} groups meet both targets, {sum(w for _, w in v)} worse by more "
              f"than {WORSE_BY:g} point")
    print(bands_held(results))


def bands_held(results):
    """The held-out measured figures inside their prediction's band, over every cell: uncalibrated (the
    shipped bands), and calibrated, with those whose band was the profile's own (validate's band_cover)."""
    def total(i, checks, inside):
        covers = [r["band_cover"][i] for r in results if r.get("band_cover") and r["band_cover"][i]]
        c, h = sum(b[checks] for b in covers), sum(b[inside] for b in covers)
        return f"{h} of {c} ({100 * h / c:.1f} %)" if c else "none"
    return ("bands held out (a band promises 80 %): uncalibrated " + total(0, "checks", "inside") + "; calibrated " +
            total(1, "checks", "inside") + ", of them under the profile's own bands " + total(1, "profile_checks", "profile_inside"))

if __name__ == "__main__":
    main()
