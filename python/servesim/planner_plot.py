"""Chart of a planner run: offered load and workers against time (top), then p90 TTFT and p90 ITL,
each in a panel of its own with its SLO line labelled (two axes on one panel had put both SLO lines
at its top edge, one over the other).

    python3 -m servesim.planner_plot PLANNER.json OUT.png
"""
import json
import os
import sys


def figure(result):
    """The chart of a planner result (``servesim planner --format json``) as a matplotlib figure."""
    import matplotlib.pyplot as plt

    tl = result["timeline"]
    hours = [x["start_s"] / 3600.0 for x in tl]
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True, gridspec_kw={"height_ratios": [1.3, 1, 1]})
    a.plot(hours, [x["offered_rps"] for x in tl], color="tab:gray", label="offered requests/s")
    a.plot(hours, [x["observed_rps"] for x in tl], color="tab:blue", lw=0.8, label="observed requests/s")
    a.set_ylabel("requests/s")
    w = a.twinx()
    roles = result.get("roles") or [{"name": "replica", "peak_workers": result["peak_workers"]}]
    colors = {"replica": "tab:red", "prefill": "tab:red", "decode": "tab:brown"}
    for r in roles:  # per role: workers holding GPUs, workers ready, the fixed fleet's count
        n, col = r["name"], colors.get(r["name"], "tab:red")
        label = "workers" if n == "replica" else n + " workers"
        w.step(hours, [x.get(n + "_held", x["workers_held"]) for x in tl], where="post", color=col, label=label + " (GPUs held)")
        w.step(hours, [x.get(n + "_ready", x["workers_ready"]) for x in tl], where="post", color=col, ls="--", lw=0.8,
               label=label + " ready")
        w.axhline(r["peak_workers"], color=col, ls=":", lw=0.8, label="fixed fleet" + ("" if n == "replica" else " " + n))
    w.set_ylabel("workers")
    lines = a.get_legend_handles_labels()[0] + w.get_legend_handles_labels()[0]
    a.legend(lines, [l.get_label() for l in lines], loc="upper left", fontsize=8)
    a.set_title(f"planner: {result['gpu_hours']:.1f} GPU-hours vs {result['fixed_fleet_gpu_hours']:.1f} fixed, "
                f"SLO met {100 * result['slo_attainment']:.1f} %")
    nan = float("nan")
    slo = result["slo"]
    for ax, key, name, color in ((b, "ttft", "TTFT", "tab:green"), (c, "itl", "ITL", "tab:purple")):
        ys = [x[key + "_p90_ms"] if x[key + "_p90_ms"] is not None else nan for x in tl]
        ax.plot(hours, ys, color=color, label=f"{name} p90 per interval")
        top = max([y for y in ys if y == y] or [1.0])
        if slo.get(key + "_ms"):
            ax.axhline(slo[key + "_ms"], color="tab:red", ls="--", lw=1, label=f"SLO {slo[key + '_ms']:g} ms")
            top = max(top, slo[key + "_ms"])
        ax.set_ylim(0, top * 1.45)   # the SLO line below the legend and the top edge, never on them
        ax.set_ylabel(f"{name} p90 (ms)")
        ax.legend(loc="upper left", fontsize=8)
    c.set_xlabel("hour")
    fig.tight_layout()
    return fig


def draw(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = figure(result)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3:
        print("servesim.planner_plot: error: usage: python3 -m servesim.planner_plot PLANNER.json OUT.png", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            result = json.load(f)
        draw(result, argv[2])
    except Exception as e:  # one line, as the CLI reports it
        print(f"servesim.planner_plot: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
