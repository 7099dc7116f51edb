"""Charts of a servesim sweep: TTFT and ITL against concurrency (two panels, one curve per
topology, SLO lines and the planned point), and output throughput per GPU against throughput per
user. Input is the column-oriented sweep result (dict of lists or a pandas DataFrame) and,
optionally, a plan (the object `servesim plan --format json` prints).

    python3 -m servesim.plot SWEEP.json [--plan PLAN.json] -o chart.png
    python3 -m servesim.plot --validation VALIDATE.json -o chart.png   # servesim validate --format json
    python3 -m servesim.plot --search SEARCH.json -o pareto.png
"""
from __future__ import annotations

import argparse
import json
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


# Column names of `servesim sweep` / servesim.sweep() results -> the names the charts read
# (those of a plan's sweep columns).
_ALIASES = {"output_token_throughput_per_gpu": "output_tps_per_gpu",
            "output_token_throughput_per_user_avg": "output_tps_per_user"}
for _s in ("p50", "p90", "p99"):
    _ALIASES[f"time_to_first_token_ms_{_s}"] = f"ttft_{_s}_ms"
    _ALIASES[f"inter_token_latency_ms_{_s}"] = f"itl_{_s}_ms"
    for _e in ("lo", "hi"):
        _ALIASES[f"time_to_first_token_ms_{_s}_band_{_e}"] = f"ttft_{_s}_ms_band_{_e}"
        _ALIASES[f"inter_token_latency_ms_{_s}_band_{_e}"] = f"itl_{_s}_ms_band_{_e}"
_NEEDED = ("concurrency", "ttft_p50_ms", "itl_p50_ms", "output_tps_per_gpu", "output_tps_per_user")


def _columns(data):
    """Accepts a DataFrame, a dict of columns, or {'columns': {...}}, from a plan or a sweep;
    returns a dict of lists under the chart's column names. Raises ValueError naming what is missing."""
    if hasattr(data, "to_dict"):
        data = {k: list(v) for k, v in data.to_dict(orient="list").items()}
    elif isinstance(data, dict) and "columns" in data:
        data = data["columns"]
    if not isinstance(data, dict):
        raise ValueError("expected sweep columns (a JSON object of lists)")
    cols = dict(data)
    for k, v in data.items():
        if k in _ALIASES and _ALIASES[k] not in cols:
            cols[_ALIASES[k]] = v
    missing = [k for k in _NEEDED if k not in cols]
    if missing:
        raise ValueError("sweep has no column " + ", ".join(missing) +
                         " (give the output of `servesim sweep --format json` or of `servesim plan --format json`)")
    return cols


def _by_topology(cols):
    names = cols.get("topology") or ["sweep"] * len(cols["concurrency"])
    order = []
    for n in names:
        if n not in order:
            order.append(n)
    groups = {}
    for n in order:
        idx = [i for i, t in enumerate(names) if t == n]
        idx.sort(key=lambda i: cols["concurrency"][i])
        groups[n] = idx
    return groups


def _shade_band(ax, cols, key, idx, x, color):
    """Shades the prediction band of column `key` (its `_band_lo`/`_band_hi` columns) where it exists."""
    lo, hi = cols.get(key + "_band_lo"), cols.get(key + "_band_hi")
    if not lo or not hi:
        return
    pts = [(xv, lo[i], hi[i]) for xv, i in zip(x, idx) if lo[i] is not None and hi[i] is not None
           and lo[i] == lo[i] and hi[i] == hi[i]]
    if pts:
        ax.fill_between([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], color=color, alpha=0.15,
                        lw=0, label="prediction band (p10-p90 of measured/predicted)")


def latency_figure(sweep, plan=None, statistic="p50", title=None):
    """Two panels: TTFT vs concurrency and ITL vs concurrency, SLO lines, planned points."""
    import matplotlib
    import matplotlib.pyplot as plt

    cols = _columns(sweep)
    stat = (plan or {}).get("statistic", statistic)
    fig, (ax_t, ax_i) = plt.subplots(1, 2, figsize=(12, 4.6))
    groups = _by_topology(cols)
    planned = {t["name"]: t for t in (plan or {}).get("topologies", [])}
    for k, (name, idx) in enumerate(groups.items()):
        c = COLORS[k % len(COLORS)]
        x = [cols["concurrency"][i] for i in idx]
        for ax, key in ((ax_t, f"ttft_{stat}_ms"), (ax_i, f"itl_{stat}_ms")):
            ax.plot(x, [cols[key][i] for i in idx], "o-", color=c, label=name, ms=4)
            _shade_band(ax, cols, key, idx, x, c)
            p = planned.get(name)
            if p and p.get("max_concurrency"):
                j = [i for i in idx if cols["concurrency"][i] == p["max_concurrency"]]
                if j:
                    ax.plot([p["max_concurrency"]], [cols[key][j[0]]], marker="*", ms=16, color=c,
                            markeredgecolor="black", zorder=5)
    if plan:
        ax_t.axhline(plan["ttft_ms"], color="gray", ls="--", lw=1.2, label=f"SLO TTFT {plan['ttft_ms']:g} ms")
        ax_i.axhline(plan["itl_ms"], color="gray", ls="--", lw=1.2, label=f"SLO ITL {plan['itl_ms']:g} ms")
    for ax, what in ((ax_t, "TTFT"), (ax_i, "ITL")):
        ax.set_xscale("log", base=2)
        swept = sorted(set(cols["concurrency"]))
        if len(swept) <= 12:   # label every swept concurrency, not just every other power of two
            ax.set_xticks(swept)
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("concurrency (clients)")
        ax.set_ylabel(f"{what} {stat} (ms)")
        ax.set_title(f"{what} vs concurrency")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def throughput_figure(sweep, title=None):
    """Output tokens/s per GPU against output tokens/s per user, one curve per topology."""
    import matplotlib.pyplot as plt

    cols = _columns(sweep)
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    for k, (name, idx) in enumerate(_by_topology(cols).items()):
        c = COLORS[k % len(COLORS)]
        ax.plot([cols["output_tps_per_user"][i] for i in idx], [cols["output_tps_per_gpu"][i] for i in idx],
                "o-", color=c, label=name, ms=4)
        for i in idx:
            ax.annotate(str(cols["concurrency"][i]), (cols["output_tps_per_user"][i], cols["output_tps_per_gpu"][i]),
                        fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(title or "Throughput per GPU vs per user (labels: concurrency)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def search_figure(result, title=None):
    """The Pareto chart of a search (``servesim search --format json`` / servesim.search()): every
    simulated point per topology family (faint; filled when it meets both SLOs), each family's
    frontier of output tok/s per GPU against tok/s per user, the ITL SLO as the per-user rate it
    implies (1000 / ITL ms, a vertical line), and the best configuration under the SLO (a star)."""
    import matplotlib.pyplot as plt

    if not isinstance(result, dict) or "frontiers" not in result or "sweep" not in result:
        raise ValueError("expected a search result (servesim search --format json)")
    cols = result["sweep"]["columns"]
    fig, ax = plt.subplots(figsize=(8.5, 5.4))
    fams = [f["family"] for f in result["frontiers"]]
    for k, f in enumerate(result["frontiers"]):
        c = COLORS[k % len(COLORS)]
        idx = [i for i, fam in enumerate(cols.get("family", [])) if fam == f["family"]]
        if idx:
            meets = [i for i in idx if cols["meets_slo"][i]]
            miss = [i for i in idx if not cols["meets_slo"][i]]
            ax.scatter([cols["output_tps_per_user"][i] for i in meets], [cols["output_tps_per_gpu"][i] for i in meets],
                       s=9, color=c, alpha=0.35, linewidths=0)
            ax.scatter([cols["output_tps_per_user"][i] for i in miss], [cols["output_tps_per_gpu"][i] for i in miss],
                       s=9, facecolors="none", edgecolors=c, alpha=0.35, linewidths=0.6)
        fr = f["frontier"]
        if fr:
            ax.plot([p["output_tps_per_user"] for p in fr], [p["output_tps_per_gpu"] for p in fr], "o-", color=c, ms=4,
                    lw=1.6, label=f"{f['family']} ({f['simulated_points']} points)")
    itl = result.get("itl_ms")
    if itl:
        ax.axvline(1000.0 / itl, color="gray", ls="--", lw=1.2,
                   label=f"ITL SLO {itl:g} ms ({result.get('statistic', 'p50')}) = {1000.0 / itl:g} tok/s/user")
    best = result.get("best")
    if best and best.get("score"):
        s = best["score"]
        ax.plot([s["tps_per_user"]], [s["tps_per_gpu"]], marker="*", ms=18, color="gold", markeredgecolor="black",
                zorder=6, ls="none", label="best under SLO: " + best["label"])
    import matplotlib.ticker as mt
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(mt.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(mt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(mt.NullFormatter())
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    slo = result.get("slo", {})
    ax.set_title(title or f"{result.get('model', '')}: ISL {result.get('isl')} / OSL {result.get('osl')}, "
                          f"SLO TTFT {slo.get('ttft_ms', 0):g} ms / ITL {slo.get('itl_ms', 0):g} ms "
                          f"(filled: meets both)", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def save_search_chart(result, path, title=None):
    """Writes the Pareto chart of a search result to `path`; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = search_figure(result, title=title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def save_charts(sweep, path, plan=None, title=None):
    """Writes the latency chart to `path` and the throughput chart beside it (`*-throughput.png`).
    Returns both paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = latency_figure(sweep, plan=plan, title=title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    base = path[:-4] if path.lower().endswith(".png") else path
    tpath = base + "-throughput.png"
    fig = throughput_figure(sweep, title=None)
    fig.savefig(tpath, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path, tpath


GPU_COLORS = {"h100": "#1f77b4", "h200": "#d62728", "b200": "#2ca02c", "b300": "#9467bd", "gb200": "#ff7f0e",
              "gb300": "#8c564b"}


def validation_figure(result, guides=(10, 25), title=None):
    """Predicted against measured (log-log) for TTFT, TPOT/ITL and output tokens/s, one colour per
    GPU, the y = x line and +-guides % lines. ``result`` is what ``servesim validate --format json``
    prints (or servesim.validate() returns); unmodellable points are left out of the chart."""
    import matplotlib.pyplot as plt
    import numpy as np

    pts = [p for p in result.get("points", []) if "predicted" in p]
    panels = (("ttft_ms", "ttft_ms", "TTFT (ms)"), ("tpot_ms", "itl_ms", "TPOT / ITL (ms)"),
              ("output_tps", "output_tps", "output tokens/s"))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.9))
    gpus = sorted({p["gpu"] for p in pts})
    for ax, (mkey, pkey, label) in zip(axes, panels):
        xs, ys = [], []
        for k, g in enumerate(gpus):
            sel = [p for p in pts if p["gpu"] == g and p["measured"].get(mkey) and p["predicted"].get(pkey)]
            x = [p["measured"][mkey] for p in sel]
            y = [p["predicted"][pkey] for p in sel]
            xs += x
            ys += y
            ax.scatter(x, y, s=14, alpha=0.75, color=GPU_COLORS.get(g.lower(), COLORS[k % len(COLORS)]),
                       label=f"{g.upper()} ({len(sel)})", edgecolors="none")
        ax.set_xscale("log")
        ax.set_yscale("log")
        if xs:
            lo = min(min(xs), min(ys)) / 1.5
            hi = max(max(xs), max(ys)) * 1.5
            line = np.array([lo, hi])
            ax.plot(line, line, color="black", lw=1, label="y = x")
            for gi, g in enumerate(guides):
                ls = "--" if gi == 0 else ":"
                ax.plot(line, line * (1 + g / 100), color="gray", lw=0.9, ls=ls, label=f"\u00b1{g:g}%")
                ax.plot(line, line * (1 - g / 100), color="gray", lw=0.9, ls=ls)
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(title or f"servesim vs measured: {len(pts)} points (statistic: {result.get('statistic', 'avg')})")
    fig.tight_layout()
    return fig


def save_validation_chart(result, path, title=None):
    """Writes the predicted-vs-measured chart to ``path``; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = validation_figure(result, title=title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m servesim.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", nargs="?", help="sweep JSON (servesim sweep --format json, or a plan's 'sweep' member)")
    ap.add_argument("--validation", help="servesim validate --format json output: predicted vs measured chart")
    ap.add_argument("--search", help="search JSON (servesim search --format json): draw its Pareto chart")
    ap.add_argument("--plan", help="plan JSON (servesim plan --format json)")
    ap.add_argument("-o", "--output", default="servesim.png", help="PNG to write")
    ap.add_argument("--title")
    a = ap.parse_args(argv)
    if a.validation:
        try:
            with open(a.validation) as f:
                result = json.load(f)
            print(save_validation_chart(result, a.output, title=a.title))
        except (OSError, ValueError, KeyError) as e:
            print(f"servesim.plot: error: {a.validation}: {e}", file=sys.stderr)
            return 2
        return 0
    if a.search:
        try:
            with open(a.search) as f:
                result = json.load(f)
            print(save_search_chart(result, a.output, title=a.title))
        except (OSError, ValueError, KeyError) as e:
            print(f"servesim.plot: error: {a.search}: {e}", file=sys.stderr)
            return 2
        return 0
    if not a.sweep:
        ap.error("give SWEEP.json, --validation VALIDATE.json or --search SEARCH.json")
    try:
        with open(a.sweep) as f:
            sweep = json.load(f)
        plan = None
        if a.plan:
            with open(a.plan) as f:
                plan = json.load(f)
        if plan is None and isinstance(sweep, dict) and "topologies" in sweep and "sweep" in sweep:
            plan, sweep = sweep, sweep["sweep"]
    except (OSError, ValueError) as e:
        print(f"servesim.plot: error: {e}", file=sys.stderr)
        return 2
    try:
        paths = save_charts(sweep, a.output, plan=plan, title=a.title)
    except (ValueError, KeyError) as e:
        print(f"servesim.plot: error: {a.sweep}: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
