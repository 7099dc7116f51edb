"""Probe round 8 (docs/safety.md, cases Y1-Y12): the surface that changed last. calibrate e2e's
--parameters (empty, duplicate, unknown) and profiles carrying first_token_floor_ms / decode_scale
read back by simulate; --target-rps at its edges on plan, search and recommend, open and closed
loop; recommend's second chart; simulate --warmup-until-steady with fewer requests than clients;
contradictory loads and SLOs on a three-engine search; the Python planners with None, NaN and huge
ints. Each case ends in a correct result or one line naming the flag or field and what is valid."""
import json
import math
import os

import pytest

from test_probe_round6 import one_line_error   # rc 2 and one "servesim: error: " line holding every word
from test_probe_round7 import BENCH, PROFILE, SIM8, run

PLAN = ["plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", "1", "--tp", "1", "--precision", "fp8",
        "--topology", "agg", "--isl", "1000", "--osl", "100", "--ttft-ms", "600", "--itl-ms", "50", "-q", "--threads", "1"]
REC = ["recommend", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--precision", "fp8", "--topology", "agg",
       "--isl", "1000", "--osl", "100", "--ttft-ms", "600", "--itl-ms", "50", "-q", "--threads", "1"]
CAL = ["--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--precision", "fp8", "--folds", "1", "--threads", "1"]


def profile_with(tmp_path, name, value):
    p = json.load(open(PROFILE))
    p["parameters"] = [x for x in p["parameters"] if x["name"] != name]
    ms = name.endswith("_ms")
    p["parameters"].append({"name": name, "prior": 0 if ms else 1, "value": value, "sd": 0.1, "unit": "ms" if ms else "x",
                            "scope": "gpu+engine"})
    f = tmp_path / "p.json"
    f.write_text(json.dumps(p))
    return f


def test_recommend_cost_chart_named_like_a_folder_is_refused_before_the_run(exe, tmp_path):  # Y1
    # recommend --plot X.png also writes X-cost.png; a folder of that name failed after the whole run
    # ("X-cost.png: cannot write file: is a folder", no flag named), and nothing was written.
    (tmp_path / "X-cost.png").mkdir()
    line = one_line_error(run(exe, *REC, "--target-rps", 2, "--concurrency", "1,2", "--requests", 20, "--plot", "X.png", cwd=tmp_path),
                          "--plot: X-cost.png: is a folder, not a file", "also writes the $/hour chart")
    assert not (tmp_path / "X.png").exists(), line
    # The help says so.
    assert "FILE-cost.png" in run(exe, "recommend", "--help").stdout


def test_target_rps_is_a_request_rate_from_a_micro_to_ten_million(exe):  # Y2
    # 1e12 had run the whole sweep and then blamed --target-tps ("1e+14 output tok/s needs ..."); open
    # loop it said "workload: request_rate: ... got 1000000000000.000000"; 1e-300 "got 0.000000".
    for base in (PLAN, ["plan"], REC + ["--concurrency", "1,2", "--requests", "20"]):
        for v in ("1e12", "1e-300", "0", "-1"):
            for extra in ([], ["--arrival", "poisson"]):
                one_line_error(run(exe, *base, "--target-rps", v, *extra, timeout=60), "--target-rps: must be a finite number > 0",
                               "from 1e-06 to 10^7 requests/s")


def test_a_tiny_target_still_takes_one_copy(exe):  # Y3
    # 10^-5 requests/s had been 0 copies, 0 GPUs, $0.00 (plan) and "none serves the target with at
    # most 10^9 copies" (recommend): any load takes one copy.
    out = run(exe, *PLAN, "--target-rps", "1e-5", "--concurrency", "1,2", "--requests", 20, "--format", "json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["topologies"][0]
    assert (row["replicas"], row["gpus"], row["instances"]) == (1, 8, 1), row   # one copy: the node's 8 TP1 replicas
    out = run(exe, *REC, "--target-rps", "1e-5", "--concurrency", "1,2", "--requests", 20, "--format", "json")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)["recommendations"]
    assert len(rec) == 1 and rec[0]["gpus"] == 1, rec


def test_an_open_loop_target_one_copy_cannot_be_simulated_at_is_named(exe):  # Y4
    # The copy search starts with one copy offered the whole rate: 2 x 10^5 requests/s is 10 s x rate
    # of warm-up + 60 s x rate measured = 1.4 x 10^7 requests. It said "workload: requests: must be
    # <= 10^7, got 12000000", naming a --requests no one gave.
    one_line_error(run(exe, *PLAN, "--target-rps", "2e5", "--arrival", "poisson"), "--target-rps: 2e+05 requests/s open loop",
                   "1.4e+07 requests", "more than 10^7", "up to 142857 requests/s")
    one_line_error(run(exe, *REC, "--target-rps", "1e6", "--arrival", "poisson", "--requests", 20),
                   "--target-rps: 1e+06 requests/s open loop", "then --requests", "up to 999998 requests/s")


def test_warmup_until_steady_without_a_warmup_count_takes_the_capacity_rule(exe):  # Y5
    # It had said "command line: workload.warmup_until_steady: applies to ... with warmup_requests >= 1"
    # whatever --requests was; now the warm-up is the capacity rule's, at most 32 requests per client,
    # and 4 requests from 16 clients are measured after it.
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--isl", 500, "--osl", 20, "--concurrency", 16,
            "--warmup-until-steady"]
    out = run(exe, *base, "--requests", 4, "-q")
    assert out.returncode == 0, out.stderr
    assert "warm-up until steady, at most 32 requests per client (512)" in out.stdout
    j = json.loads(run(exe, *base, "--requests", 4, "-q", "--format", "json").stdout)
    assert j["records"]["request_count"]["avg"] == 4 and 1 <= j["warmup_request_count"] <= 512
    # Open loop: the flag is named, not the scenario field.
    one_line_error(run(exe, "simulate", "--request-rate", 2, "--requests", 8, "--warmup-until-steady", "-q"),
                   "--warmup-until-steady: applies to a closed loop")


def test_two_loads_name_the_flags_given(exe):  # Y6
    # It blamed --total-gpus, which was not given.
    one_line_error(run(exe, "search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", 1000, "--osl", 100, "--ttft-ms", 600,
                       "--itl-ms", 50, "--target-rps", 2, "--target-tps", 100), "--target-tps and --target-rps: one load to size for")


def test_three_engines_under_an_slo_no_gpu_meets(exe):  # Y7
    base = ["search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", 1000, "--osl", 100, "--tp", 1, "--precision", "fp8",
            "--topology", "agg", "--engine", "vllm,sglang,trtllm", "--concurrency", "1,2", "--requests", 20, "-q", "--threads", 1,
            "--target-rps", 2]
    out = run(exe, *base, "--ttft-ms", 0.5, "--itl-ms", 50)
    assert out.returncode == 0 and "No configuration was simulated: 0 do not fit, 3 cannot meet the SLO" in out.stdout, out
    out = run(exe, *base, "--ttft-ms", 600, "--itl-ms", 0.1)
    assert out.returncode == 0 and "ITL cannot go below" in out.stdout, out


def test_calibrate_parameters_empty_duplicate_unknown(exe, tmp_path):  # Y8
    import servesim
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps(BENCH))
    prof = tmp_path / "prof.json"
    # Empty: it had fitted the default set, as if --parameters were not given.
    one_line_error(run(exe, "calibrate", "e2e", bench, "--output", prof, *CAL, "--parameters", ""), "--parameters",
                   "give at least one parameter name")
    with pytest.raises(servesim.Error, match="parameters: empty: name the parameters to fit"):
        servesim.calibrate_e2e([str(bench)], model="llama-3.1-8b", gpu="h200", tp=1, precision="fp8", folds=1, threads=1,
                               parameters="")
    assert not prof.exists()
    one_line_error(run(exe, "calibrate", "e2e", bench, "--output", prof, *CAL, "--parameters", "decode_scale,foo"),
                   "--parameters: unknown parameter 'foo'; known: gemm_scale")
    # Named twice: fitted once (as a search list's repeated value is one candidate).
    out = run(exe, "calibrate", "e2e", bench, "--output", prof, *CAL, "--parameters", "decode_scale,first_token_floor_ms,decode_scale")
    assert out.returncode == 0, out.stderr
    assert [p["name"] for p in json.load(open(prof))["parameters"]] == ["decode_scale", "first_token_floor_ms"]


def test_a_profile_floor_and_decode_factor_show_in_the_run_they_move(exe, tmp_path):  # Y9
    # The run said "applies ..., first_token_floor_ms" and printed TTFTs of exactly 300 ms with no
    # figure saying why; each parameter now carries its value.
    out = run(exe, *SIM8, "--calibration", profile_with(tmp_path, "first_token_floor_ms", 300), "--format", "json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert "applies gemm_scale x1.3, attention_scale x1.3, request_overhead_ms 2 ms, first_token_floor_ms 300 ms" in \
        j["calibration"]["summary"]
    assert j["records"]["time_to_first_token"]["min"] >= 300.0 - 1e-6
    # A decode factor of 20 (the range's top) against 1: ITL x 20 within the step's fixed host share.
    itl = {}
    for v in (1, 20):
        o = run(exe, *SIM8, "--calibration", profile_with(tmp_path, "decode_scale", v), "--format", "json")
        assert o.returncode == 0, o.stderr
        summary = json.loads(o.stdout)["calibration"]["summary"]
        # At its prior a parameter changes nothing: named after the moved ones, without a value.
        assert (f"decode_scale x{v}" if v != 1 else "; at their priors decode_scale") in summary, summary
        itl[v] = json.loads(o.stdout)["records"]["inter_token_latency"]["avg"]
    assert itl[20] > 10 * itl[1], itl
    # Out of range or not JSON: one line naming the field.
    for name, v, words in (("first_token_floor_ms", -5, "must be 0..10000 ms"), ("first_token_floor_ms", 1e308, "must be 0..10000 ms"),
                           ("decode_scale", 0, "must be a factor from 0.05 to 20"), ("decode_scale", 1e-300, "from 0.05 to 20"),
                           ("decode_scale", float("nan"), "invalid JSON")):
        one_line_error(run(exe, *SIM8, "--calibration", profile_with(tmp_path, name, v)), "parameters[3]" if "JSON" not in words else "p.json",
                       words)


def test_python_planners_with_none_nan_and_huge_ints(tmp_path):  # Y10
    import servesim
    p = dict(model="llama-3.1-8b", instance="p5en.48xlarge", nodes=1, precision="fp8", isl=1000, osl=100, ttft_ms=600, itl_ms=50,
             concurrency=[1, 2], requests=20, tp=1, topology="agg", threads=1)
    r = dict(model="llama-3.1-8b", gpu=["h200"], isl=1000, osl=100, ttft_ms=600, itl_ms=50, tp=[1], precision="fp8", topology="agg",
             concurrency=[1, 2], requests=20, threads=1)
    for call, base in ((servesim.plan, p), (servesim.recommend, r)):
        for k, v, words in (("target_rps", float("nan"), "expected a finite number"), ("target_rps", 2 ** 70, "out of range"),
                            ("target_rps", 1e-300, "from 1e-06 to 10^7 requests/s"), ("target_rps", "2", "expected a number"),
                            ("isl", 2 ** 70, "out of range"), ("seed", 2 ** 70, "out of range"), ("ttft_ms", float("nan"), "finite")):
            with pytest.raises(servesim.Error, match=words.replace("^", r"\^")):
                call(**dict(base, target_rps=2, **{k: v}) if k != "target_rps" else dict(base, **{k: v}))
        with pytest.raises(servesim.Error, match="required"):
            call(**dict(base, target_rps=None))


def test_the_throughput_chart_rounds_the_itl_line(exe, tmp_path):  # Y11
    # The legend had said "at least 16.6667 tok/s per user" where the frontier chart says 16.7.
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    out = run(exe, *PLAN[:-5], "--itl-ms", 60, "-q", "--threads", 1, "--target-rps", 2, "--concurrency", "1,2", "--requests", 20,
              "--plot", tmp_path / "p.png")
    assert out.returncode == 0, out.stderr
    sweep = json.load(open(tmp_path / "p-sweep.json"))
    plan = json.load(open(tmp_path / "p-plan.json"))
    fig = plot.throughput_figure(sweep, plan=plan)
    labels = [t.get_text() for ax in fig.axes for t in (ax.get_legend().get_texts() if ax.get_legend() else [])]
    labels += [l.get_label() for ax in fig.axes for l in ax.get_lines()]
    assert any("at least 16.7 tok/s per user" in s for s in labels), labels
    assert not any("16.6667" in s for s in labels), labels


def test_open_loop_search_says_why_its_two_throughputs_differ(exe):  # Y13
    # The tour's search printed 3,236 tok/s/GPU on the frontier and 3,428.6 (24,000 / 7) in the best row
    # for the same 7 copies, and drew the star above its frontier point, with no word why.
    out = run(exe, "search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", 1000, "--osl", 100, "--tp", 1, "--precision", "fp8",
              "--topology", "agg", "--ttft-ms", 600, "--itl-ms", 50, "--target-rps", 4, "--arrival", "poisson", "--requests", 200,
              "-q", "--threads", 1)
    assert out.returncode == 0, out.stderr
    assert "aiperf's tok/s/GPU: the output over the benchmark's whole duration" in out.stdout and "served tok/s/GPU" in out.stdout


def test_a_calibration_without_engine_runs_the_build_it_was_fitted_on(exe, tmp_path):
    # simulate and sweep from flags ran the embedded default's newest build, so a profile fitted on
    # vLLM 0.14-0.18 said "nothing applies" unless --engine named its build; a scenario file that names
    # none took the calibration's. Now the flags do too; --engine and a scenario's own build still win.
    p = json.load(open(PROFILE))
    p["fitted_on"]["engine_profile"] = "vllm-0.14"
    prof = tmp_path / "p14.json"
    prof.write_text(json.dumps(p))
    out = run(exe, *SIM8, "--calibration", prof, "--format", "json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert "applies gemm_scale x1.3" in j["calibration"]["summary"], j["calibration"]["summary"]
    assert j["what_ran"]["engine"]["profile"] == "vllm-0.14", j["what_ran"]["engine"]["profile"]
    text = run(exe, "sweep", *SIM8[1:], "--calibration", prof).stdout
    assert "engine vllm-0.14:" in text and "vllm-0.14: applies gemm_scale" in text, text[:1500]
    other = json.loads(run(exe, *SIM8, "--calibration", prof, "--engine", "vllm-0.19", "--format", "json").stdout)
    assert "nothing applies" in other["calibration"]["summary"]
    assert "this run is on vllm-0.19" in other["calibration"]["summary"]
    # Python's flags as the CLI's: calibration= alone runs the profile's build, engine_profile= another.
    import servesim
    sim = dict(model="llama-3.1-8b", gpu="h200", tp=1, isl=500, osl=20, concurrency=2, requests=8, calibration=str(prof))
    assert servesim.simulate(**sim)["what_ran"]["engine"]["profile"] == "vllm-0.14"
    r = servesim.simulate(engine_profile="vllm-0.19", **sim)
    assert r["what_ran"]["engine"]["profile"] == "vllm-0.19" and "nothing applies" in r["calibration"]["summary"]


def test_validate_says_what_a_calibration_changed(exe, tmp_path):
    # validate --calibration printed no word of the profile: which points it changed, and how. A bench
    # result without an engine runs the profile's build (vllm-0.14 here), as simulate's flags do.
    p = json.load(open(PROFILE))
    p["fitted_on"]["engine_profile"] = "vllm-0.14"
    prof = tmp_path / "p14.json"
    prof.write_text(json.dumps(p))
    (tmp_path / "b.json").write_text(json.dumps(BENCH))
    (tmp_path / "servesim_run.json").write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h200", "tensor_parallel_size": 1,
                                                            "precision": "fp8"}))
    out = run(exe, "validate", tmp_path / "b.json", "--calibration", prof)
    assert out.returncode == 0, out.stderr
    assert f"calibration {prof} (fitted on llama-3.1-8b, h200, vllm-0.14, 12 points):" in out.stdout, out.stdout[:800]
    assert "  1 point (llama-3.1-8b h200 vllm-0.14 fp8): applies gemm_scale x1.3" in out.stdout, out.stdout[:800]
    j = json.loads(run(exe, "validate", tmp_path / "b.json", "--calibration", prof, "--format", "json").stdout)
    assert [u["points"] for u in j["calibration"]["uses"]] == [1] and j["calibration"]["uses"][0]["applies"]
