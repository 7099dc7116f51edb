"""`servesim sweep --vs FLAGS` (the what-if): each variant runs exactly as the sweep of the base's
flags with its own in their place, the table's changes are the figures' ratios, a variant that
cannot run is one line before anything runs, and --plot draws a curve per scenario."""
import json
import os
import subprocess

import pytest

BIN = os.environ.get("SERVESIM_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="needs the servesim binary (ctest sets SERVESIM_BIN)")

COMMON = ["sweep", "-q", "--model", "nemotron-3-nano", "--tp", "1", "--gpus", "1", "--osl", "100", "--requests", "100",
          "--concurrency", "1,8"]


def run(*args, cwd=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def sweep_json(*args):
    r = run(*args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_each_variant_is_the_sweep_of_its_merged_flags():
    j = sweep_json(*COMMON, "--gpu", "h200", "--isl", "1000", "--vs", "--isl 2000 --no-frontend", "--vs", "--gpu h100")
    assert j["axis"] == "concurrency" and j["values"] == [1, 8]
    assert [(s["label"], s["vs"]) for s in j["scenarios"]] == [("base", ""), ("A", "--isl 2000 --no-frontend"),
                                                                ("B", "--gpu h100")]
    for s, flags in zip(j["scenarios"], (["--gpu", "h200", "--isl", "1000"],
                                         ["--gpu", "h200", "--isl", "2000", "--no-frontend"],
                                         ["--gpu", "h100", "--isl", "1000"])):
        direct = sweep_json(*COMMON, *flags)
        assert s["columns"] == {k: v for k, v in direct.items() if k not in ("what_ran", "input_config")}
        assert s["what_ran"] == direct["what_ran"]


def test_the_table_gives_each_change_against_the_base():
    args = (*COMMON, "--gpu", "h200", "--isl", "1000", "--vs", "--isl 4000")
    cols = [s["columns"] for s in sweep_json(*args)["scenarios"]]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.split()[:2] in (["1", "A"], ["8", "A"])]
    assert len(rows) == 2
    for i, row in enumerate(rows):
        def pct(key):
            return f"{100 * (cols[1][key][i] / cols[0][key][i] - 1):+.0f}"
        # ... vs base: TTFT p50, ITL p50, tok/s/GPU, each "+12 %"
        assert row[-6:] == [pct("time_to_first_token_ms_p50"), "%", pct("inter_token_latency_ms_p50"), "%",
                            pct("output_token_throughput_per_gpu"), "%"]
    assert "B = " not in r.stdout and "A = --isl 4000:" in r.stdout


@pytest.mark.parametrize("vs, says", [
    ("", "--vs: is empty"),
    ("--bogus 3", "--bogus is not a flag of servesim sweep"),
    ("--concurrency 4", "--concurrency is the sweep's own, shared by every scenario"),
    ("--precision nvfp9", "--precision: unknown precision 'nvfp9'"),
    ('"--isl 5', "a double quote is not closed"),
])
def test_a_variant_that_cannot_run_is_one_line(vs, says):
    r = run(*COMMON, "--gpu", "h200", "--isl", "1000", "--vs", vs)
    assert r.returncode != 0 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("servesim: error: --vs: ") and says in r.stderr


def test_plot_draws_a_curve_per_scenario(tmp_path):
    r = run(*COMMON, "--gpu", "h200", "--isl", "1000", "--vs", "--isl 2000", "--plot", "w.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "w.png").stat().st_size > 0 and (tmp_path / "w-throughput.png").stat().st_size > 0
    data = json.loads((tmp_path / "w-sweep.json").read_text())["columns"]
    assert data["topology"] == ["base", "base", "A: --isl 2000", "A: --isl 2000"]
    assert data["concurrency"] == [1, 8, 1, 8]


def test_python_what_if_is_the_sweep_of_each_variant():
    import servesim
    from servesim import plot
    base = dict(model="nemotron-3-nano", gpu="h200", gpus=1, tp=1, isl=1000, osl=100, requests=100)
    r = servesim.what_if(variants=[{"isl": 2000}, {"gpu": "h100"}], concurrency=[1, 8], **base)
    assert r["labels"] == ["base", "A", "B"] and r["variants"] == {"A": {"isl": 2000}, "B": {"gpu": "h100"}}
    c = r["columns"]
    assert c["scenario"] == ["base", "base", "A", "A", "B", "B"] and c["concurrency"] == [1, 8] * 3
    b0 = servesim.sweep(servesim.scenario(**base), concurrency=[1, 8])
    for k, extra in ((0, {}), (1, {"isl": 2000}), (2, {"gpu": "h100"})):
        direct = servesim.sweep(servesim.scenario(**{**base, **extra}), concurrency=[1, 8])
        for n, v in direct.items():
            assert c[n][2 * k:2 * k + 2] == v
        for i in range(2):   # the change against the base at the same point, by hand
            want = None if k == 0 else 100 * (direct["output_token_throughput_per_gpu"][i] /
                                              b0["output_token_throughput_per_gpu"][i] - 1)
            assert c["change_tok_s_per_gpu_pct"][2 * k + i] == (None if want is None else pytest.approx(want))
    assert list(servesim.frame(r)["scenario"]) == c["scenario"]
    fig = plot.latency_figure(r)   # a curve per scenario, labelled with its flags
    assert [h.get_label() for h in fig.axes[0].get_lines() if h.get_label().startswith(("base", "A:", "B:"))][:3] == \
        ["base", "A: isl=2000", "B: gpu=h100"]
    with pytest.raises(servesim.Error, match="what_if\\(\\): variants: give at least one"):
        servesim.what_if(concurrency=[1], **base)
