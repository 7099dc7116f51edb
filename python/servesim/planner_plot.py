"""Chart of a planner run: offered load and workers against time (top), p90 TTFT and ITL with the
SLO lines (bottom).

    python3 -m servesim.planner_plot PLANNER.json OUT.png
"""
import json
import os
import sys


def draw(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = result["timeline"]
    hours = [x["start_s"] / 3600.0 for x in tl]
    fig, (a, b) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
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
    b.plot(hours, [x["ttft_p90_ms"] if x["ttft_p90_ms"] is not None else nan for x in tl], color="tab:green", label="TTFT p90")
    slo = result["slo"]
    if slo.get("ttft_ms"):
        b.axhline(slo["ttft_ms"], color="tab:green", ls=":", lw=0.8)
    b.set_ylabel("TTFT p90 (ms)")
    c = b.twinx()
    c.plot(hours, [x["itl_p90_ms"] if x["itl_p90_ms"] is not None else nan for x in tl], color="tab:purple", label="ITL p90")
    if slo.get("itl_ms"):
        c.axhline(slo["itl_ms"], color="tab:purple", ls=":", lw=0.8)
    c.set_ylabel("ITL p90 (ms)")
    b.set_xlabel("hour")
    lines = b.get_legend_handles_labels()[0] + c.get_legend_handles_labels()[0]
    b.legend(lines, [l.get_label() for l in lines], loc="upper left", fontsize=8)
    fig.tight_layout()
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
