"""Predict the vLLM aggregated rows of an AIC silicon calibration CSV with `servesim simulate`
and report TTFT / TPOT / throughput errors; optionally grid-search the engine-level host
parameters (per-step CPU time, per-request API-server time) on them.

Rows are deduplicated on every column but id, provenance and the metrics (the mean of repeated
measurements is kept), the concurrency comes from `silicon_concurrency`, and each point runs as
AIC's harness runs aiperf: fixed lengths, warm-up 2 x C, measured requests max(10 C, 40).
Rows whose model servesim cannot load are listed with the reason.

    /usr/bin/python3 sim/engine/measure/e2e_check.py CSV [--servesim build/servesim] [--flags "..."]
        [--fit] [--json out.json]
"""
import argparse
import concurrent.futures as cf
import csv
import itertools
import json
import re
import statistics
import subprocess
import sys

MODELS = {  # HF id -> servesim model name
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
    "moonshotai/Kimi-K2.5": "kimi-k2.5",
}
WITHHELD = ("Llama-3.1-70B", "Qwen3-235B")
GPUS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300"}
PREC = {"fp8": "fp8", "fp4": "nvfp4", "bf16": "bf16", "": "bf16", "int4": "int4"}


def rows(path):
    keep = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["backend"] != "vllm" or r["mode"] != "agg":
                continue
            if any(w in r["model_path"] for w in WITHHELD):
                continue
            m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
            if not m:
                continue
            c = int(m.group(1))
            key = tuple((k, v) for k, v in r.items() if k not in ("id", "silicon_data_source", "silicon_ttft_ms", "silicon_tpot_ms")) + (("c", c),)
            keep.setdefault(key, []).append((float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"])))
    out = []
    for key, ms in keep.items():
        d = dict(key)
        d["ttft_ms"] = statistics.mean(x[0] for x in ms)
        d["tpot_ms"] = statistics.mean(x[1] for x in ms)
        out.append(d)
    return out


def command(servesim, r, flags):
    c = r["c"]
    ver = r["backend_version"]
    engine = "vllm-" + ver if re.match(r"^\d+\.\d+", ver) else "vllm"
    tp = int(float(r["tp_size"] or 1))
    args = [servesim, "simulate", "--model", MODELS[r["model_path"]], "--gpu", GPUS[r["system"]], "--gpus", str(tp), "--tp", str(tp),
            "--precision", PREC.get(r["precision"], "bf16"), "--isl", r["isl"], "--osl", r["osl"], "--concurrency", str(c),
            "--requests", str(max(10 * c, 40)), "--warmup-requests", str(2 * c), "--engine", engine, "--seed", "1",
            "--format", "json"]
    ep = int(float(r["moe_ep_size"] or 1))
    if ep > 1:
        args += ["--ep", str(ep)]
    return args + flags


def run_one(args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else "rc %d" % p.returncode}
    j = json.loads(p.stdout)
    rec = j["records"]
    return {"ttft_ms": rec["time_to_first_token"]["avg"], "tpot_ms": rec["inter_token_latency"]["avg"],
            "ttft_p50": rec["time_to_first_token"]["p50"], "cohort": j.get("cohorts", {}).get("fraction")}


def evaluate(servesim, rs, flags, workers=2):
    todo = [r for r in rs if r["model_path"] in MODELS]
    with cf.ThreadPoolExecutor(workers) as ex:
        res = list(ex.map(lambda r: run_one(command(servesim, r, flags)), todo))
    out, skipped = [], []
    for r, p in zip(todo, res):
        if "error" in p:
            skipped.append((r, p["error"]))
            continue
        out.append({**r, "pred": p})
    for r in rs:
        if r["model_path"] not in MODELS:
            skipped.append((r, "no servesim model for " + r["model_path"]))
    return out, skipped


def errors(out):
    e_t = [(o["pred"]["ttft_ms"] - o["ttft_ms"]) / o["ttft_ms"] for o in out]
    e_p = [(o["pred"]["tpot_ms"] - o["tpot_ms"]) / o["tpot_ms"] for o in out]
    def summ(e):
        a = sorted(abs(x) for x in e)
        return {"median_abs": statistics.median(a) if a else float("nan"), "p90_abs": a[int(0.9 * (len(a) - 1))] if a else float("nan"),
                "median_signed": statistics.median(e) if e else float("nan"), "n": len(e)}
    return {"ttft": summ(e_t), "tpot": summ(e_p)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--servesim", default="build/servesim")
    ap.add_argument("--flags", default="")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--rows", action="store_true", help="print every row")
    a = ap.parse_args()
    rs = rows(a.csv)
    flags = a.flags.split()
    out, skipped = evaluate(a.servesim, rs, flags)
    base = errors(out)
    print("rows modelled: %d, not modelled: %d" % (len(out), len(skipped)))
    reasons = {}
    for r, why in skipped:
        reasons[why] = reasons.get(why, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
        print("  %4d  %s" % (n, why))
    print("errors (%s):" % (" ".join(flags) or "defaults"), json.dumps(base))
    if a.rows:
        for o in sorted(out, key=lambda o: (o["model_path"], int(o["isl"]), int(o["osl"]), o["c"])):
            print("%-32s %-8s tp%-2s %5s/%-5s c%-4d TTFT %8.1f vs %8.1f  TPOT %6.2f vs %6.2f  cohort %.2f" % (
                o["model_path"][-32:], o["system"], o["tp_size"], o["isl"], o["osl"], o["c"], o["pred"]["ttft_ms"], o["ttft_ms"],
                o["pred"]["tpot_ms"], o["tpot_ms"], o["pred"]["cohort"] or 0))
    result = {"base": base, "flags": flags}
    if a.fit:
        grid = {"--step-overhead-ms": [0.5, 1.0, 2.0, 3.0], "--step-overhead-us-per-seq": [0, 10, 25, 50]}
        best = None
        for vals in itertools.product(*grid.values()):
            f = flags + [x for k, v in zip(grid, vals) for x in (k, str(v))]
            o2, _ = evaluate(a.servesim, rs, f)
            e = errors(o2)
            score = e["tpot"]["median_abs"] + 0.5 * e["ttft"]["median_abs"]
            print("fit", vals, json.dumps(e), "score %.4f" % score, flush=True)
            if best is None or score < best[0]:
                best = (score, vals, e)
        print("best", best)
        result["fit"] = {"grid": grid, "best": best[1], "errors": best[2]}
    if a.json:
        json.dump(result, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
