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
    _ALIASES[f"token_gap_ms_{_s}"] = f"gap_{_s}_ms"
    for _e in ("lo", "hi"):
        _ALIASES[f"time_to_first_token_ms_{_s}_band_{_e}"] = f"ttft_{_s}_ms_band_{_e}"
        _ALIASES[f"inter_token_latency_ms_{_s}_band_{_e}"] = f"itl_{_s}_ms_band_{_e}"
_NEEDED = ("ttft_p50_ms", "itl_p50_ms", "output_tps_per_gpu", "output_tps_per_user")
# The swept axis: clients (closed loop) or requests/s (open loop).
_AXES = (("concurrency", "concurrency (clients)", "concurrency"), ("request_rate", "request rate (requests/s)", "request rate"))


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
    axis = next((a for a in _AXES if a[0] in cols), None)
    if axis is None:
        missing.insert(0, "concurrency (or request_rate)")
    else:
        cols["_x"], cols["_xlabel"], cols["_xname"] = cols[axis[0]], axis[1], axis[2]
    if missing:
        raise ValueError("sweep has no column " + ", ".join(missing) +
                         " (give the output of `servesim sweep --format json` or of `servesim plan --format json`)")
    return cols


def _by_topology(cols):
    # A sweep of one scenario has no topology column: its curve is named by what was swept.
    what = "open-loop arrival rate" if cols.get("_xname") == "request rate" else "closed-loop clients"
    names = cols.get("topology") or [what] * len(cols["_x"])
    order = []
    for n in names:
        if n not in order:
            order.append(n)
    groups = {}
    for n in order:
        idx = [i for i, t in enumerate(names) if t == n]
        idx.sort(key=lambda i: cols["_x"][i])
        groups[n] = idx
    return groups


def _gpu_label(cols, name, idx):
    """A topology's legend entry with its GPU count (output tok/s over tok/s per GPU), so curves of
    copies of different sizes on one concurrency axis say so."""
    tps, per = cols.get("output_tps"), cols.get("output_tps_per_gpu")
    for i in idx if tps and per else []:
        if tps[i] and per[i] and per[i] > 0:
            return f"{name} ({round(tps[i] / per[i])} GPUs)"
    return name


def _shade_band(ax, cols, key, idx, x, color):
    """Shades the prediction band of column `key` (its `_band_lo`/`_band_hi` columns) where it exists."""
    lo, hi = cols.get(key + "_band_lo"), cols.get(key + "_band_hi")
    if not lo or not hi:
        return
    pts = [(xv, lo[i], hi[i]) for xv, i in zip(x, idx) if lo[i] is not None and hi[i] is not None
           and lo[i] == lo[i] and hi[i] == hi[i]]
    if pts:
        ax.fill_between([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], color=color, alpha=0.15,
                        lw=0, label="prediction band (measured/predicted out of fit: about 4 in 5 runs inside)")


def default_title(plan):
    """Model, hardware, precision and ISL/OSL of a plan, for a chart's title ('' without a plan)."""
    if not plan or "model" not in plan:
        return ""
    hw = f"{plan.get('nodes', '?')} x {plan.get('instance', '?')}"
    if plan.get("gpu"):
        hw += f" ({plan['gpu']})"
    vision = plan.get("vision_tokens_per_request") or 0
    images = (f" (+ {vision} vision tokens on {100 * plan.get('image_fraction', 1):.0f} % of requests)" if vision else "")
    return f"{plan['model']}, {plan.get('precision', '?')}, on {hw}; ISL {plan.get('isl', '?')}{images} / OSL {plan.get('osl', '?')}"


def _robust_top(values, slo=None):
    """Upper y limit: every point up to 1.25 x the 90th percentile (and 1.15 x the SLO line) is
    shown; an outlier above that is drawn at the top edge with its value written, instead of
    flattening every other point."""
    v = sorted(x for x in values if x is not None and x == x)
    if not v:
        return None
    q = v[int(0.9 * (len(v) - 1))]
    top = 1.25 * q
    if slo:
        top = max(top, 1.15 * slo)
    return None if v[-1] <= top else top


def latency_figure(sweep, plan=None, statistic=None, title=None, ttft_ms=None, itl_ms=None, gap_ms=None):
    """Two panels: TTFT vs concurrency (or offered rate) and ITL, SLO lines, planned points. With
    no statistic given (and no plan naming one) p50 is drawn solid and p90 dashed; a rate sweep's
    points that were OVERLOADED (the queue grew: ``overloaded`` column) are marked with a red x.
    SLO lines come from the plan or from ttft_ms / itl_ms. A plan with a token-gap SLO (--gap-ms),
    or gap_ms given, also draws the gap between streamed tokens on the ITL panel, dotted, with its
    own SLO line (dash-dot). The legend sits below the panels, never on an SLO line; the title names model,
    hardware, precision and ISL/OSL when a plan is given."""
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    cols = _columns(sweep)
    stat = (plan or {}).get("statistic", statistic)
    stats = [stat] if stat else [s for s in ("p50", "p90") if f"ttft_{s}_ms" in cols and f"itl_{s}_ms" in cols]
    stat = stats[-1]   # the SLO and the planned points read at this one
    fig, (ax_t, ax_i) = plt.subplots(1, 2, figsize=(12, 4.9))
    groups = _by_topology(cols)
    planned = {t["name"]: t for t in (plan or {}).get("topologies", [])}
    handles, any_star, any_over = [], False, False
    off_scale = {ax_t: 0, ax_i: 0}   # labels written at each panel's top edge, stacked so they do not overlap
    stars = []   # (axis, clients, value, colour) of each planned point
    slos = {ax_t: (plan or {}).get("ttft_ms", ttft_ms), ax_i: (plan or {}).get("itl_ms", itl_ms)}
    keys = {ax_t: f"ttft_{stat}_ms", ax_i: f"itl_{stat}_ms"}
    tops = {ax: _robust_top([v for s in stats for v in cols[keys[ax].replace(stat, s)]], slos[ax]) for ax in (ax_t, ax_i)}
    gap_slo = (plan or {}).get("gap_ms") or gap_ms or 0
    gap_key = f"gap_{stat}_ms"
    show_gap = gap_slo > 0 and gap_key in cols
    if show_gap:   # the ITL panel's range holds the gaps and both lines: the stalls are what it shows
        vals = [v for s in stats for v in cols[keys[ax_i].replace(stat, s)]] + list(cols[gap_key])
        line = max(slos[ax_i] or 0, gap_slo)
        tops[ax_i] = None if max(vals) <= 3 * line else _robust_top(vals, line)
    over = cols.get("overloaded") or [None] * len(cols["_x"])
    for k, (name, idx) in enumerate(groups.items()):
        c = COLORS[k % len(COLORS)]
        x = [cols["_x"][i] for i in idx]
        for ax in (ax_t, ax_i):
            top = tops[ax]
            for s in stats:
                if s == stat:
                    continue
                y = [cols[keys[ax].replace(stat, s)][i] for i in idx]
                ax.plot(x, [min(v, top) if top else v for v in y], "o-", color=c, ms=3, lw=1, alpha=0.55)
            key = keys[ax]
            y = [cols[key][i] for i in idx]
            line, = ax.plot(x, [min(v, top) if top else v for v in y], "s--" if len(stats) > 1 else "o-", color=c,
                            label=_gpu_label(cols, name, idx), ms=4)
            _shade_band(ax, cols, key, idx, x, c)
            if show_gap and ax is ax_i:
                g = [cols[gap_key][i] for i in idx]
                ax.plot(x, [min(v, top) if top else v for v in g], ":", marker="v", color=c, ms=4, lw=1.4)
            bad = [(xi, min(yi, top) if top else yi) for xi, yi, i in zip(x, y, idx) if over[i]]
            if bad:
                ax.plot([b[0] for b in bad], [b[1] for b in bad], "x", color="#d62728", ms=10, mew=2, zorder=7)
                any_over = True
            if ax is ax_t:
                handles.append(line)
            if top:
                for xi, yi in zip(x, y):
                    if yi > top:
                        ax.plot([xi], [top], marker="^", ms=8, color=c, clip_on=False, zorder=6)
                        # Beside the marker, away from the OVERLOADED x drawn on the same point: to its
                        # left, or to its right at the first swept value (the axis edge).
                        first = xi <= min(cols["_x"])
                        ax.annotate(f"{yi:.0f} ms (off scale)", (xi, top), xytext=(14 if first else -14, -4 - 11 * off_scale[ax]),
                                    textcoords="offset points", ha="left" if first else "right", va="top",
                                    fontsize=8, color=c)
                        off_scale[ax] += 1
            p = planned.get(name)
            if p and p.get("max_concurrency"):
                j = [i for i in idx if cols["_x"][i] == p["max_concurrency"]]
                if j:
                    v = cols[key][j[0]]
                    ax.plot([p["max_concurrency"]], [min(v, top) if top else v], marker="*", ms=16, color=c,
                            markeredgecolor="black", zorder=5)
                    stars.append((ax, p["max_concurrency"], min(v, top) if top else v, c))
                    any_star = True
    for ax, what in ((ax_t, "TTFT"), (ax_i, "ITL")):
        if slos[ax]:
            h = ax.axhline(slos[ax], color="gray", ls="--", lw=1.2, label=f"SLO {what} {slos[ax]:g} ms")
            handles.append(h)
    if show_gap:
        handles.append(ax_i.axhline(gap_slo, color="gray", ls="-.", lw=1.2, label=f"SLO token gap {gap_slo:g} ms"))
        handles.append(Line2D([], [], ls=":", marker="v", ms=4, color="gray",
                              label=f"token gap {stat} (dotted): the gaps between streamed tokens"))
    if any_star:
        handles.append(Line2D([], [], ls="", marker="*", ms=14, color="white", markeredgecolor="black",
                              label="planned point (most clients under every SLO line)" if show_gap
                              else "planned point (most clients under both SLOs)"))
    if len(stats) > 1:
        handles.append(Line2D([], [], ls="--", marker="s", ms=4, color="gray", label=f"{stat} (dashed)"))
        handles.append(Line2D([], [], ls="-", marker="o", ms=3, color="gray", alpha=0.55,
                              label=", ".join(s for s in stats if s != stat) + " (thin)"))
    if any_over:
        handles.append(Line2D([], [], ls="", marker="x", ms=10, mew=2, color="#d62728",
                              label="OVERLOADED: served < offered, the queue grew"))
    rate = cols["_xname"] == "request rate"
    target = (plan or {}).get("target") or {}
    open_note = (f"closed loop; the plan is read open loop at {target['requests_per_s']:g} req/s"
                 if (plan or {}).get("open_loop") and not rate and target.get("requests_per_s") else "")
    for ax, what in ((ax_t, "TTFT"), (ax_i, "ITL / token gap" if show_gap else "ITL")):
        swept = sorted(set(cols["_x"]))
        if rate:   # offered rates: a linear axis, every swept rate labelled
            ax.set_xticks(swept, [f"{v:g}" for v in swept])
            ax.set_xlabel(cols["_xlabel"])
            ax.set_ylabel(f"{what} (ms)" if len(stats) > 1 else f"{what} {stat} (ms)")
            ax.set_title(f"{what} {' and '.join(stats)} vs {cols['_xname']}")
            ax.set_ylim(bottom=0, top=tops[ax] if tops[ax] else None)
            ax.grid(True, which="both", alpha=0.3)
            continue
        ax.set_xscale("log", base=2)
        spaced = all(b >= 1.7 * a for a, b in zip(swept, swept[1:]))   # labels that do not touch
        if len(swept) <= 12 and spaced:   # label every swept concurrency, not just every other power of two
            ax.set_xticks(swept)
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        elif len(swept) <= 24:  # the powers of two (and the last point) labelled, the others ticked
            major = [v for v in swept if v >= 1 and float(v).is_integer() and (int(v) & (int(v) - 1)) == 0]
            # The last point (where a plan's sweep ends) always gets a label; a power of two closer
            # than 1.7x below it gives its label up (1024 and 1536 collide at the chart's width).
            below = [v for v in major if v < swept[-1]]
            if below and swept[-1] < 1.7 * below[-1]:
                major.remove(below[-1])
            major = major + [swept[-1]]
            ax.set_xticks(sorted(set(major)))
            ax.set_xticks([v for v in swept if v not in major], minor=True)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            for sax, sx, sy, sc in stars:   # a planned point on an unlabelled tick: its clients beside it
                if sax is ax and sx not in major:
                    ax.annotate(f"{sx:g}", (sx, sy), xytext=(0, 11), textcoords="offset points", ha="center",
                                va="bottom", fontsize=8, color=sc, fontweight="bold")
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel(cols["_xlabel"])
        ax.set_ylabel(f"{what} (ms)" if len(stats) > 1 else f"{what} {stat} (ms)")
        # An open-loop plan's chart is its closed-loop sweep: say so, and where the plan was read.
        ax.set_title(f"{what} {' and '.join(stats)} vs {cols['_xname']}" + (open_note and "\n" + open_note),
                     fontsize=10 if open_note else None)
        ax.set_ylim(bottom=0, top=tops[ax] if tops[ax] else None)
        ax.grid(True, which="both", alpha=0.3)
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=9, frameon=False)
    title = title if title is not None else default_title(plan)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def _spread_labels(ax, xs, ys, labels, color, placed):
    """Writes the concurrency next to each point, skipping a label that would overlap one already
    written (in screen space, `placed`, shared by all curves), so the low end stays readable."""
    ax.figure.canvas.draw()
    for x, y, t in zip(xs, ys, labels):
        px, py = ax.transData.transform((x, y))
        if any(abs(px - qx) < 22 and abs(py - qy) < 12 for qx, qy in placed):
            continue
        placed.append((px, py))
        ax.annotate(t, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points", color=color)


def throughput_figure(sweep, title=None, plan=None):
    """Output tokens/s per GPU against mean output tokens/s per user, one curve per topology;
    points labelled with their concurrency, planned points starred, the ITL SLO's least tokens/s
    per user as a line when a plan is given."""
    import matplotlib.pyplot as plt

    cols = _columns(sweep)
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    planned = {t["name"]: t for t in (plan or {}).get("topologies", [])}
    groups = list(_by_topology(cols).items())
    any_star = False
    for k, (name, idx) in enumerate(groups):
        c = COLORS[k % len(COLORS)]
        xs = [cols["output_tps_per_user"][i] for i in idx]
        ys = [cols["output_tps_per_gpu"][i] for i in idx]
        ax.plot(xs, ys, "o-", color=c, label=_gpu_label(cols, name, idx), ms=4)
        p = planned.get(name)
        if p and p.get("max_concurrency"):
            j = [i for i in idx if cols["_x"][i] == p["max_concurrency"]]
            if j:
                ax.plot([cols["output_tps_per_user"][j[0]]], [cols["output_tps_per_gpu"][j[0]]], marker="*", ms=16,
                        color=c, markeredgecolor="black", zorder=5)
                any_star = True
    ax.set_xlabel("output tokens/s per user (mean)")
    ax.set_ylabel("output tokens/s per GPU")
    itl = (plan or {}).get("itl_ms")
    if itl:
        ax.axvline(1000.0 / itl, color="gray", ls="--", lw=1.2,
                   label=f"ITL SLO {itl:g} ms: at least {1000.0 / itl:.3g} tok/s per user")
    if any_star:
        ax.plot([], [], ls="", marker="*", ms=14, color="white", markeredgecolor="black", label="planned point")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    placed = []
    for k, (name, idx) in enumerate(groups):
        _spread_labels(ax, [cols["output_tps_per_user"][i] for i in idx], [cols["output_tps_per_gpu"][i] for i in idx],
                       [f"{cols['_x'][i]:g}" for i in idx], COLORS[k % len(COLORS)], placed)
    t = title if title is not None else default_title(plan)
    ax.set_title((t + "\n" if t else "") + f"Throughput per GPU vs per user (labels: {cols['_xname']})", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def _family_styles(families):
    """Colour by hardware, line style by topology: a family is "<kind> <GPU or GPU+GPU>"; with
    one hardware alone the kinds take the colours. Returns {family: (colour, line style, marker)}."""
    kinds, hws = [], []
    for f in families:
        kind, _, hw = f.partition(" ")
        kinds.append(kind)
        if hw not in hws:
            hws.append(hw)
    out = {}
    for f, kind in zip(families, kinds):
        hw = f.partition(" ")[2]
        agg = kind.startswith("agg")
        c = COLORS[(hws.index(hw) if len(hws) > 1 else (0 if agg else 1)) % len(COLORS)]
        out[f] = (c, "-" if agg else "--", "o" if agg else "s")
    return out


def _usd_per_m(usd_per_gpu_hour, tps_per_gpu):
    """$ per million output tokens of a GPU at a price and a rate (None without either)."""
    if usd_per_gpu_hour is None or not tps_per_gpu or tps_per_gpu <= 0:
        return None
    return usd_per_gpu_hour / (tps_per_gpu * 3600.0) * 1e6


def search_figure(result, title=None, per=None):
    """The Pareto chart of a search (``servesim search --format json`` / servesim.search()): every
    simulated point per topology family (faint; filled when it meets both SLOs), each family's
    frontier of output tok/s per GPU against tok/s per user (colour: GPU type; solid: aggregated,
    dashed: disaggregated), the ITL SLO as the per-user rate it implies (1000 / ITL ms, a vertical
    line), and the best configuration under the SLO (a star). When the configurations have prices
    a second panel puts the same frontiers per dollar: $ per million output tokens (a GPU-hour's
    price, nodes' price over their GPUs, over an hour of its tokens; lower is better), where GPU
    types of different prices compare. ``per``: ("gpu",), ("dollar",) or both (default: both when
    priced). The legend sits beside the axes."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mt

    if not isinstance(result, dict) or "frontiers" not in result or "sweep" not in result:
        raise ValueError("expected a search result (servesim search --format json)")
    cols = result["sweep"]["columns"]
    priced = any(v is not None for v in cols.get("usd_per_gpu_hour", []))
    panels = tuple(per) if per else (("gpu", "dollar") if priced else ("gpu",))
    for p in panels:
        if p not in ("gpu", "dollar"):
            raise ValueError(f"per: unknown panel '{p}'; known: gpu, dollar")
    if "dollar" in panels and not priced:
        raise ValueError("per dollar: no configuration of this search has a price (give --price or --hw-file)")
    fig, axes = plt.subplots(1, len(panels), figsize=(11 + 5.5 * (len(panels) - 1), 5.6), squeeze=False)
    styles = _family_styles([f["family"] for f in result["frontiers"]
                             if "+" not in f["family"].partition(" ")[2] or f["family"] == (result.get("best") or {}).get("family")])
    usd_col = cols.get("usd_per_gpu_hour", [None] * len(cols.get("family", [])))
    stat = result.get("statistic", "p50")
    for ax, panel in zip(axes[0], panels):
        dollar = panel == "dollar"

        def y_of(tps, usd):
            return _usd_per_m(usd, tps) if dollar else tps

        def keep(xs, ys):
            pairs = [(a, b) for a, b in zip(xs, ys) if b is not None]
            return [a for a, _ in pairs], [b for _, b in pairs]

        best_family = ((result.get("best") or {}).get("family")
                       or next((f["family"] for f in result["frontiers"]
                                if any(p.get("label") == (result.get("best") or {}).get("label") for p in f["frontier"])), None))
        # Prefill on one GPU type and decode on another: one grey cloud with one legend entry (the
        # recommend table lists them apart), not a line and a colour each; a winning pair keeps its line.
        mixed = [f for f in result["frontiers"] if "+" in f["family"].partition(" ")[2] and f["family"] != best_family]
        if mixed:
            idx = [i for i, fam in enumerate(cols.get("family", [])) if fam in {f["family"] for f in mixed}]
            for meets, kw in ((True, dict(color="#999999", alpha=0.35, linewidths=0)),
                              (False, dict(facecolors="none", edgecolors="#999999", alpha=0.35, linewidths=0.6))):
                sel = [i for i in idx if bool(cols["meets_slo"][i]) == meets]
                xs, ys = keep([cols["output_tps_per_user"][i] for i in sel],
                              [y_of(cols["output_tps_per_gpu"][i], usd_col[i]) for i in sel])
                ax.scatter(xs, ys, s=10, marker="s", gid="mixed-pairs", **kw,
                           label=(f"prefill and decode on different GPU types ({len(mixed)} pairs, "
                                  f"{sum(f['simulated_points'] for f in mixed)} points)") if meets else None)
        for f in result["frontiers"]:
            if f in mixed:
                continue
            c, ls, mk = styles[f["family"]]
            idx = [i for i, fam in enumerate(cols.get("family", [])) if fam == f["family"]]
            if idx:
                for meets, kw in ((True, dict(color=c, alpha=0.3, linewidths=0)),
                                  (False, dict(facecolors="none", edgecolors=c, alpha=0.3, linewidths=0.6))):
                    sel = [i for i in idx if bool(cols["meets_slo"][i]) == meets]
                    xs, ys = keep([cols["output_tps_per_user"][i] for i in sel],
                                  [y_of(cols["output_tps_per_gpu"][i], usd_col[i]) for i in sel])
                    ax.scatter(xs, ys, s=10, marker=mk, **kw)
            fr = f["frontier"]
            if fr:
                # The line joins the frontier; its markers say which points meet both SLOs (filled) and
                # which fail one (open), so a frontier point over the TTFT line never reads as a pass.
                xs, ys = keep([p["output_tps_per_user"] for p in fr],
                              [y_of(p["output_tps_per_gpu"], p.get("usd_per_gpu_hour")) for p in fr])
                ax.plot(xs, ys, ls, color=c, lw=1.8, label=f"{f['family']} ({f['simulated_points']} points)")
                for ok, kw, gid in ((True, dict(color=c), "frontier-meets"),
                                    (False, dict(facecolors="white", edgecolors=c, linewidths=1.0), "frontier-fails")):
                    sel = [p for p in fr if bool(p.get("meets_slo")) == ok]
                    xs, ys = keep([p["output_tps_per_user"] for p in sel],
                                  [y_of(p["output_tps_per_gpu"], p.get("usd_per_gpu_hour")) for p in sel])
                    ax.scatter(xs, ys, s=22, marker=mk, zorder=4, gid=gid, **kw)
        itl = result.get("itl_ms")
        if itl:
            ax.axvline(1000.0 / itl, color="gray", ls=":", lw=1.4,
                       label=f"ITL SLO {itl:g} ms ({stat}) = {1000.0 / itl:.3g} tok/s/user")
        best = result.get("best")
        if best and best.get("score"):
            s = best["score"]
            y = s["tps_per_gpu"]
            if dollar:
                y = (s["usd_per_hour"] / (s["served_tps"] * 3600.0) * 1e6
                     if s.get("usd_per_hour") is not None and s.get("served_tps") else None)
            if y is not None:
                ax.plot([s["tps_per_user"]], [y], marker="*", ms=18, color="gold", markeredgecolor="black",
                        zorder=6, ls="none", label="best under SLO: " + best["label"])
        ax.set_xlabel("output tokens/s per user")
        ax.set_ylabel("USD per million output tokens (lower is better)" if dollar else "output tokens/s per GPU")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(mt.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(mt.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(mt.NullFormatter())
        if dollar:
            ax.set_yscale("log")
            # 1-2-5 ticks, each labelled: a span under a decade would otherwise show one label.
            ax.yaxis.set_major_locator(mt.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(mt.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(mt.NullFormatter())
            ax.set_title("per dollar: GPU-hour price / an hour of its tokens (best: its whole nodes at the target)",
                         fontsize=9)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
    vision = result.get("vision_tokens_per_request") or 0
    images = (f" (+ {vision} vision tokens on {100 * result.get('image_fraction', 1):.0f} % of requests)" if vision else "")
    head = title or (f"{result.get('model', '')}: ISL {result.get('isl')}{images} / OSL {result.get('osl')}, "
                     f"SLO TTFT {stat} <= {result.get('ttft_ms', 0):g} ms, ITL {stat} <= {result.get('itl_ms', 0):g} ms "
                     f"(filled: meets both; open: fails one)")
    if len(panels) > 1:
        fig.suptitle(head, fontsize=10)
    else:
        axes[0][0].set_title(head, fontsize=10)
    axes[0][-1].legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False,
                       title="frontier per family", title_fontsize=8)
    fig.tight_layout()
    return fig


def save_search_chart(result, path, title=None, per=None):
    """Writes the Pareto chart of a search result to `path`; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    return _write_figure(search_figure(result, title=title, per=per), path)


def _write_figure(fig, path):
    """Saves `fig` to `path` through a temporary beside it, closes it; returns the path."""
    import os

    import matplotlib.pyplot as plt
    try:
        tmp = _save_atomic(fig, path)
    finally:
        plt.close(fig)
    os.replace(tmp, path)
    return path


def save_cost_chart(result, path, title=None):
    """Writes the $/hour chart of a recommend result (cost_figure) to `path`; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    return _write_figure(cost_figure(result, title=title), path)


def cost_figure(result, title=None, top=8):
    """The manager's chart of a recommend result (``servesim recommend --format json``): $/hour of
    the cheapest deployment per GPU type (every one) and the cheapest prefill/decode pairs of two
    types (up to `top` bars in all), cheapest first, hatched when
    disaggregated, each bar labelled with its GPUs, nodes and $ per million output tokens, the
    winner outlined. Rows without a price are left out (named in the title)."""
    import matplotlib.pyplot as plt
    priced = [r for r in result["recommendations"] if r.get("usd_per_hour") is not None]
    # Every GPU type asked about keeps its bar; prefill/decode pairs of two types fill up to `top`.
    single = [r for r in priced if "+" not in r["gpu"]]
    pairs = [r for r in priced if "+" in r["gpu"]][:max(0, top - len(single))]
    rows = sorted(single + pairs, key=lambda r: r["usd_per_hour"])
    unpriced = [r["gpu"] for r in result["recommendations"] if r.get("usd_per_hour") is None]
    fig, ax = plt.subplots(figsize=(9, 0.55 * max(3, len(rows)) + 1.4))
    names = [f"{r['gpu']}\n{r['instance']}" for r in rows]
    usd = [r["usd_per_hour"] for r in rows]
    for i, r in enumerate(rows):
        ax.barh(i, usd[i], color="#2ca02c" if i == 0 else "#9ab8d3", edgecolor="black", linewidth=1.6 if i == 0 else 0.5,
                hatch="//" if r["kind"] == "disaggregated" else None)
        per_m = r.get("usd_per_million_output_tokens")
        layout = r.get("label", "").split(" seqs ")[0]   # "agg TP1 B200 nvfp4": the engine knobs are in the table
        ax.text(usd[i], i, f"  {usd[i]:,.2f} USD/h: {r['gpus']} GPUs, {r['nodes']} node{'s' if r['nodes'] != 1 else ''}"
                           + (f", {per_m:.2f} USD/M output tok" if per_m is not None else "") + f"\n  {layout}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("USD per hour (catalogue prices or --price; hatched: disaggregated)")
    ax.set_xlim(0, max(usd) * 1.9 if usd else 1)
    load = result["objective"]["target_tps"]
    how = (f"{result['target_rps']:g} req/s, {result['arrival']} arrivals" if "arrival" in result
           else f"{load:g} output tok/s, closed loop")
    ax.set_title(title or f"{result['model']}: cheapest deployment per GPU type\nmeeting TTFT {result['statistic']} <= "
                          f"{result['ttft_ms']:g} ms and ITL {result['statistic']} <= {result['itl_ms']:g} ms at {how}"
                 + (f"\n(no price: {', '.join(unpriced)})" if unpriced else ""), fontsize=9)
    fig.tight_layout()
    return fig


def load_figure(sweep, ttft_ms, itl_ms, statistic="p90", peak_rps=None, title=None):
    """Headroom at a glance: TTFT and ITL (at `statistic`) against the offered request rate of an
    open-loop sweep (``servesim sweep --request-rate ... --format json``), the SLO lines, the peak
    rate, and the highest swept rate that meets both and keeps up (not OVERLOADED: the capacity
    read off the sweep)."""
    import matplotlib.pyplot as plt
    c = _columns(sweep)
    x = list(c["request_rate"])
    t, i = list(c[f"ttft_{statistic}_ms"]), list(c[f"itl_{statistic}_ms"])
    over = c.get("overloaded") or [None] * len(x)   # served < offered: fails whatever its percentiles read
    ok = [a <= ttft_ms and b <= itl_ms and not o for a, b, o in zip(t, i, over)]
    cap = max([r for r, k in zip(x, ok) if k], default=None)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, y, slo, name in ((axes[0], t, ttft_ms, "TTFT"), (axes[1], i, itl_ms, "ITL")):
        ax.plot(x, y, "-", color="#1f77b4")
        ax.scatter([a for a, k in zip(x, ok) if k], [b for b, k in zip(y, ok) if k], color="#1f77b4", zorder=3,
                   label="meets both SLOs")
        ax.scatter([a for a, k in zip(x, ok) if not k], [b for b, k in zip(y, ok) if not k], facecolors="none",
                   edgecolors="#d62728", zorder=3, label="fails an SLO")
        ax.axhline(slo, color="#d62728", ls="--", lw=1)
        ax.text(x[0], slo, f" SLO {slo:g} ms", color="#d62728", va="bottom", fontsize=8)
        if peak_rps:
            ax.axvline(peak_rps, color="gray", ls=":", lw=1)
            ax.text(peak_rps, ax.get_ylim()[1] * 0.95, " peak", color="gray", fontsize=8, va="top")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.set_xlabel("offered load (requests/s, open loop)")
        ax.set_ylabel(f"{name} {statistic} (ms)")
        ax.set_ylim(0, max(max(y), slo) * 1.15)
    axes[0].legend(fontsize=8, loc="upper left")
    head = (f"capacity {cap:g} req/s (highest swept rate meeting both)" if cap is not None else "no swept rate meets both SLOs")
    if cap is not None and peak_rps:
        head += f", {100 * (cap / peak_rps - 1):+.0f} % over the {peak_rps:g} req/s peak"
    fig.suptitle(title + "\n" + head if title else head, fontsize=10)
    fig.tight_layout()
    return fig


def _save_atomic(fig, path):
    """savefig into a temporary file beside `path`; returns the temporary's name."""
    import os
    import tempfile
    folder = os.path.dirname(os.path.abspath(path))
    # ".NAME.tmp.PID.XXXXXX", as servesim names its temporaries: a later run removes one whose
    # process is gone.
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp." + str(os.getpid()) + ".", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
        # mkstemp creates 0600: give the chart the usual 0666 & ~umask, as its data files have.
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def chart_paths(path):
    """The latency chart and the throughput chart written for `path` ('x' or 'x.png')."""
    base = path[:-4] if path.lower().endswith(".png") else path
    return base + ".png", base + "-throughput.png"


def save_charts(sweep, path, plan=None, title=None, statistic=None, ttft_ms=None, itl_ms=None, gap_ms=None):
    """Writes the latency chart to `path` (.png added when missing) and the throughput chart beside
    it (`*-throughput.png`), both or neither: each is rendered to a temporary file, and they are
    renamed into place only when both are written. Returns both paths."""
    import os

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lpath, tpath = chart_paths(path)
    tmps = []
    try:
        fig = latency_figure(sweep, plan=plan, title=title, statistic=statistic, ttft_ms=ttft_ms, itl_ms=itl_ms, gap_ms=gap_ms)
        try:
            tmps.append(_save_atomic(fig, lpath))
        finally:
            plt.close(fig)
        fig = throughput_figure(sweep, title=title, plan=plan)
        try:
            tmps.append(_save_atomic(fig, tpath))
        finally:
            plt.close(fig)
        os.replace(tmps[0], lpath)
        tmps[0] = None
        os.replace(tmps[1], tpath)
        tmps[1] = None
    finally:
        for t in tmps:
            if t:
                os.unlink(t)
    return lpath, tpath


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

    import os

    fig = validation_figure(result, title=title)
    try:
        tmp = _save_atomic(fig, path)
    finally:
        plt.close(fig)
    os.replace(tmp, path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m servesim.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", nargs="?", help="sweep JSON (servesim sweep --format json, or a plan's 'sweep' member)")
    ap.add_argument("--validation", help="servesim validate --format json output: predicted vs measured chart")
    ap.add_argument("--search", help="search JSON (servesim search --format json): draw its Pareto chart")
    ap.add_argument("--plan", help="plan JSON (servesim plan --format json)")
    ap.add_argument("-o", "--output", default="servesim.png", help="PNG to write")
    ap.add_argument("--title", help="chart title (default: model, hardware, precision and ISL/OSL of the plan)")
    ap.add_argument("--statistic", choices=("p50", "p90", "p99"),
                    help="draw this percentile only (default: p50 solid and p90 dashed; a plan's own statistic)")
    ap.add_argument("--ttft-ms", type=float, help="TTFT SLO line (ms) when no plan gives one")
    ap.add_argument("--itl-ms", type=float, help="ITL SLO line (ms) when no plan gives one")
    ap.add_argument("--gap-ms", type=float, help="token-gap SLO line (ms): also draw the gap between streamed tokens "
                                                 "(sweep columns token_gap_ms_*) on the ITL panel")
    ap.add_argument("--cost", help="--search of a recommend result: also write its $/hour chart (cost_figure) here")
    ap.add_argument("--per", choices=("gpu", "dollar", "both"),
                    help="--search: frontier per GPU, per dollar ($/M output tokens) or both (default: both when priced)")
    a = ap.parse_args(argv)
    # Every failure is one line on stderr and exit status 2: no traceback.
    if a.validation:
        try:
            with open(a.validation) as f:
                result = json.load(f)
            print(save_validation_chart(result, a.output, title=a.title))
        except RecursionError:
            print(f"servesim.plot: error: {a.validation}: JSON nested too deeply", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            print(f"servesim.plot: error: {a.validation}: {_one_line(e)}", file=sys.stderr)
            return 2
        return 0
    if a.search:
        try:
            with open(a.search) as f:
                result = json.load(f)
            per = None if not a.per or a.per == "both" else (a.per,)
            print(save_search_chart(result, a.output, title=a.title, per=per))
            if a.cost:
                print(save_cost_chart(result, a.cost))
        except RecursionError:
            print(f"servesim.plot: error: {a.search}: JSON nested too deeply", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            print(f"servesim.plot: error: {a.search}: {_one_line(e)}", file=sys.stderr)
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
    except RecursionError:
        print(f"servesim.plot: error: {a.sweep}: JSON nested too deeply", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"servesim.plot: error: {_one_line(e)}", file=sys.stderr)
        return 2
    try:
        paths = save_charts(sweep, a.output, plan=plan, title=a.title, statistic=a.statistic, ttft_ms=a.ttft_ms,
                            itl_ms=a.itl_ms, gap_ms=a.gap_ms)
    except OSError as e:
        print(f"servesim.plot: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, IndexError, TypeError) as e:
        print(f"servesim.plot: error: {a.sweep}: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the CLI promises one line, never a traceback
        print(f"servesim.plot: error: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


def _one_line(e):
    if isinstance(e, OSError) and e.strerror and e.filename:
        return f"{e.filename}: {e.strerror}"
    return " ".join(str(e).split())


if __name__ == "__main__":
    sys.exit(main())
