"""Regressions of the hostile-input probe of validate, search / recommend / --emit, nccl,
calibrate fit, --dask and the Python API (ids C1-C2, S1-S5, H1-H4, D1-D4, W1-W13, B1-B14 of
docs/safety.md): every reproduction gives a correct result, or one error line and a non-zero
exit. The CLI runs as a subprocess (SERVESIM_BIN); Python calls that could crash run in a child
interpreter."""
import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import servesim

SRC = os.environ.get("SERVESIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
LLAMA = os.path.join(SRC, "tests", "sim", "data", "llama-3.1-8b.json")
CSV = os.path.join(SRC, "tests", "sim", "data", "validate_sample.csv")
# One configuration of a small model (about 0.5 s).
L8 = ["--gpu", "h200", "--isl", "1000", "--osl", "100", "--precision", "fp8", "--topology", "agg", "--tp", "1",
      "--ttft-ms", "600", "--itl-ms", "50", "--target-tps", "1000", "--concurrency", "1,2,4", "--requests", "20"]
M8 = ["--model", "llama-3.1-8b"]
HEADER = open(CSV).readline().rstrip("\n")
COLS = HEADER.split(",")

PROBED = set()


def probe(*ids):
    PROBED.update(ids)
    return lambda f: f


def run(exe, *args, cwd=None, timeout=120):
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          errors="replace")


def one_error(out, *words):
    assert out.returncode in (1, 2), (out.returncode, out.stdout[-500:], out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("servesim: error: "), out.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def ok(out):
    assert out.returncode == 0, out.stderr
    return out


def row(**kw):
    """One valid Llama-3.1-8B FP8 H200 row at concurrency 8."""
    v = dict(id="p_c8_tp1_a", silicon_data_source="src; silicon_concurrency=8", backend="vllm", backend_version="0.12.0",
             model_path="nvidia/Llama-3.1-8B-Instruct-FP8", system="h200_sxm", precision="fp8", mode="agg", isl="1000",
             osl="100", gemm_quant_mode="fp8", moe_quant_mode="fp8", batch_size="8", tp_size="1", pp_size="1",
             moe_tp_size="1", moe_ep_size="1", silicon_ttft_ms="60.0", silicon_tpot_ms="6.0")
    v.update(kw)
    return ",".join(v.get(c, "") for c in COLS)


def write_csv(path, *rows, header=HEADER, newline="\n"):
    path.write_bytes((newline.join([header, *rows]) + newline).encode("utf-8", "surrogateescape"))
    return path


def hw_file(tmp_path, gpu_name="H200", inst_name="p5y.48xlarge"):
    gpus = json.load(open(os.path.join(SRC, "hwmodels", "data", "gpus.json")))["gpus"]
    insts = json.load(open(os.path.join(SRC, "hwmodels", "data", "instances.json")))["instances"]
    g = dict(next(x for x in gpus if x["name"] == "H200"), name=gpu_name)
    i = dict(next(x for x in insts if x["name"] == "p5en.48xlarge"), name=inst_name, gpu=gpu_name)
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"gpus": [g], "instances": [i]}))
    return f


@pytest.fixture(scope="module")
def aiperf(exe, tmp_path_factory):
    """An aiperf artefact folder written by servesim itself (24 measured requests after 4 warm-up)."""
    d = tmp_path_factory.mktemp("ai") / "run1"
    ok(run(exe, "simulate", "--model", "nemotron-3-nano", "--gpu", "h100", "--gpus", "1", "--tp", "1", "--precision",
           "fp8", "--isl", "1000", "--osl", "50", "--concurrency", "4", "--requests", "24", "--warmup-requests", "4",
           "--export", d))
    return d


def folder(aiperf, tmp_path, name="f", jsonl=None, agg=None, side=None):
    d = tmp_path / name
    shutil.copytree(aiperf, d)
    if jsonl is not None:
        (d / "profile_export.jsonl").write_text(jsonl)
    if agg is not None:
        doc = json.loads((d / "profile_export_aiperf.json").read_text())
        agg(doc)
        (d / "profile_export_aiperf.json").write_text(json.dumps(doc))
    if side is not None:
        (d / "servesim_run.json").write_text(json.dumps(side))
    return d


# ---- crash -----------------------------------------------------------------------------------

@probe("C1")
def test_too_many_distinct_points_are_refused_while_reading(exe, tmp_path):
    f = tmp_path / "many.csv"
    with open(f, "w") as out:
        out.write(HEADER + "\n")
        for i in range(100_001):
            out.write(row(id=f"p{i}_c8_tp1_a", isl=str(1000 + i)) + "\n")
    one_error(run(exe, "validate", f), "line 100002", "more than 100000 distinct points", "split the file")


@probe("C2")
def test_validate_and_simulate_from_threads_do_not_corrupt_the_heap(tmp_path):
    code = textwrap.dedent(f"""
        import threading, time, servesim
        end = time.time() + 4
        err = []
        def val():
            while time.time() < end:
                try:
                    servesim.validate({CSV!r}, gpu="h200", mode="agg", model_file={LLAMA!r}, threads=1)
                except Exception as e:
                    err.append(repr(e))
        def sim():
            while time.time() < end:
                servesim.simulate({{"model": "llama-3.1-8b", "gpu": "h200", "precision": "fp8",
                                   "workload": {{"concurrency": 2, "isl": 200, "osl": 20, "requests": 8}}}})
        ts = [threading.Thread(target=f) for f in (val, val, sim)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        assert not err, err[:2]
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


# ---- security --------------------------------------------------------------------------------

@probe("S1")
def test_model_name_never_runs_in_the_emitted_script(exe, tmp_path):
    mf = tmp_path / "$(touch PWNED)_config.json"
    shutil.copy(LLAMA, mf)
    ok(run(exe, "search", "--model-file", mf, *L8, "--emit", tmp_path / "em", cwd=tmp_path))
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "vllm").write_text("#!/bin/sh\nexit 0\n")
    (stub / "vllm").chmod(0o755)
    env = dict(os.environ, PATH=f"{stub}:{os.environ['PATH']}")
    out = subprocess.run(["bash", "vllm-serve.sh"], cwd=tmp_path / "em", env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert not any(p.name.startswith("PWNED") for p in tmp_path.rglob("*")), "the model name ran as a command"
    script = (tmp_path / "em" / "vllm-serve.sh").read_text()
    assert "DEFAULT_MODEL='/fsx/models/$(touch PWNED)-bf16'" in script   # a BF16 config, quantized to FP8 on load


@probe("S2")
def test_gpu_and_instance_names_with_newlines_or_yaml_are_refused(exe, tmp_path):
    for name in ["HY\n---\napiVersion: v1\nkind: Pod", "ix\ntouch PWNED\n#", "a b", "x\"y"]:
        out = run(exe, "--hw-file", hw_file(tmp_path, gpu_name=name), "list", "gpus")
        one_error(out, "name: must be 1-64 characters")
        out = run(exe, "--hw-file", hw_file(tmp_path, inst_name=name), "list", "instances")
        one_error(out, "name: must be 1-64 characters")


@probe("S3")
def test_instance_names_cannot_leave_the_emit_folder(exe, tmp_path):
    for name in ["..", "../../x", ".hidden", "a/b"]:
        one_error(run(exe, "--hw-file", hw_file(tmp_path, inst_name=name), "list", "instances"), "name:")
    # A Python deployment naming an instance outside the catalogue is refused before anything is written.
    dep = servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, precision="fp8", topology="agg", tp=[1],
                          ttft_ms=600, itl_ms=50, concurrency=[1, 2], requests=10)["best"]["deployment"]
    dep["instances"] = {"../../escape": 1}
    with pytest.raises(servesim.Error, match="unknown instance"):
        servesim.emit(dep, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "escape").exists()


@probe("S4")
def test_python_modules_in_the_working_folder_never_run(exe, tmp_path):
    (tmp_path / "argparse.py").write_text(f"open({str(tmp_path / 'HIJACKED')!r}, 'w').write('x')\nraise SystemExit(3)\n")
    out = run(exe, "search", *M8, *L8, "--plot", "p.png", cwd=tmp_path)
    assert not (tmp_path / "HIJACKED").exists()
    ok(out)
    assert (tmp_path / "p.png").stat().st_size > 1000
    run(exe, "search", *M8, *L8, "--dask", "tcp://127.0.0.1:1", "--dask-timeout", "1", cwd=tmp_path)
    assert not (tmp_path / "HIJACKED").exists()


@probe("S5")
def test_control_characters_and_sidecar_paths(exe, aiperf, tmp_path):
    cfg = json.load(open(LLAMA))
    bad = tmp_path / "ctrl.json"
    bad.write_text(json.dumps(dict(cfg, name="a\x1b[31mred\x07")) if "hf_config" in cfg else "")
    mf = tmp_path / "a\x1b[31mred\x07_config.json"
    shutil.copy(LLAMA, mf)
    out = run(exe, "search", "--model-file", mf, *L8)
    line = one_error(out, "must not contain control characters")
    assert "\x1b" not in out.stderr and "\x07" not in out.stderr, line
    d = folder(aiperf, tmp_path, "side_passwd")
    side = json.loads((d / "profile_export_aiperf.json").read_text())["input_config"]
    side = {k: v for k, v in side.items() if k != "model"}
    side["model_file"] = "../../../../../../etc/passwd"
    (d / "servesim_run.json").write_text(json.dumps(side))
    out = run(exe, "validate", d, "--format", "json")
    one_error(out, "model_file", "outside the artefact folder")


# ---- hang ------------------------------------------------------------------------------------

@probe("H1")
def test_search_space_is_bounded_before_anything_is_allocated(exe):
    t = time.time()
    out = run(exe, "search", "--model", "nemotron-3-super", "--gpu", "h200", "--isl", "4000", "--osl", "500",
              "--ttft-ms", "600", "--itl-ms", "50", "--target-tps", "10000", "--max-num-seqs",
              ",".join(map(str, range(1, 2001))), "--max-num-batched-tokens", ",".join(map(str, range(16, 32001, 16))))
    one_error(out, "more than 50000 configurations", "--max-num-seqs", "--max-num-batched-tokens")
    assert time.time() - t < 10
    with pytest.raises(servesim.Error, match="more than 50000 configurations"):
        servesim.search(model="nemotron-3-super", gpu="h200", isl=4000, osl=500, ttft_ms=600, itl_ms=50,
                        max_num_seqs=list(range(1, 2001)), max_num_batched_tokens=list(range(16, 32001, 16)))


@probe("H2")
def test_replica_block_tables_are_estimated_before_the_run(exe):
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    t = time.time()
    out = subprocess.run([exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--precision", "fp8", "--topology",
                          "agg", "--replicas", "128", "--tp", "8", "--requests", "16", "--concurrency", "8", "--instance",
                          "p5en.48xlarge", "--nodes", "128"], capture_output=True, text=True, timeout=120, preexec_fn=limit)
    # 128 replicas x 1,009,066 blocks x 40 bytes = 5.2 GB, more than half of 4 GiB.
    one_error(out, "--replicas", "128 replicas or workers", "need about 5.2 GB")
    assert time.time() - t < 20


@probe("H3")
def test_calibrate_fit_refuses_a_quadratic_size(exe, tmp_path):
    d = tmp_path / "cal"
    d.mkdir()
    pts = [["bf16", 1 + i % 4096, 1024, 1024 + 16 * (i // 4096), 0.01 + 1e-6 * i] for i in range(20_001)]
    (d / "gemm.json").write_text(json.dumps({"family": "gemm", "columns": ["dtype", "m", "n", "k", "ms"], "points": pts}))
    t = time.time()
    one_error(run(exe, "calibrate", "fit", d), "gemm.json", "20001 points, more than 20000 per file")
    assert time.time() - t < 20


@probe("H4")
def test_search_refuses_hours_of_requests(exe):
    one_error(run(exe, "search", "--model", "nemotron-3-super", "--gpu", "h200", "--isl", "4000", "--osl", "500",
                  "--ttft-ms", "600", "--itl-ms", "50", "--target-tps", "10000", "--requests", "1000000"),
              "--requests", "more than 10^9")
    one_error(run(exe, "search", *M8, *L8[:-2], "--requests", "20000000"), "--requests", "more than 10000000")


# ---- data loss -------------------------------------------------------------------------------

@probe("D1")
def test_emit_output_and_plot_appear_together_or_not_at_all(exe, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    out = run(exe, "search", *M8, *L8, "--output", "o.csv", "--plot", "p.png", "--emit", "busy", cwd=tmp_path)
    one_error(out, "--emit", "notes.txt", "servesim did not write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]
    # Python emit() with a bad predicted table writes nothing.
    dep = servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, precision="fp8", topology="agg", tp=[1],
                          ttft_ms=600, itl_ms=50, concurrency=[1, 2], requests=10)["best"]["deployment"]
    dep["predicted"]["output_tps"] = ["x"] * len(dep["predicted"]["output_tps"])
    with pytest.raises(servesim.Error, match="predicted.output_tps"):
        servesim.emit(dep, str(tmp_path / "py"))
    assert not (tmp_path / "py").exists()
    # All of them, when everything is good.
    ok(run(exe, "search", *M8, *L8, "--output", "o.csv", "--plot", "p.png", "--emit", "em", cwd=tmp_path))
    assert (tmp_path / "o.csv").exists() and (tmp_path / "p.png").exists() and (tmp_path / "em" / "deployment.json").exists()
    assert not [p for p in tmp_path.rglob(".*tmp*")]


@probe("D2", "D4")
def test_chart_data_never_takes_a_user_file_and_charts_are_readable(exe, tmp_path):
    (tmp_path / "p.png.search.json").write_text("notes")
    os.umask(0o022)
    ok(run(exe, "search", *M8, *L8, "--plot", "p.png", cwd=tmp_path))
    assert (tmp_path / "p.png.search.json").read_text() == "notes"
    assert stat.S_IMODE((tmp_path / "p.png").stat().st_mode) == 0o644


@probe("D3")
def test_temporaries_of_killed_runs_are_swept(exe, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".o.csv.tmp.{dead.pid}.AbCdEf"
    stale.write_text("half")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    live = tmp_path / f".o.csv.tmp.{os.getpid()}.AbCdEf"
    live.write_text("in progress")
    os.utime(live, (old, old))
    ok(run(exe, "search", *M8, *L8, "--output", "o.csv", cwd=tmp_path))
    assert not stale.exists() and live.exists()


@probe("D4")
def test_a_second_emit_replaces_the_first_set_whole(exe, tmp_path):
    ok(run(exe, "search", *M8, *L8, "--emit", "em", cwd=tmp_path))
    assert (tmp_path / "em" / "nccl-p5en.48xlarge.sh").exists()
    b200 = list(L8)
    b200[b200.index("h200")] = "b200"
    ok(run(exe, "search", *M8, *b200, "--emit", "em", cwd=tmp_path))
    names = sorted(p.name for p in (tmp_path / "em").iterdir())
    assert not any("p5en" in n for n in names), names
    assert json.loads((tmp_path / "em" / "deployment.json").read_text())["workers"][0]["gpu"] == "B200"


# ---- wrong result ----------------------------------------------------------------------------

@probe("W1")
def test_huge_targets_count_in_64_bits_or_are_refused(exe):
    base = ["search", "--model", "nemotron-3-super", "--gpu", "h200", "--isl", "4000", "--osl", "500", "--precision",
            "fp8", "--topology", "agg", "--tp", "4", "--ttft-ms", "600", "--itl-ms", "50", "--concurrency", "64,128",
            "--requests", "256", "--format", "json"]
    j = json.loads(ok(run(exe, *base, "--target-tps", "2.2e12")).stdout)
    s = j["best"]["score"]
    assert s["copies"] > 2**31 // 4 and s["total_gpus"] == 4 * s["copies"] and s["instances"] == -(-s["total_gpus"] // 8)
    assert s["usd_per_hour"] > 0
    one_error(run(exe, *base, "--target-tps", "1e14"), "--target-tps", "more than 10^9; give a smaller target")
    # A rate target names the rate's option, not the tok/s it becomes (a rate beyond 10^7 requests/s
    # is refused before the search: docs/safety.md Y2).
    one_error(run(exe, *base, "--target-rps", "1e300"), "--target-rps", "from 1e-06 to 10^7 requests/s")
    one_error(run(exe, *base, "--total-gpus", "3000000000"), "--total-gpus", "1..1000000000")


@probe("W2")
def test_a_sidecar_model_file_applies_to_its_own_folder_only(exe, aiperf, tmp_path):
    multi = tmp_path / "multi"
    multi.mkdir()
    alone = json.loads(ok(run(exe, "validate", aiperf, "--format", "json")).stdout)["points"][0]["predicted"]
    shutil.copytree(aiperf, multi / "b_nano")
    a = folder(aiperf, multi, "a_override")
    doc = json.loads((a / "profile_export_aiperf.json").read_text())
    side = {k: v for k, v in doc["input_config"].items() if k != "model"}
    side["model_file"] = "nemotron-3-nano_config.json"
    shutil.copy(LLAMA, a / "nemotron-3-nano_config.json")
    (a / "servesim_run.json").write_text(json.dumps(side))
    pts = {p["id"]: p for p in json.loads(ok(run(exe, "validate", multi, "--format", "json")).stdout)["points"]}
    assert pts["b_nano"]["predicted"] == alone
    assert pts["a_override"]["predicted"] != alone
    # Python: a model file never replaces a catalogue model for the session.
    before = servesim.model("llama-3.1-8b")
    servesim.validate(CSV, gpu="h200", mode="agg", model_file=LLAMA, threads=1)
    assert servesim.model("llama-3.1-8b") == before


@probe("W3")
def test_jsonl_lines_that_are_not_requests_are_named(exe, aiperf, tmp_path):
    d = folder(aiperf, tmp_path, jsonl="[1,2,3]\n42\n")
    one_error(run(exe, "validate", d), "profile_export.jsonl", "line 1", "not a request record")


@probe("W4")
def test_impossible_measurements_are_refused_on_both_paths(exe, aiperf, tmp_path):
    for v in (-50, 1e308):
        d = folder(aiperf, tmp_path, f"t{v}", agg=lambda doc: doc["records"]["time_to_first_token"].update(avg=v))
        one_error(run(exe, "validate", d), "time_to_first_token.avg", "is not a measurement")
    for v in ("1e308", "1e-300"):
        f = write_csv(tmp_path / "x.csv", row(silicon_ttft_ms=v))
        one_error(run(exe, "validate", f), "line 2: silicon_ttft_ms", "0.001 (1 us) to 86400000 (1 day)")


@probe("W5", "W6")
def test_search_respects_the_model_context_and_emits_room_for_the_chat_template(exe, tmp_path):
    one_error(run(exe, "search", *M8, "--gpu", "h200", "--precision", "fp8", "--topology", "agg", "--tp", "1",
                  "--concurrency", "1,2", "--isl", "200000", "--osl", "10", "--ttft-ms", "100000", "--itl-ms", "500",
                  "--target-tps", "100"), "200010 tokens exceed llama-3.1-8b's context of 131072")
    ok(run(exe, "search", *M8, *L8, "--emit", "em", cwd=tmp_path))
    d = json.loads((tmp_path / "em" / "deployment.json").read_text())
    assert 1000 + 100 + 1500 <= d["max_model_len"] <= 131072
    assert f"--max-model-len {d['max_model_len']}" in (tmp_path / "em" / "vllm-serve.sh").read_text()


@probe("W7")
def test_calibrate_fit_range_checks_times_and_shapes(exe, tmp_path):
    for field, value, words in [("ms", 1e-300, "from 1e-06 ms"), ("ms", 1e300, "from 1e-06 ms"),
                                ("m", 1e15, "whole number from 1 to 2^40"), ("m", 1.5, "whole number from 1 to 2^40")]:
        d = tmp_path / f"{field}{value}"
        d.mkdir()
        pts = [{"dtype": "bf16", "m": 2 ** (i % 12), "n": 4096, "k": 4096, "ms": 0.01 * (1 + i)} for i in range(40)]
        pts[3][field] = value
        (d / "gemm.json").write_text(json.dumps({"family": "gemm", "points": pts}))
        one_error(run(exe, "calibrate", "fit", d), "points[3]", field, words)


@probe("W8")
def test_recommend_csv_is_quoted_and_whole(exe, tmp_path):
    ok(run(exe, "recommend", *M8, *L8, "--output", "r.csv", cwd=tmp_path))
    rows = list(csv.reader(open(tmp_path / "r.csv")))
    assert len(rows) >= 2 and all(len(r) == len(rows[0]) == 27 for r in rows)   # 24 + gap_ms + spare_pct_lo, _hi
    assert rows[1][2].startswith("agg TP1 H200")


@probe("W9", "B13")
def test_python_emit_and_nccl_check_their_arguments(tmp_path):
    dep = servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, precision="fp8", topology="agg", tp=[1],
                          ttft_ms=600, itl_ms=50, concurrency=[1, 2], requests=10)["best"]["deployment"]
    cases = [("copies", -3, "copies"), ("copies", 2**40, "copies"), ("workers", [dict(dep["workers"][0], tp=0)], "tp")]
    for key, value, field in cases:
        with pytest.raises(servesim.Error, match=field):
            servesim.emit(dict(dep, **{key: value}), str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()
    for args, words in [((None, "x"), "expected a dict"), (({}, "x"), "deployment"), ((dep, None), "directory")]:
        with pytest.raises(servesim.Error, match=words):
            servesim.emit(*args)
    for args in [("p5en.48xlarge", 2**40), (None, 1), ("p5en.48xlarge", float("nan")), ("p5en.48xlarge", 2.7),
                 ("p5en.48xlarge", True)]:
        with pytest.raises(servesim.Error):
            servesim.nccl(*args)
    with pytest.raises(servesim.Error, match="pd_ratios"):
        servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, ttft_ms=600, itl_ms=50, topology="disagg",
                        pd_ratios=[(1,)])
    with pytest.raises(servesim.Error, match="requests_per_client.*1..100000"):
        servesim.validate(CSV, requests_per_client=2**31)
    with pytest.raises(servesim.Error, match="seed"):
        servesim.validate(CSV, seed=-1)


@probe("W10")
def test_run_records_describe_what_ran(exe, aiperf, tmp_path):
    j = json.loads(ok(run(exe, "simulate", *M8, "--gpu", "h100", "--gpus", "1", "--tp", "1", "--precision", "fp8",
                          "--isl", "100", "--osl", "10", "--concurrency", "2", "--requests", "4", "--format", "json")).stdout)
    desc = json.dumps(j)
    assert "llama-3.1-8b on 1 x h100" in desc and "Nemotron 3 Super" not in desc
    out = ok(run(exe, "validate", aiperf)).stdout
    assert "24 measured requests after 4 warm-up (the folder's own)" in out


@probe("W11", "B11")
def test_nccl_sizes_are_whole_bytes_and_flags_are_named(exe):
    one_error(run(exe, "nccl", "--min-bytes", "1.5", "--max-bytes", "7.5"), "--min-bytes", "whole number of bytes")
    one_error(run(exe, "nccl", "--min-bytes", "0"), "--min-bytes")
    one_error(run(exe, "nccl", "--nodes", "2147483648"), "--nodes", "1..1024")
    j = json.loads(ok(run(exe, "nccl", "--min-bytes", "2", "--max-bytes", "8", "--format", "json")).stdout)
    assert [r["bytes"] for r in j["rows"]] == [2, 4, 8] and "-b 2 -e 8" in j["command"]


@probe("W12")
def test_empty_names_and_duplicate_columns_are_refused(exe, tmp_path):
    mf = tmp_path / "_config.json"   # an HF config named by its stem: ""
    shutil.copy(LLAMA, mf)
    one_error(run(exe, "search", "--model-file", mf, *L8), "name: must not be empty")
    f = write_csv(tmp_path / "dup.csv", row() + ",2048", header=HEADER + ",isl")
    one_error(run(exe, "validate", f), "header", "column 'isl' appears twice")


@probe("W13")
def test_validate_results_are_the_same_bytes_at_any_thread_count(exe, tmp_path):
    outs = [ok(run(exe, "validate", CSV, "--model-file", LLAMA, "--threads", t, "--format", fmt)).stdout
            for fmt in ("json", "table") for t in (1, 2)]
    assert outs[0] == outs[1] and outs[2] == outs[3]


# ---- bad message -----------------------------------------------------------------------------

@probe("B1")
def test_csv_layouts_excel_writes_are_read(exe, tmp_path):
    plain = json.loads(ok(run(exe, "validate", write_csv(tmp_path / "a.csv", row()), "--format", "json")).stdout)
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "a.csv").read_bytes())
    cr = write_csv(tmp_path / "cr.csv", row(), newline="\r")
    crlf = write_csv(tmp_path / "crlf.csv", row(), newline="\r\n")
    quoted = write_csv(tmp_path / "q.csv", row(silicon_data_source='"src\nsecond line; silicon_concurrency=8"'))
    for f in (bom, cr, crlf, quoted):
        j = json.loads(ok(run(exe, "validate", f, "--format", "json")).stdout)
        assert j["points"][0]["predicted"] == plain["points"][0]["predicted"], f


@probe("B2")
def test_raw_library_errors_become_named_lines(exe, aiperf, tmp_path):
    f = write_csv(tmp_path / "u.csv", row(id="p\udcff\udcfe_c8_tp1_a"))
    one_error(run(exe, "validate", f, "--format", "json"), "line 2", "invalid UTF-8")
    d = folder(aiperf, tmp_path, "phase", jsonl=json.dumps({"metadata": {"benchmark_phase": 7}}) + "\n")
    one_error(run(exe, "validate", d), "line 1: metadata.benchmark_phase", "expected a string")
    c = tmp_path / "cal"
    c.mkdir()
    (c / "gemm.json").write_text(json.dumps({"family": "gemm", "kernels": 5, "points": []}))
    one_error(run(exe, "calibrate", "fit", c), "kernels", "expected a list")


@probe("B3")
def test_huge_derived_fields_are_range_checked(exe, aiperf, tmp_path):
    def no_isl(doc):
        doc["records"]["input_sequence_length"]["avg"] = 1e300
        doc["input_config"]["workload"].pop("isl", None)
    d = folder(aiperf, tmp_path, "isl", agg=no_isl)
    one_error(run(exe, "validate", d), "input_sequence_length.avg", "is not a token count")

    def conc(doc):
        doc["input_config"]["workload"].pop("concurrency", None)
        doc["input_config"]["loadgen"] = {"concurrency": 1e300}
    d = folder(aiperf, tmp_path, "conc", agg=conc)
    one_error(run(exe, "validate", d), "loadgen.concurrency", "is not a client count")


@probe("B4")
def test_a_tp_wider_than_the_instance_is_named(exe):
    one_error(run(exe, "search", "--model", "llama-3.1-70b", "--gpu", "h200", "--isl", "1000", "--osl", "100", "--tp", "16",
                  "--topology", "agg", "--ttft-ms", "600", "--itl-ms", "50", "--target-tps", "1000"),
              "--tp: 16: larger than the 8 GPUs of p5en.48xlarge")


@probe("B5")
def test_zero_load_is_refused_not_ignored(exe):
    i = L8.index("--target-tps")
    args = L8[:i] + L8[i + 2:]
    for flag in ("--target-tps", "--target-rps", "--total-gpus"):
        one_error(run(exe, "search", *M8, *args, flag, "0"), flag)
    with pytest.raises(servesim.Error, match="target_tps|--target-tps"):
        servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, ttft_ms=600, itl_ms=50, target_tps=0)


@probe("B6")
def test_the_gpu_budget_is_named_and_pruned_before_simulating(exe):
    out = ok(run(exe, "search", *M8, "--gpu", "h200", "--isl", "1000", "--osl", "100", "--tp", "2,4", "--topology", "agg",
                 "--ttft-ms", "600", "--itl-ms", "50", "--total-gpus", "1"))
    assert "No configuration was simulated" in out.stdout and "more than --total-gpus 1" in out.stdout
    assert " 0 simulated" in out.stdout


@probe("B7")
def test_out_of_memory_names_what_drove_it(exe):
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))
    out = subprocess.run([exe, "search", "--model", "nemotron-3-super", "--gpu", "h200,h100,b200", "--isl", "4000",
                          "--osl", "500", "--ttft-ms", "600", "--itl-ms", "50", "--max-num-seqs",
                          ",".join(map(str, range(1, 60))), "--max-num-batched-tokens",
                          ",".join(map(str, range(16, 4000, 16))), "--threads", "1"],
                         capture_output=True, text=True, timeout=120, preexec_fn=limit)
    if out.returncode == 1 and "out of memory" in out.stderr:
        one_error(out, "out of memory (the search space")
    else:
        one_error(out, "more than 50000 configurations")


@probe("B8")
def test_scenario_and_seed_are_checked_once(exe, tmp_path):
    sc = tmp_path / "sc.json"
    sc.write_text(json.dumps({"engine": {"max_num_seqs": -5}}))
    one_error(run(exe, "validate", CSV, "--model-file", LLAMA, "--scenario", sc), "max_num_seqs")
    sc.write_text(json.dumps({"engine": {"no_such_knob": 1}}))
    one_error(run(exe, "validate", CSV, "--model-file", LLAMA, "--scenario", sc), "no_such_knob")
    one_error(run(exe, "validate", CSV, "--seed", "-1"), "--seed", "must be >= 0")


@probe("B9")
def test_one_bad_folder_is_listed_not_fatal(exe, aiperf, tmp_path):
    multi = tmp_path / "multi"
    multi.mkdir()
    shutil.copytree(aiperf, multi / "a_good")
    folder(aiperf, multi, "b_bad", jsonl="{not json\n")
    shutil.copytree(aiperf, multi / "c_good")
    os.symlink("loop", multi / "loop")
    j = json.loads(ok(run(exe, "validate", multi, "--format", "json")).stdout)
    assert j["counts"]["ran"] == 2 and j["counts"]["unmodellable"] == 1
    bad = next(p for p in j["points"] if p["id"] == "b_bad")
    assert "invalid JSON" in bad["unmodellable"] and "line 1" in bad["unmodellable"]


@probe("B10")
def test_output_paths_and_ranges_are_checked_before_the_run(exe, tmp_path):
    t = time.time()
    one_error(run(exe, "validate", CSV, "--output", "x.txt", cwd=tmp_path), "--output", "give a .csv or .json file")
    one_error(run(exe, "validate", CSV, "--plot", "nodir/x.png", cwd=tmp_path), "--plot", "nodir: folder does not exist")
    one_error(run(exe, "validate", CSV, "--write-bands", "b.json", "--band-min-points", "0", "--output", "late.csv",
                  cwd=tmp_path), "--band-min-points")
    assert time.time() - t < 5 and not (tmp_path / "late.csv").exists()
    (tmp_path / "afile").write_text("hi")
    one_error(run(exe, "search", *M8, *L8, "--emit", "afile", cwd=tmp_path), "afile: is a file, not a folder")
    one_error(run(exe, "search", *M8, *L8, "--plot", "nodir/x.png", cwd=tmp_path), "--plot", "nodir")


@probe("B12")
def test_dask_addresses(exe):
    one_error(run(exe, "search", *M8, *L8, "--dask", ""), "--dask", "give the Dask scheduler's address")
    out = run(exe, "search", *M8, *L8, "--dask", "-h", "--dask-timeout", "1")
    assert "expected one argument" not in out.stderr and out.returncode != 0
    pytest.importorskip("distributed")
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def garbage():   # answers every connection with bytes that are not Dask's protocol
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            try:
                c.sendall(b"HTTP/1.0 400 garbage\r\n\r\n" * 50)
            finally:
                c.close()
    threading.Thread(target=garbage, daemon=True).start()
    try:
        t = time.time()
        out = run(exe, "search", *M8, *L8, "--dask", f"tcp://127.0.0.1:{srv.getsockname()[1]}", "--dask-timeout", "3")
        one_error(out, "--dask", "does not speak the Dask protocol")
        assert time.time() - t < 30
    finally:
        srv.close()


@probe("B14")
def test_csv_fields_parse_decimal_digits_only(exe, tmp_path):
    cases = [(row(silicon_data_source="src; silicon_concurrency=-8"), "silicon_concurrency=-8: expected a whole number"),
             (row(tp_size="1000000000"), "tp_size"), (row(isl="0x400"), "line 2: isl"), (row(isl=" 1024"), "line 2: isl")]
    for i, (r, words) in enumerate(cases):
        one_error(run(exe, "validate", write_csv(tmp_path / f"b{i}.csv", r)), words)


# ---- follow-up probes (P1-P5) ------------------------------------------------------------------

@probe("P1", "P2", "P3", "P4", "P5", "P6")
def test_follow_up_probes(exe, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):   # root ignores the mode: nothing to check here
            pass
        else:
            one_error(run(exe, "search", *M8, *L8, "--emit", ro / "em"), "--emit", "cannot create the folder")
            assert not list(ro.iterdir())
    finally:
        ro.chmod(0o755)
    f = write_csv(tmp_path / "in.csv", row())
    before = f.read_bytes()
    one_error(run(exe, "validate", f, "--output", f.with_name("./in.csv")), "--output", "is the input")
    assert f.read_bytes() == before
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("x")
    t = time.time()
    one_error(run(exe, "plan", "--model", "nemotron-3-nano", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision",
                  "bf16", "--isl", "500", "--osl", "20", "--ttft-ms", "500", "--itl-ms", "50", "--target-tps", "1000",
                  "--concurrency", "1,2", "--requests", "10", "--topology", "agg", "--emit", tmp_path / "busy"),
              "mine.txt", "servesim did not write")
    assert time.time() - t < 5
    (tmp_path / "adir.png").mkdir()
    one_error(run(exe, "search", *M8, *L8, "--plot", tmp_path / "adir.png"), "--plot", "is a folder, not a file")
    for flag in ("--emit", "--output", "--plot"):
        one_error(run(exe, "search", *M8, *L8, flag, ""), flag, "give a file or folder name")
    for kw in ({"seed": -1}, {"requests": 2**40}):
        with pytest.raises(servesim.Error):
            servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, ttft_ms=600, itl_ms=50, **kw)


CAL = os.path.join(SRC, "tests", "sim", "data", "h200-slow-kernels.calibration.json")
SIM8 = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--isl", "500", "--osl", "20",
        "--concurrency", "2", "--requests", "8", "-q"]


@probe("R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8")
def test_probe_round_three(exe, tmp_path):
    """Calibration profiles edited by hand, a scenario naming an empty profile, planner bounds,
    Python calls with wrong types, an --emit folder holding a user's own file named like ours, and
    an SGLang deployment emitted twice."""
    prof = json.load(open(CAL))

    def edited(name, change):
        p = json.loads(json.dumps(prof))
        change(p)
        f = tmp_path / name
        f.write_text(json.dumps(p))
        return f

    def dup(p):
        p["parameters"].append(dict(p["parameters"][0], value=5))

    # R1-R3: a duplicated parameter, another format version, an unknown scope: refused, never half-read.
    one_error(run(exe, *SIM8, "--calibration", edited("dup.json", dup)), "dup.json", "parameters[3].name",
              "'gemm_scale' appears twice")
    one_error(run(exe, *SIM8, "--calibration", edited("v.json", lambda p: p.update(servesim_calibration=99))),
              "servesim_calibration", "format version 99")
    one_error(run(exe, *SIM8, "--calibration",
                  edited("s.json", lambda p: p["parameters"][0].update(scope="world"))), "parameters[0].scope", "gpu+engine")
    # R4: a scenario naming "" as its calibration.
    sc = tmp_path / "sc.json"
    sc.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "gpus": 1, "calibration": "",
                              "workload": {"isl": 500, "osl": 20, "concurrency": 2, "requests": 8}}))
    one_error(run(exe, "simulate", "--scenario", sc, "-q"), "sc.json", "calibration", "empty file name")
    # R5: a planner floor above its ceiling (it had held the ceiling and printed "-100 % saved").
    one_error(run(exe, "planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--isl", "500", "--osl", "50",
                  "--peak-rps", "5", "--ttft-ms", "1000", "--itl-ms", "50", "--hours", "0.05", "--min-workers", "5",
                  "--max-workers", "2"), "--min-workers", "more than --max-workers 2")
    # R6: Python: a calibration or calibrate_e2e input of the wrong type is one servesim.Error.
    sc8 = {"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "gpus": 1,
           "workload": {"isl": 100, "osl": 10, "concurrency": 1, "requests": 2}}
    for bad in (5, float("nan"), ["a.json"]):
        with pytest.raises(servesim.Error, match="calibration: expected a file name"):
            servesim.simulate(sc8, calibration=bad)
    for bad in (None, 5, []):
        with pytest.raises(servesim.Error, match="calibrate_e2e"):
            servesim.calibrate_e2e(bad)
    with pytest.raises(servesim.Error, match="shrink: expected true or false"):
        servesim.calibrate_e2e("points.csv", shrink="yes")
    # R7: a user's own vllm-serve.sh in the --emit folder is never replaced.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "vllm-serve.sh").write_text("my own\n")
    one_error(run(exe, "search", *M8, *L8, "--emit", mine), "vllm-serve.sh", "no deployment.json of an earlier emitted set")
    assert (mine / "vllm-serve.sh").read_text() == "my own\n" and len(list(mine.iterdir())) == 1
    # R8: an SGLang deployment (gpu_memory_utilization 0: SGLang's heuristic) emits, and again over itself.
    sg = tmp_path / "sg"
    for _ in range(2):
        out = run(exe, "search", *M8, *L8, "--engine", "sglang", "--emit", sg)
        assert out.returncode == 0, out.stderr
    assert (sg / "sglang-launch.sh").exists() and "--mem-fraction-static" not in (sg / "sglang-launch.sh").read_text()


@probe("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9")
def test_probe_round_four(exe, tmp_path):
    """Planner options, scenario files with every field wrong in turn, --emit through symbolic
    links, Python calls with wrong types, contradictory SLOs."""
    plan = ["planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8", "--isl", "500",
            "--osl", "50", "--ttft-ms", "1000", "--itl-ms", "50", "--hours", "0.05", "--no-fixed-fleet", "-q"]
    # Q1: the planner's day carries the scenario's images (it had sent text-only prompts while its
    # workers were profiled with the images): 10 minutes at 1 request/s on one B200, every request
    # with a 1024x1024 image (1,280 vision tokens on a 1,000-token prompt) against none.
    csv = tmp_path / "flat.csv"
    csv.write_text("time_s,rps\n0,1\n600,1\n")
    base = dict(model="nemotron-3.5-super-vl", gpu="b200", gpus=1, tp=1, precision="nvfp4", isl=1000, osl=50)
    ttft = {}
    for name, extra in (("text", {}), ("image", dict(images="1024x1024"))):
        day = servesim.planner(servesim.scenario(**base, **extra), load_profile=str(csv), ttft_ms=5000, itl_ms=500,
                               replica_rps=2, arrivals="uniform", fixed_fleet=False)
        ttft[name] = max(iv["ttft_p90_ms"] for iv in day["timeline"])
    assert ttft["image"] > 1.5 * ttft["text"], ttft
    # Q2: a reserved price of 0 or less (it had been taken for "not given" and ignored).
    for bad in ("-1", "0"):
        one_error(run(exe, *plan, "--peak-rps", "2", "--replica-rps", "4", "--reserved-price", bad), "reserved_price")
    # Q3: a role's capacity for a role the topology has not (it had been silently unused).
    one_error(run(exe, *plan, "--peak-rps", "2", "--prefill-rps", "3"), "--prefill-rps", "--topology disagg", "--replica-rps")
    one_error(run(exe, *plan, "--peak-rps", "2", "--topology", "disagg", "--replica-rps", "3"), "--replica-rps",
              "--prefill-rps and --decode-rps")
    # Q4: a peak beyond 10^7 requests/s was told "must be > 0".
    one_error(run(exe, *plan, "--peak-rps", "1e12"), "--peak-rps", "below 10^7", "got 1e+12")
    # Q5: --emit naming a dangling symbolic link was "is a file"; a link to a folder is followed.
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    one_error(run(exe, "search", *M8, *L8, "--emit", tmp_path / "dangling"), "symbolic link to a missing target")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    ok(run(exe, "search", *M8, *L8, "--emit", tmp_path / "link"))
    assert (tmp_path / "real" / "vllm-serve.sh").exists()
    # Q6: recommend with an SLO no GPU can meet names the floor (it said only "at the swept concurrencies").
    out = ok(run(exe, "recommend", *M8, "--gpu", "h100", "--isl", "500", "--osl", "50", "--ttft-ms", "0.01", "--itl-ms", "50",
                 "--target-rps", "1", "-q"))
    assert "cannot meet the SLO (e.g. " in out.stdout and "TTFT cannot go below" in out.stdout
    # Q7: Python: a float where a list of whole numbers goes, prefix_caching=True, a bad reserved split.
    with pytest.raises(servesim.Error, match=r"tp: expected a whole number, a list or a comma-separated string, got 1\.5"):
        servesim.search(model="llama-3.1-8b", gpu="h100", isl=100, osl=10, ttft_ms=100, itl_ms=10, tp=1.5)
    r = servesim.search(model="llama-3.1-8b", gpu="h100", precision="fp8", tp=1, topology="agg", isl=500, osl=20, ttft_ms=500,
                        itl_ms=50, concurrency=1, requests=10, prefix_caching=True, threads=1)
    assert {c["prefix_caching"] for c in r["configurations"]} == {"on"}
    with pytest.raises(servesim.Error, match="usd_per_gpu_hour: expected a price"):
        servesim.reserved_split({"usd_per_gpu_hour": "5", "seconds_at_gpus": [0, 100]}, reserved_discount=0.2)
    with pytest.raises(servesim.Error, match=r"reserved_discount: expected a fraction .* got 2"):
        servesim.reserved_split({"usd_per_gpu_hour": 5, "seconds_at_gpus": [0, 100]}, reserved_discount=2)
    # Q8: a scenario with each field wrong in turn (wrong type, negative, huge, NaN): a result or one line.
    sc = {"model": "llama-3.1-8b", "gpu": "h200", "gpus": 2, "tensor_parallel_size": 1, "precision": "fp8",
          "engine": {"max_num_seqs": 64, "enable_prefix_caching": True}, "router": {"kind": "kv"}, "kv_offload": {"cpu_gib": 10},
          "workload": {"concurrency": 4, "isl": 1000, "osl": 20, "requests": 8, "shared_prefix_tokens": 512}}
    f = tmp_path / "s.json"
    for path in (("model",), ("gpus",), ("precision",), ("engine", "max_num_seqs"), ("router", "kind"), ("kv_offload", "cpu_gib"),
                 ("workload", "isl"), ("workload", "shared_prefix_tokens"), ("workload", "requests")):
        for bad in ("x", -1, [], 1e308, 2**70, "nan"):
            s = json.loads(json.dumps(sc))
            t = s
            for k in path[:-1]:
                t = t[k]
            t[path[-1]] = bad
            f.write_text(json.dumps(s).replace('"nan"', "NaN") if bad == "nan" else json.dumps(s))
            out = run(exe, "simulate", "--scenario", f, "-q")
            if out.returncode != 0:
                one_error(out, "s.json")
    # Q9: the same shared prefix in a dataset run is refused, naming both.
    s = json.loads(json.dumps(sc))
    s["workload"]["dataset"] = {"entries": 4}
    f.write_text(json.dumps(s))
    one_error(run(exe, "simulate", "--scenario", f, "-q"), "shared_prefix_tokens", "dataset")


def test_every_probe_case_is_exercised():
    want = {f"C{i}" for i in (1, 2)} | {f"S{i}" for i in range(1, 6)} | {f"H{i}" for i in range(1, 5)} | \
           {f"D{i}" for i in range(1, 5)} | {f"W{i}" for i in range(1, 14)} | {f"B{i}" for i in range(1, 15)} | \
           {f"P{i}" for i in range(1, 7)} | {f"R{i}" for i in range(1, 9)} | {f"Q{i}" for i in range(1, 10)}
    assert want <= PROBED, sorted(want - PROBED)
