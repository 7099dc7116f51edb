"""plan() through the bindings: the replica arithmetic by hand, equality with the CLI, charts."""
import math
import os

import pytest

import servesim

# A small study that runs in seconds: Nemotron 3 Nano on one p5en.48xlarge.
ARGS = dict(model="nemotron-3-nano", instance="p5en.48xlarge", nodes=1, precision="bf16", isl=1000, osl=100,
            ttft_ms=300, itl_ms=20, target_tps=20000, concurrency=[1, 4, 16, 64], requests=100)


@pytest.fixture(scope="module")
def plan():
    return servesim.plan(**ARGS)


def test_plan_replicas_by_hand(plan):
    inst = next(i for i in servesim.instances() if i["name"] == "p5en.48xlarge")
    assert [t["name"] for t in plan["topologies"]] == ["aggregated", "disaggregated-1p1d"]
    cols = plan["sweep"]["columns"]
    for t in plan["topologies"]:
        if not t["feasible"]:
            continue
        # The planned point is the rightmost concurrency under both SLO lines (at the plan's statistic, p90 by default).
        assert plan["statistic"] == "p90"
        st = plan["statistic"]
        ok = [c for n, c, tt, it in zip(cols["topology"], cols["concurrency"], cols[f"ttft_{st}_ms"], cols[f"itl_{st}_ms"])
              if n == t["name"] and tt <= 300 and it <= 20]
        assert t["max_concurrency"] == max(ok)
        i = next(i for i, (n, c) in enumerate(zip(cols["topology"], cols["concurrency"]))
                 if n == t["name"] and c == t["max_concurrency"])
        assert t["tps_per_replica"] == pytest.approx(cols["output_tps"][i])
        assert t["replicas"] == math.ceil(20000 / t["tps_per_replica"])
        assert t["gpus"] == t["replicas"] * t["gpus_per_replica"]
        assert t["usd_per_hour"] == pytest.approx(t["instances"] * inst["usd_per_hour"])


def test_headroom_sizes_the_copies_for_the_target_plus_its_share(plan):
    # headroom=0.6 (--headroom): every topology is sized for 20000 x 1.6 = 32000 tok/s, as a plan for
    # that target is, from the same sweep; the result still names the 20000 asked for.
    h = servesim.plan(**ARGS, headroom=0.6)
    big = servesim.plan(**{**ARGS, "target_tps": 32000})
    assert h["target"] == {"output_tps": 20000, "headroom": 0.6, "sized_output_tps": pytest.approx(32000)}
    assert h["sweep"] == plan["sweep"]
    for t, b, p in zip(h["topologies"], big["topologies"], plan["topologies"]):
        assert (t["replicas"], t["gpus"], t["usd_per_hour"]) == (b["replicas"], b["gpus"], b["usd_per_hour"])
        if t["feasible"]:
            assert t["replicas"] == math.ceil(32000 / t["tps_per_replica"]) >= p["replicas"]
        # spare capacity over the 20000 asked for: at least the copies x what one serves at its SLO point
        if t["feasible"]:
            assert t["spare_pct"] == {"lo": pytest.approx(100 * (t["replicas"] * t["tps_per_replica"] / 20000 - 1)), "hi": None}
            assert t["spare_pct"]["lo"] >= 60 - 1e-9
    with pytest.raises(servesim.Error, match="headroom: must be a fraction of the load target from 0 to 10"):
        servesim.plan(**ARGS, headroom=-0.1)


def test_a_gap_slo_reads_the_gap_columns(plan):
    # --gap-ms (gap_ms=): the ITL side also holds the gap between streamed tokens; the planned point
    # is the rightmost under all three lines, read off the sweep's gap columns.
    g = servesim.plan(**ARGS, gap_ms=5)
    assert g["slo"]["gap_ms"] == 5 and g["gap_ms"] == 5
    cols = g["sweep"]["columns"]
    for t in g["topologies"]:
        ok = [c for n, c, tt, it, gp in zip(cols["topology"], cols["concurrency"], cols["ttft_p90_ms"], cols["itl_p90_ms"],
                                            cols["gap_p90_ms"]) if n == t["name"] and tt <= 300 and it <= 20 and gp <= 5]
        assert t["feasible"] == bool(ok)
        if ok:
            assert t["max_concurrency"] == max(ok)
    assert plan["slo"]["gap_ms"] == 0   # none given
    # 5 ms binds: the aggregated copy's p90 gap passes it at 16 clients, not at 64, which met the
    # other two lines.
    agg = [t for t in g["topologies"] if t["name"] == "aggregated"][0]
    assert agg["max_concurrency"] < [t for t in plan["topologies"] if t["name"] == "aggregated"][0]["max_concurrency"]


def test_a_gap_slo_is_drawn_on_the_itl_panel():
    # The chart of a plan with --gap-ms draws the gap (dotted) and its SLO line beside ITL's.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    g = servesim.plan(**ARGS, gap_ms=5)
    fig = plot.latency_figure(g["sweep"], g)
    ax_i = fig.axes[1]
    assert ax_i.get_title().startswith("ITL / token gap p90")
    dotted = [l for l in ax_i.get_lines() if l.get_linestyle() == ":"]
    assert len(dotted) == len(g["topologies"])
    assert list(dotted[0].get_ydata()) == [y for n, y in zip(g["sweep"]["columns"]["topology"],
                                                            g["sweep"]["columns"]["gap_p90_ms"]) if n == "aggregated"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "SLO token gap 5 ms" in labels
    assert "SLO token gap" not in " ".join(t.get_text() for t in plot.latency_figure(g["sweep"], None).legends[0].get_texts())
    # A plain sweep (servesim sweep's token_gap_ms_* columns) with gap_ms= (python -m servesim.plot --gap-ms).
    sw = servesim.sweep(servesim.scenario(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, requests=100),
                        concurrency=[1, 8])
    fig = plot.latency_figure(sw, gap_ms=5, itl_ms=20)
    (dotted,) = [l for l in fig.axes[1].get_lines() if l.get_linestyle() == ":"]
    cols = sw["columns"] if "columns" in sw else sw
    assert list(dotted.get_ydata()) == list(cols["token_gap_ms_p90"])   # drawn at p90, the dashed statistic


def test_plan_equals_the_cli(plan, cli):
    c = cli("plan", "--model", "nemotron-3-nano", "--instance", "p5en.48xlarge", "--nodes", 1, "--precision", "bf16",
            "--isl", 1000, "--osl", 100, "--ttft-ms", 300, "--itl-ms", 20, "--target-tps", 20000,
            "--concurrency", "1,4,16,64", "--requests", 100, "--format", "json")
    assert plan == c
    df = servesim.frame(plan)
    assert list(df["name"]) == ["aggregated", "disaggregated-1p1d"]
    assert len(servesim.frame(plan["sweep"])) == 8


def test_plan_in_pieces_equals_the_whole(plan):
    args = dict(ARGS)
    n = servesim._servesim.plan_points(args)
    assert n == 8
    rows = [servesim._servesim.plan_point(args, i) for i in range(n)]
    assert servesim._servesim.plan_finish(args, rows) == plan


def test_charts_from_python(plan, tmp_path):
    from servesim import plot

    paths = plot.save_charts(plan["sweep"], str(tmp_path / "chart.png"), plan=plan, title="test")
    for p in paths:
        assert os.path.getsize(p) > 10_000
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_reads_a_plain_sweep_and_names_missing_columns(tmp_path, capsys):
    import json

    from servesim import plot
    cols = servesim.sweep(servesim.scenario(model="nemotron-3-super", gpu="h200", gpus=8, tp=8, precision="fp8",
                                            isl=500, osl=50, requests=100), concurrency=[1, 4])
    src = tmp_path / "sweep.json"
    src.write_text(json.dumps(cols))
    out = tmp_path / "s.png"
    assert plot.main([str(src), "-o", str(out)]) == 0
    assert out.stat().st_size > 10000 and (tmp_path / "s-throughput.png").stat().st_size > 10000
    bad = tmp_path / "bad.json"
    bad.write_text('{"concurrency": [1]}')
    assert plot.main([str(bad), "-o", str(tmp_path / "b.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no column ttft_p50_ms" in err[0]


def test_concurrency_labels_do_not_touch():
    # 1 ... 256 then 384, 512, 768 (plan's extension): neighbours closer than 1.7x would print into
    # each other, so the powers of two are labelled and 384 ticked; the last point, where the sweep
    # ends, keeps its label and 512 (closer than 1.7x below it) gives its up. A sweep of powers of
    # two labels every point.
    from servesim import plot
    import matplotlib.pyplot as plt

    def labelled(xs):
        n = len(xs)
        cols = {"concurrency": xs, "ttft_p50_ms": [10.0] * n, "itl_p50_ms": [5.0] * n,
                "output_tps_per_gpu": [1.0] * n, "output_tps_per_user": [1.0] * n}
        fig = plot.latency_figure(cols)
        ticks = [t for t in fig.axes[0].get_xticks() if xs[0] <= t <= xs[-1]]
        plt.close(fig)
        return ticks

    assert labelled([1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768]) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 768]
    assert labelled([1, 2, 4, 8, 16]) == [1, 2, 4, 8, 16]


def test_rate_sweep_chart_draws_p90_and_overload():
    # A rate sweep (servesim sweep --request-rate ... --format json): p50 thin and p90 dashed, a
    # linear axis labelled at every swept rate, SLO lines without a plan, the overloaded rate marked.
    from servesim import plot
    import matplotlib.pyplot as plt
    sweep = {"request_rate": [10, 20, 40, 60], "time_to_first_token_ms_p50": [100.0, 120.0, 200.0, 900.0],
             "time_to_first_token_ms_p90": [150.0, 180.0, 400.0, 3000.0],
             "inter_token_latency_ms_p50": [20.0, 22.0, 30.0, 40.0], "inter_token_latency_ms_p90": [25.0, 27.0, 38.0, 55.0],
             "output_token_throughput_per_gpu": [1.0] * 4, "output_token_throughput_per_user_avg": [1.0] * 4,
             "overloaded": [0.0, 0.0, 0.0, 1.0]}
    fig = plot.latency_figure(sweep, ttft_ms=1000, itl_ms=50)
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "40", "60"]
    ys = [list(l.get_ydata()) for l in ax.get_lines()]
    assert [150.0, 180.0, 400.0] == ys[1][:3]            # p90, dashed
    assert [100.0, 120.0, 200.0, 900.0] == ys[0]          # p50, thin
    assert any(l.get_marker() == "x" and list(l.get_xdata()) == [60] for l in ax.get_lines())
    assert any(list(l.get_ydata()) == [1000, 1000] for l in ax.get_lines())   # the TTFT SLO line
    assert "p50 and p90" in ax.get_title()
    plt.close(fig)


def test_calibration_on_plan_and_recommend():
    """A profile fitted on H200 (tests/sim/data: GEMM and attention 1.3x) slows the H200 plan's
    decode steps and leaves B200 candidates of a recommend as they were."""
    import os
    prof = os.path.join(os.environ.get("SERVESIM_SOURCE_DIR", "."), "tests", "sim", "data",
                        "h200-slow-kernels.calibration.json")
    kw = dict(model="llama-3.1-8b", isl=1000, osl=200, ttft_ms=500, itl_ms=30, topology="agg", concurrency=[1],
              requests=100, threads=1)
    base = servesim.plan(instance="p5en.48xlarge", nodes=1, tp=1, target_tps=5000, **kw)
    cal = servesim.plan(instance="p5en.48xlarge", nodes=1, tp=1, target_tps=5000, calibration=prof, **kw)
    ratio = cal["sweep"]["columns"]["itl_p50_ms"][0] / base["sweep"]["columns"]["itl_p50_ms"][0]
    assert 1.1 < ratio <= 1.3 + 1e-9
    assert "applies gemm_scale" in cal["calibration"]["summary"]
    rkw = dict(kw, gpu=["h200", "b200"], precision=["bf16"], tp=[1], dp=[1], target_tps=20000)
    rb = servesim.recommend(**rkw)
    rc = servesim.recommend(calibration=prof, **rkw)
    assert rc["calibration"]["uncalibrated_gpus"] == ["B200"]
    b = [c["score"] for c in rb["configurations"] if c["gpu"] == "B200"]
    c = [c["score"] for c in rc["configurations"] if c["gpu"] == "B200"]
    assert b == c


def test_open_loop_plan_brackets_its_spare_capacity():
    # Open loop at 200 requests/s: k copies met both SLOs at 200 / k each and f fewer failed at 200 / f,
    # so the k copies serve between 200 and 200 k / f requests/s: spare 0 to 100 (k / f - 1) %.
    p = servesim.plan(**{**ARGS, "target_tps": None}, target_rps=200, arrival="poisson")
    for t, d in zip(p["topologies"], p["open_loop"]):
        if not t["feasible"]:
            continue
        assert t["spare_pct"]["lo"] == pytest.approx(0, abs=1e-9)
        if "one_copy_fewer" in d:
            k, f = d["copies"], d["one_copy_fewer"]["copies"]
            assert f < k and t["spare_pct"]["hi"] == pytest.approx(100 * (k / f - 1))
        else:
            assert t["spare_pct"]["hi"] is None
