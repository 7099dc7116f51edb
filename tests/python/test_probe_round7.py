"""Probe round 7 (docs/safety.md, cases X1-X12): calibrate e2e with hostile bench files, calibration
profiles with huge numbers, scenarios naming a calibration, --emit folders named with shell and
YAML metacharacters, --threads and --requests at their edges, and a request record whose metadata
is not an object. Each case ends in a correct result or one line naming the file or flag, the field
and what would be valid."""
import csv
import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from test_probe_round6 import one_line_error   # rc 2 and one "servesim: error: " line holding every word

SRC = os.environ.get("SERVESIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PROFILE = os.path.join(SRC, "tests", "sim", "data", "h200-slow-kernels.calibration.json")
CSV = os.path.join(SRC, "tests", "sim", "data", "validate_sample.csv")
BENCH = {"max_concurrency": 8, "completed": 80, "total_input_tokens": 80000, "total_output_tokens": 8000,
         "mean_ttft_ms": 90.5, "mean_tpot_ms": 7.5, "output_throughput": 900.0}
SETUP = ["--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--precision", "fp8", "--parameters", "gemm_scale",
         "--folds", "1", "--threads", "1"]
SIM8 = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--isl", "500", "--osl", "20", "--concurrency", "2",
        "--requests", "8", "-q"]
L8 = ["--model", "llama-3.1-8b", "--gpu", "h200", "--isl", "1000", "--osl", "100", "--precision", "fp8", "--topology", "agg",
      "--tp", "1", "--ttft-ms", "600", "--itl-ms", "50", "--concurrency", "1,2", "--requests", "20"]


def run(exe, *args, cwd=None, env=None, timeout=300):
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def calibrate(exe, tmp_path, *inputs):
    return run(exe, "calibrate", "e2e", *inputs, "--output", tmp_path / "prof.json", *SETUP)


def test_bench_fields_of_the_wrong_type_are_named(exe, tmp_path):  # X1, X2, X3
    for field, bad, words in (("mean_ttft_ms", '"90.5"', 'expected a number, got "90.5"'),
                              ("completed", "true", "expected a number, got true"),
                              ("max_concurrency", "[]", "expected a number, got an array"),
                              ("mean_ttft_ms", "Infinity", "mean_ttft_ms: infinite is not a time in milliseconds"),
                              ("mean_ttft_ms", "1e999", "number out of range")):
        f = tmp_path / "b.json"
        f.write_text(json.dumps(BENCH).replace(f'"{field}": {json.dumps(BENCH[field])}', f'"{field}": {bad}'))
        one_line_error(calibrate(exe, tmp_path, f), "b.json", words)
        assert not (tmp_path / "prof.json").exists()
    # Python's json writes a missing figure as NaN: absent, as if not written (the run places on its TPOT).
    f.write_text(json.dumps(dict(BENCH, mean_ttft_ms=float("nan"))))
    assert calibrate(exe, tmp_path, f).returncode == 0
    # Per-request arrays a bench file may carry (2 x 10^6 TTFTs) are read past, not kept.
    f = tmp_path / "big.json"
    f.write_text(json.dumps(dict(BENCH, ttfts=[0.09] * 2_000_000)))
    assert calibrate(exe, tmp_path, f).returncode == 0


def test_a_calibration_takes_at_most_a_thousand_runs(exe, tmp_path):  # X4
    # 100,000 SGLang records had run for hours (about 0.25 s of CPU per run per fit); 1,001 are refused
    # while reading, before any simulation.
    f = tmp_path / "many.jsonl"
    f.write_text((json.dumps(BENCH) + "\n") * 100_000)
    t = time.time()
    one_line_error(calibrate(exe, tmp_path, f), "many.jsonl: line 1001", "more than 1000", "give a subset")
    assert time.time() - t < 20
    # Across files, counted once read.
    g = tmp_path / "six.jsonl"
    g.write_text((json.dumps(BENCH) + "\n") * 600)
    one_line_error(calibrate(exe, tmp_path, g, g), "calibrate e2e: 1200 measured runs, more than 1000")


def test_profile_uncertainty_and_prior_are_range_checked(exe, tmp_path):  # X5
    for field, value, words in (("sd", 1e308, "standard deviation from 0 to 20"), ("prior", 1e308, "factor from 0.05 to 20"),
                                ("prior", -1, "factor from 0.05 to 20")):
        p = json.load(open(PROFILE))
        p["parameters"][0][field] = value
        f = tmp_path / "p.json"
        f.write_text(json.dumps(p))
        one_line_error(run(exe, *SIM8, "--calibration", f), f"parameters[0].{field}", words)


def test_a_calibration_flag_file_it_cannot_read_names_the_flag(exe, tmp_path):  # X6
    # It had said "command line: calibration: ... relative to the scenario's folder" with no scenario.
    line = one_line_error(run(exe, *SIM8, "--calibration", "/dev/zero"), "--calibration: /dev/zero: is a character device")
    assert "scenario" not in line


def test_a_nul_in_a_file_name_does_not_cut_the_error_line(exe, tmp_path):  # X7
    sc = tmp_path / "s.json"
    sc.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "gpus": 1, "calibration": "a\u0000b",
                              "workload": {"isl": 500, "osl": 20, "concurrency": 2, "requests": 8}}))
    one_line_error(run(exe, "simulate", "--scenario", sc, "-q"), "calibration: cannot read", "a\\0b'", "No such file")


def test_negative_thread_counts_are_refused_as_python_refuses_them(exe, tmp_path):  # X8
    b = tmp_path / "b.json"
    b.write_text(json.dumps(BENCH))
    plan = ["plan", "--model", "nemotron-3-nano", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "bf16",
            "--isl", "500", "--osl", "20", "--ttft-ms", "500", "--itl-ms", "50", "--target-tps", "1000"]
    sweep = ["sweep", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", "200", "--osl", "20", "--concurrency", "1,2", "-q"]
    for cmd in (sweep, ["search", *L8], ["recommend", *L8], plan,
                ["validate", CSV], ["calibrate", "e2e", b, "--output", tmp_path / "p.json", *SETUP[:-2]]):
        one_line_error(run(exe, *cmd, "--threads", "-1"), "--threads: must be a whole number >= 0 (0: all cores), got -1")


def test_request_counts_at_their_edges(exe):  # X9
    for cmd in (SIM8[:-3], ["search", *L8[:-2]]):
        for bad, words in (("0", "--requests: must be >= 1"), ("-1", "--requests: must be >= 1"), ("1000000000", "10"),
                           ("1.5", "whole number")):
            one_line_error(run(exe, *cmd, "--requests", bad), "--requests", words)
    # simulate had said "command line: workload.concurrency: must be 1..1000000 clients, got 0" for
    # --requests 0 (the default's 32 clients capped at 0 requests), "command line: workload.isl" for
    # --isl 0 and "gpus: must be between 1 and 65536" for --tp 0: each now names the flag given.
    sim = ["simulate", "--model", "llama-3.1-8b", "-q"]
    for flag, bad, words in (("--isl", "0", "--isl: must be >= 1 token"), ("--concurrency", "0", "--concurrency: must be 1..1000000"),
                             ("--request-rate", "-1", "--request-rate: must be between"), ("--tp", "0", "--tp: must be a whole number >= 1"),
                             ("--gpus", "0", "--gpus: must be a whole number >= 1"), ("--warmup-requests", "-1", "--warmup-requests")):
        line = one_line_error(run(exe, *sim, flag, bad), words)
        assert "command line" not in line, line


def test_jsonl_metadata_that_is_not_an_object_is_named(exe, tmp_path):  # X10 (the 2026-12-02 report's W3, a record's metadata a list)
    d = tmp_path / "run"
    assert run(exe, "simulate", "--model", "nemotron-3-nano", "--gpu", "h100", "--gpus", "1", "--tp", "1", "--precision", "fp8",
               "--isl", "1000", "--osl", "50", "--concurrency", "4", "--requests", "24", "--warmup-requests", "4",
               "--export", d).returncode == 0
    jl = d / "profile_export.jsonl"
    good = jl.read_text()
    for extra, field in (('{"metadata": []}', "metadata"), ('{"metrics": 5, "metadata": {}}', "metrics")):
        jl.write_text(good + extra + "\n")   # had been counted: 25 measured requests where the run had 24
        one_line_error(run(exe, "validate", d), "profile_export.jsonl: line 29: " + field, "expected an object")


METACHARS = "a'b\"c $(touch PWNED1) `touch PWNED2`;|&<>*?#: - [x] {y} ---"


def test_emit_folders_named_with_shell_and_yaml_metacharacters(exe, tmp_path):  # X11, X12
    prof = tmp_path / "my prof'ile $(touch PWNED3).json"
    shutil.copy(PROFILE, prof)
    stub = tmp_path / "bin"
    stub.mkdir()
    for b in ("vllm", "aiperf", "mpirun", "sglang"):
        (stub / b).write_text("#!/bin/sh\nexit 0\n")
        (stub / b).chmod(0o755)
    env = dict(os.environ, PATH=f"{stub}:/usr/bin:/bin")
    runs = {"search": ["search", *L8, "--target-tps", "1000", "--calibration", prof],
            "recommend": ["recommend", *L8[:-4], "--target-rps", "2", "--arrival", "poisson"],
            "planner": ["planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8",
                        "--isl", "500", "--osl", "50", "--ttft-ms", "1000", "--itl-ms", "50", "--hours", "0.05", "--peak-rps", "2",
                        "--replica-rps", "4", "-q"]}
    for tag, args in runs.items():
        dest = tmp_path / "em" / f"{tag}-{METACHARS}"
        out = run(exe, *args, "--emit", dest)
        assert out.returncode == 0, out.stderr
        files = [f for f in glob.glob(glob.escape(str(dest)) + "/**", recursive=True) if os.path.isfile(f)]
        assert len(files) >= 3, files
        for f in files:
            if f.endswith(".sh"):
                assert subprocess.run(["bash", "-n", f]).returncode == 0, f
                subprocess.run(["bash", os.path.basename(f)], cwd=os.path.dirname(f), env=env, capture_output=True, timeout=120)
            elif f.endswith(".json"):
                json.load(open(f))
            elif f.endswith(".csv"):
                assert len({len(r) for r in csv.reader(open(f))}) == 1, f
            elif f.endswith(".yaml"):
                yaml = pytest.importorskip("yaml")
                assert len(list(yaml.safe_load_all(open(f)))) == 1, f
        assert not glob.glob(str(tmp_path / "**" / "PWNED*"), recursive=True)
        # The emitted scenario re-runs, the metacharacters in its folder's and the profile's names included.
        for sc in glob.glob(glob.escape(str(dest)) + "/**/scenario.json", recursive=True):
            assert run(exe, "simulate", "--scenario", sc, "-q", "--requests", "8").returncode == 0, sc


def test_python_sweep_axis_values_are_checked_before_the_base(tmp_path):  # X13
    import servesim
    base = dict(model="llama-3.1-8b", gpu="h200", isl=200, osl=20, requests=8, threads=1)
    # bytes had read as their byte values (b'x': 120 clients); an object was a raw TypeError.
    for bad in (b"x", object(), True, {}):
        with pytest.raises(servesim.Error, match="concurrency: expected a number, a list of numbers"):
            servesim.sweep(concurrency=bad, **base)
    for bad in ([2**70], [float("nan")], [0], [1.5], [True]):
        with pytest.raises(servesim.Error, match="sweep\\(\\): concurrency: expected"):
            servesim.sweep(concurrency=bad, **base)
    with pytest.raises(servesim.Error, match="request_rate: expected finite request rates above 0"):
        servesim.sweep(request_rate=[float("inf")], **base)
    # The default scenario's 32 clients against 8 requests had been refused before the swept values
    # replaced them ("32 clients but 8 requests"), where the CLI runs the same sweep.
    assert servesim.sweep(concurrency=[1, 2], **base)["concurrency"] == [1, 2]


def test_a_point_too_large_for_memory_is_listed_with_what_takes_it(exe, tmp_path):  # X14 (the 2026-12-02 report's H2, CSV form)
    import resource
    header = open(CSV).readline().rstrip("\n")
    v = dict(id="p_c8_tp8_d", silicon_data_source="src; silicon_concurrency=8", backend="vllm", backend_version="0.12.0",
             model_path="nvidia/Llama-3.1-8B-Instruct-FP8", system="h200_sxm", precision="fp8", mode="disagg", isl="1000",
             osl="100", gemm_quant_mode="fp8", moe_quant_mode="fp8", batch_size="8", tp_size="8", pp_size="1", moe_tp_size="1",
             moe_ep_size="1", silicon_ttft_ms="60.0", silicon_tpot_ms="6.0", prefill_num_workers="64", decode_num_workers="64",
             prefill_tp_size="8", decode_tp_size="8", prefill_pp_size="1", decode_pp_size="1", prefill_batch_size="1",
             decode_batch_size="8")
    f = tmp_path / "disagg.csv"
    f.write_text(header + "\n" + ",".join(v.get(c, "") for c in header.split(",")) + "\n")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    out = subprocess.run([exe, "validate", f, "--format", "json", "--threads", "1"], capture_output=True, text=True, timeout=300,
                         preexec_fn=limit)
    assert out.returncode == 0, out.stderr
    why = json.loads(out.stdout)["points"][0]["unmodellable"]
    assert why.startswith("simulation failed: out of memory: each replica or worker keeps a KV block table") and \
        "128 workers need more than this process may use" in why, why   # it had said "simulation failed: std::bad_alloc"
