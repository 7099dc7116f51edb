"""Probe round 5 (docs/safety.md, cases V1-V10): calibrate e2e inputs, calibration profiles,
search / recommend list flags, the planner's and calibrate's Python arguments. Each case ends in a
correct result or one line naming the file or argument, the field and what would be valid."""
import csv
import json
import signal
import subprocess
import time

import pytest
import servesim

OK = {"max_concurrency": 8, "completed": 80, "total_input_tokens": 80000, "total_output_tokens": 8000,
      "mean_ttft_ms": 90.5, "mean_tpot_ms": 7.5, "output_throughput": 900.0}
SETUP = ["--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--precision", "fp8", "--parameters", "gemm_scale",
         "--folds", "1"]


def one_line_error(out):
    assert out.returncode == 2, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def calibrate(exe, tmp_path, *inputs, setup=SETUP):
    return subprocess.run([exe, "calibrate", "e2e", *map(str, inputs), "--output", str(tmp_path / "prof.json"), *setup],
                          capture_output=True, text=True, timeout=300)


def bench(tmp_path, name, **change):
    d = dict(OK, **change)
    p = tmp_path / name
    p.write_text(json.dumps({k: v for k, v in d.items() if v != "drop"}))
    return p


def test_bench_results_with_impossible_measurements_are_refused(exe, tmp_path):  # V1, V2
    cases = {
        "mean_ttft_ms": (-5, "mean_ttft_ms: -5 is not a time in milliseconds from 0.001 (1 us) to 86400000 (1 day)"),
        "mean_tpot_ms": (1e308, "mean_tpot_ms: 1e+308 is not a time in milliseconds"),
        "output_throughput": (-5, "output_throughput: -5 is not a throughput in tokens/s (0 or more)"),
        "max_concurrency": (2.5, "max_concurrency: 2.5 is not a client count (a whole number in 1..1000000)"),
        "completed": (-5, "completed: -5 is not a count of completed requests"),
        "total_input_tokens": (1e308, "total_input_tokens: 1e+308 is not a token count"),
    }
    for field, (value, want) in cases.items():
        out = calibrate(exe, tmp_path, bench(tmp_path, field + ".json", **{field: value}))
        line = one_line_error(out)
        assert f"{field}.json: " in line and want in line, line
        assert not (tmp_path / "prof.json").exists()
    # A run that records one of TTFT / TPOT still calibrates on it; a plain one still works.
    assert calibrate(exe, tmp_path, bench(tmp_path, "no_ttft.json", mean_ttft_ms="drop")).returncode == 0
    assert calibrate(exe, tmp_path, bench(tmp_path, "plain.json")).returncode == 0


def test_sglang_jsonl_names_the_files_line_and_column(exe, tmp_path):  # V3
    p = tmp_path / "sg.jsonl"
    p.write_text(json.dumps(OK) + "\ngarbage{\n" + json.dumps(OK) + "\n")
    line = one_line_error(calibrate(exe, tmp_path, p))
    assert line.endswith("sg.jsonl: line 2, column 2: invalid JSON"), line
    p.write_text(json.dumps(OK) + "\r\n\r\n" + json.dumps(dict(OK, max_concurrency=16)) + "\r\n")
    assert calibrate(exe, tmp_path, p).returncode == 0


def test_bench_results_as_the_benchmarks_write_them(exe, tmp_path):
    # SGLang's bench_serving writes Python's json: its default rate is the bare word Infinity and a
    # missing figure NaN; vLLM's --save-result writes that rate as the string "inf". With
    # max_concurrency both are closed loops; with no client cap every prompt went at once: refused.
    p = tmp_path / "sg.jsonl"
    p.write_text(json.dumps(dict(OK, request_rate=float("inf"), std_ttft_ms=float("nan"))) + "\n")
    assert "Infinity" in p.read_text() and "NaN" in p.read_text()
    assert calibrate(exe, tmp_path, p).returncode == 0
    assert calibrate(exe, tmp_path, bench(tmp_path, "vllm.json", request_rate="inf", burstiness=1.0)).returncode == 0
    line = one_line_error(calibrate(exe, tmp_path, bench(tmp_path, "burst.json", request_rate="inf", max_concurrency="drop")))
    assert "burst.json: request_rate: an unbounded rate with no max_concurrency sends every prompt at once" in line, line


def test_validate_reads_the_bench_results_calibrate_takes(exe, tmp_path):
    # The runs a user calibrates on, validated point by point (with or without the profile): the setup
    # from the servesim_run.json beside them, an SGLang random dataset run with the lengths it drew.
    (tmp_path / "run").mkdir()
    p = tmp_path / "run" / "sg.jsonl"
    p.write_text(json.dumps(dict(OK, backend="sglang", dataset_name="random", random_input_len=2000, random_output_len=200,
                                 random_range_ratio=0.0, total_input_tokens=80 * 1000, total_output_tokens=80 * 100)) + "\n")
    line = one_line_error(subprocess.run([exe, "validate", str(p)], capture_output=True, text=True, timeout=300))
    assert "sg.jsonl: line 1: model: unknown model: give \"model\" in a servesim_run.json beside it" in line, line
    (tmp_path / "run" / "servesim_run.json").write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h200", "tp": 1}))
    out = subprocess.run([exe, "validate", str(p), "--output", str(tmp_path / "v.csv")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ISL/OSL as the run's requests had them" in out.stdout, out.stdout
    row = next(csv.DictReader(open(tmp_path / "v.csv")))
    assert (row["backend"], row["isl"], row["osl"], row["concurrency"]) == ("sglang", "1000", "100", "8")
    r = servesim.validate(str(p))   # Python reads them too
    out = calibrate(exe, tmp_path, p, setup=["--parameters", "gemm_scale", "--folds", "1"])
    assert out.returncode == 0 and "1 of 1 points ran the lengths their requests had" in out.stdout, out.stdout + out.stderr
    assert abs(r["points"][0]["predicted"]["ttft_ms"] - float(row["predicted_ttft_ms"])) < 1e-3, r["points"][0]


def test_a_sidecar_names_its_own_bad_fields(exe, tmp_path):  # V4
    (tmp_path / "run").mkdir()
    b = bench(tmp_path / "run", "bench.json")
    side = tmp_path / "run" / "servesim_run.json"
    setup = ["--parameters", "gemm_scale", "--folds", "1"]
    side.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h200", "tp": -1}))
    line = one_line_error(calibrate(exe, tmp_path, b, setup=setup))
    assert "servesim_run.json: tp: must be a whole number of GPUs in 1..1024" in line, line
    side.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h900", "tp": 1}))
    assert "GPU 'h900' not in the catalogue" in one_line_error(calibrate(exe, tmp_path, b, setup=setup))


def test_calibration_profiles_with_impossible_fields_are_refused(exe, tmp_path):  # V5
    assert calibrate(exe, tmp_path, bench(tmp_path, "b.json")).returncode == 0
    good = json.loads((tmp_path / "prof.json").read_text())
    sim = [exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--precision", "fp8", "--concurrency", "2",
           "--requests", "8", "-q"]
    bad = json.loads(json.dumps(good))
    bad["parameters"][0]["sd"] = -1
    (tmp_path / "sd.json").write_text(json.dumps(bad))
    bad = json.loads(json.dumps(good))
    bad["fitted_on"]["points"] = -3
    (tmp_path / "pts.json").write_text(json.dumps(bad))
    (tmp_path / "trunc.json").write_text(json.dumps(good)[:100])
    for name, want in (("sd", "parameters[0].sd: must be a standard deviation (0 or more)"),
                       ("pts", "fitted_on.points: must be the count of measured points"),
                       ("trunc", "line 1, column 101: invalid JSON")):
        out = subprocess.run(sim + ["--calibration", str(tmp_path / f"{name}.json")], capture_output=True, text=True)
        assert want in one_line_error(out)
    other = json.loads(json.dumps(good))
    other["fitted_on"]["gpu"] = "b200"   # another GPU's profile: runs, and says nothing applies
    (tmp_path / "b200.json").write_text(json.dumps(other))
    out = subprocess.run(sim + ["--calibration", str(tmp_path / "b200.json")], capture_output=True, text=True)
    assert out.returncode == 0 and "nothing applies" in out.stdout


def test_a_value_given_twice_in_a_search_list_is_one_candidate(exe):  # V6
    base = ["search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", "1000", "--osl", "100", "--ttft-ms", "600",
            "--itl-ms", "50", "--target-tps", "2000", "--concurrency", "1", "--requests", "10", "-q", "--format", "json"]
    for extra, n in ((["--tp", "1,1", "--precision", "fp8", "--topology", "agg"], 1),
                     (["--tp", "1", "--precision", "fp8,fp8", "--topology", "agg"], 1),
                     (["--tp", "1", "--precision", "fp8", "--max-num-seqs", "64,64", "--topology", "agg"], 1),
                     (["--tp", "1", "--precision", "fp8", "--engine", "vllm,vllm-0.19", "--topology", "agg"], 1),
                     (["--tp", "1", "--precision", "fp8", "--pd-ratios", "1:1,1:1", "--topology", "disagg"], 1),
                     (["--tp", "1", "--precision", "fp8", "--engine", "vllm,sglang", "--prefix-caching", "on,off,on",
                       "--topology", "agg"], 4)):
        out = subprocess.run([exe, *base, *extra], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        labels = [c["label"] for c in json.loads(out.stdout)["configurations"]]
        assert len(labels) == n == len(set(labels)), (extra, labels)


def test_planner_and_reserved_split_check_their_python_arguments():  # V7, V8, V9
    sc = servesim.scenario(model="llama-3.1-8b", gpu="h200", precision="fp8", isl=1000, osl=100)
    p = dict(load_profile="diurnal", peak_rps=2, ttft_ms=600, itl_ms=50, hours=1, replica_rps=4, fixed_fleet=False)
    with pytest.raises(servesim.Error, match="max_workers: must be a whole number of workers, got 1.5"):
        servesim.planner(sc, **dict(p, max_workers=1.5))
    with pytest.raises(servesim.Error, match="would need more than 10\\^6 workers"):
        servesim.planner(sc, **dict(p, replica_rps=1e-300))
    day = servesim.planner(sc, **p)
    with pytest.raises(servesim.Error, match="day: expected a planner\\(\\) result"):
        servesim.reserved_split(None, reserved_discount=0.3)
    with pytest.raises(servesim.Error, match="seconds_at_gpus: expected a list of seconds"):
        servesim.reserved_split(dict(day, seconds_at_gpus="abc"), reserved_discount=0.3)
    assert servesim.reserved_split(day, reserved_discount=0.3)["best"]["total_usd"] > 0


def test_every_python_call_reads_threads_the_same_way(tmp_path):  # V10
    b = tmp_path / "b.json"
    b.write_text(json.dumps(OK))
    calls = {
        "plan": lambda: servesim.plan(model="llama-3.1-8b", instance="p5en.48xlarge", nodes=1, precision="fp8", isl=100,
                                      osl=10, ttft_ms=600, itl_ms=50, target_tps=100, concurrency=[1], requests=4,
                                      threads=-3),
        "search": lambda: servesim.search(model="llama-3.1-8b", gpu="h200", isl=100, osl=10, ttft_ms=600, itl_ms=50,
                                          threads=-1),
        "calibrate_e2e": lambda: servesim.calibrate_e2e(str(b), model="llama-3.1-8b", gpu="h200", tp=1, threads=-3),
        "validate": lambda: servesim.validate(str(b), threads=True),
    }
    for fn, call in calls.items():
        with pytest.raises(servesim.Error, match=f"{fn}\\(\\): threads: expected a whole number >= 0"):
            call()


def test_killed_sweeps_never_leave_a_partial_output(exe, tmp_path):
    # kill -9 at 20 moments across a run whose --output is written at its end: the file is either
    # absent or whole (written to a temporary and renamed), never half a document.
    out = tmp_path / "out.json"
    cmd = [exe, "sweep", "--model", "llama-3.1-8b", "--gpu", "h200", "--precision", "fp8", "--isl", "1000", "--osl",
           "100", "--concurrency", "1,2,4,8,16,32,64,128", "--requests", "3000", "--output", str(out), "-q",
           "--threads", "1"]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, timeout=120)
    whole = time.monotonic() - t0
    for k in range(20):
        out.unlink(missing_ok=True)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(whole * (0.5 + 0.6 * k / 19))
        p.send_signal(signal.SIGKILL)
        p.wait()
        if out.exists():
            assert json.loads(out.read_text())["concurrency"] == [1, 2, 4, 8, 16, 32, 64, 128]
