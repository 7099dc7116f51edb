"""Regressions of the bad-input probe (crashes, shell injection, runaway input, partial output):
every reproduction gives one error line and a non-zero exit, or a correct result. The CLI runs
as a subprocess (SERVESIM_BIN); the bindings run in a child interpreter where a crash would kill
the test process."""
import json
import os
import resource
import subprocess
import sys

import pytest

import servesim

N8 = ["--model", "nemotron-3-super", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--precision", "fp8"]
# A small plan: two concurrencies of a small model on one node.
PLAN = ["plan", "--model", "nemotron-3-nano", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "bf16",
        "--isl", "500", "--osl", "20", "--ttft-ms", "500", "--itl-ms", "50", "--target-tps", "1000",
        "--concurrency", "1,2", "--requests", "10", "--topology", "agg"]
SANITIZED = bool(os.environ.get("SERVESIM_SANITIZED"))

# Which defects of the bad-input probe (#1-#35, one reproduction each) a test runs; the last test
# checks that every one is exercised.
PROBED = set()


def probe(*numbers):
    PROBED.update(numbers)
    return lambda f: f


def run(exe, *args, cwd=None, timeout=60, limit_as=None):
    pre = None
    if limit_as:
        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          preexec_fn=pre)


def one_error(out, *words):
    """rc 2 (or 1), exactly one line on stderr starting 'servesim: error:', containing `words`."""
    assert out.returncode in (1, 2), (out.returncode, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("servesim: error: "), out.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def deep(n=100_000):
    return "[" * n + "]" * n


# ---- #1, #2: deeply nested JSON ---------------------------------------------------------------

@probe(1)
def test_deep_scenario_is_refused(exe, tmp_path):
    f = tmp_path / "d.json"
    f.write_text('{"description":' + deep() + ',"workload":{"concurrency":1,"isl":10,"osl":10}}')
    for cmd in ("simulate", "sweep"):
        extra = ["--concurrency", "1,2"] if cmd == "sweep" else []
        one_error(run(exe, cmd, "--scenario", f, *extra), "nested deeper than 64 levels")


@probe(1)
def test_deep_trace_hw_and_model_files_are_refused(exe, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"input_length": ' + deep() + '}\n')
    scen = tmp_path / "s.json"
    scen.write_text(json.dumps({"workload": {"trace": str(trace), "concurrency": 1}}))
    one_error(run(exe, "simulate", "--scenario", scen), "line 1", "nested deeper")
    hw = tmp_path / "hw.json"
    hw.write_text('{"gpus": ' + deep() + '}')
    one_error(run(exe, "--hw-file", hw, "list", "gpus"), "nested deeper")
    model = tmp_path / "m.json"
    model.write_text('{"model_type": ' + deep() + '}')
    one_error(run(exe, "memory", "--model-file", model, "--gpu", "h200"), "nested deeper")


@probe(2)
def test_deep_python_scenario_raises_error():
    # In a child interpreter: before the fix this segfaulted.
    code = ("import servesim\nx=[]\nfor i in range(200000): x=[x]\ns=servesim.default_scenario();s['description']=x\n"
            "try:\n  servesim.simulate(s)\nexcept servesim.Error as e: print('ERR', e)\n"
            "t='{\"description\":' + '['*100000 + ']'*100000 + '}'\n"
            "for f in (servesim.simulate, lambda t: servesim.sweep(t, concurrency=[1])):\n"
            "  try:\n    f(t)\n  except servesim.Error as e: print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    errs = [line for line in out.stdout.splitlines() if line.startswith("ERR")]
    assert len(errs) == 3 and all("nested" in e for e in errs), out.stdout


@probe(32)
def test_duplicate_keys_are_refused(exe, tmp_path):
    # #32: {"tp": 8, "tp": 4} was silently TP4.
    f = tmp_path / "dup.json"
    f.write_text('{"model": "nemotron-3-super", "gpu": "h200", "gpus": 8, "tp": 8, "tp": 4, "precision": "fp8",'
                 ' "workload": {"concurrency": 1, "isl": 100, "osl": 10, "requests": 2}}')
    one_error(run(exe, "simulate", "--scenario", f), "tp", "twice")
    with pytest.raises(servesim.Error, match="twice"):
        servesim.simulate('{"seed": 1, "seed": 2}')


# ---- #3: thread creation failure ---------------------------------------------------------------

@probe(3)
@pytest.mark.skipif(SANITIZED, reason="an address-space limit and AddressSanitizer's shadow memory do not mix")
def test_thread_creation_failure_is_an_error(exe):
    conc = ",".join(str(i) for i in range(1, 401))
    out = run(exe, "sweep", "--requests", 400, "--isl", 100, "--osl", 5, "--concurrency", conc, "--threads", 400,
              limit_as=1_500_000_000)
    one_error(out, "--threads", "cannot start worker thread")
    code = ("import resource,servesim\nresource.setrlimit(resource.RLIMIT_AS,(1_500_000_000,1_500_000_000))\n"
            "s=servesim.scenario(isl=100,osl=5,requests=1000)\n"
            "try:\n  servesim.sweep(s, concurrency=list(range(1,1001)), threads=100000)\n"
            "except servesim.Error as e: print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ERR" in out.stdout and "threads" in out.stdout, (out.returncode, out.stderr)


def test_results_do_not_depend_on_threads(exe):
    args = ["sweep", "--requests", 30, "--isl", 300, "--osl", 20, "--concurrency", "1,3,8,17", "--format", "json"]
    one = run(exe, *args, "--threads", 1)
    many = run(exe, *args, "--threads", 4)
    assert one.returncode == 0 and one.stdout == many.stdout


# ---- #4, #17, #18, #19: charts without a shell, atomic outputs ------------------------------------

@probe(4)
def test_plot_path_is_never_shell_parsed(exe, tmp_path):
    evil = "x'; touch PWNED; echo '.png"
    out = run(exe, *PLAN, "--plot", evil, cwd=tmp_path, timeout=120)
    assert not (tmp_path / "PWNED").exists()
    assert out.returncode == 0, out.stderr
    assert (tmp_path / evil).stat().st_size > 10_000
    assert (tmp_path / "x'; touch PWNED; echo '-throughput.png").exists()
    out = run(exe, *PLAN, "--plot", "bob's plot.png", cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    for f in ("bob's plot.png", "bob's plot-throughput.png", "bob's plot-sweep.json", "bob's plot-plan.json"):
        assert (tmp_path / f).stat().st_size > 100
    # A name without .png: the chart is NAME.png, and the report says so.
    out = run(exe, *PLAN, "--plot", "noext", cwd=tmp_path, timeout=120)
    assert "Charts: noext.png" in out.stdout and (tmp_path / "noext.png").exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


@probe(17, 18, 19)
def test_plot_failures_are_one_line_and_leave_nothing(exe, tmp_path):
    one_error(run(exe, *PLAN, "--plot", tmp_path / "nodir" / "p.png"), "--plot", "nodir", "does not exist")
    (tmp_path / "p-throughput.png").mkdir()   # the second chart cannot be written
    out = run(exe, *PLAN, "--plot", tmp_path / "p.png", timeout=120)
    one_error(out, "--plot")
    assert sorted(os.listdir(tmp_path)) == ["p-throughput.png"]


@probe(18)
def test_plotter_errors_are_one_line(tmp_path):
    from servesim import plot
    bad = tmp_path / "bad.json"
    bad.write_text('{"concurrency": [1, 2], "ttft_p50_ms": [1], "itl_p50_ms": [1, 2], "output_tps_per_gpu": [1, 2],'
                   ' "output_tps_per_user": [1, 2]}')
    (tmp_path / "o.png").mkdir()
    env = dict(os.environ, MPLBACKEND="Agg")
    for args in ([str(bad), "-o", str(tmp_path / "x.png")], [str(bad), "-o", str(tmp_path / "o.png")],
                 [str(tmp_path / "missing.json")]):
        out = subprocess.run([sys.executable, "-m", "servesim.plot", *args], capture_output=True, text=True, env=env,
                             timeout=60)
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
        assert out.stderr.startswith("servesim.plot: error: ")
    assert plot  # imported


@probe(17)
def test_export_is_all_or_nothing(exe, tmp_path):
    (tmp_path / "p1" / "profile_export_aiperf.csv").mkdir(parents=True)
    one_error(run(exe, "simulate", *N8, "--requests", 20, "--export", tmp_path / "p1"), "profile_export_aiperf.csv")
    assert os.listdir(tmp_path / "p1") == ["profile_export_aiperf.csv"]


def test_sweep_output_is_atomic(exe, tmp_path):
    (tmp_path / "out.csv").mkdir()
    one_error(run(exe, "sweep", "--concurrency", "1,2", "--requests", 5, "--isl", 100, "--osl", 5, "--output",
                  tmp_path / "out.csv"))
    assert os.listdir(tmp_path) == ["out.csv"]


# ---- #6, #22: input files ----------------------------------------------------------------------

@probe(6, 22)
@pytest.mark.parametrize("flag", ["scenario", "hw", "model"])
def test_non_regular_inputs_are_refused_without_reading(exe, tmp_path, flag):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in (("/dev/zero", "character device"), (str(fifo), "FIFO"), (str(tmp_path), "directory")):
        args = {"scenario": ["simulate", "--scenario", path],
                "hw": ["list", "gpus", "--hw-file", path],
                "model": ["memory", "--model-file", path, "--gpu", "h200"]}[flag]
        out = run(exe, *args, timeout=20)
        one_error(out, path, what)


@probe(22)
def test_missing_trace_names_the_reason(exe, tmp_path):
    s = tmp_path / "s.json"
    s.write_text('{"workload":{"trace":"nope.jsonl","concurrency":1,"isl":1,"osl":1}}')
    one_error(run(exe, "simulate", "--scenario", s), "nope.jsonl", "No such file or directory")


@probe(31)
def test_hw_file_after_the_subcommand(exe, tmp_path):
    hw = tmp_path / "hw.json"
    gpus = servesim.gpus()
    h200 = next(g for g in gpus if g["name"] == "H200")
    hw.write_text(json.dumps({"gpus": [dict(h200, name="X9")]}))
    before = run(exe, "--hw-file", hw, "list", "gpus")
    after = run(exe, "list", "gpus", "--hw-file", hw)
    assert before.returncode == 0 and after.returncode == 0, after.stderr
    assert "X9" in after.stdout and before.stdout == after.stdout


# ---- #5: bounded runs --------------------------------------------------------------------------

@probe(5)
def test_requests_are_capped_with_a_reason(exe):
    one_error(run(exe, "simulate", *N8, "--requests", 1_000_000_000), "requests", "10^7")


def test_quiet_flag_exists(exe):
    out = run(exe, "simulate", *N8, "--requests", 20, "--quiet")
    assert out.returncode == 0 and out.stderr == ""


# ---- #7, #16, #21: plan arithmetic and messages ---------------------------------------------------

@probe(7)
def test_plan_huge_target_is_an_error_not_a_negative_count(exe):
    base = list(PLAN)
    i = base.index("--target-tps")
    for t in ("1e15", "inf"):
        args = base[:i + 1] + [t] + base[i + 2:]
        one_error(run(exe, *args, timeout=120), "--target-tps")
    args = base[:i + 1] + ["1e12"] + base[i + 2:] + ["--format", "json"]
    out = run(exe, *args, timeout=120)
    if out.returncode == 0:
        plan = json.loads(out.stdout)
        for t in plan["topologies"]:
            assert t["gpus"] >= 0 and t["replicas"] >= 0 and (t["usd_per_hour"] or 0) >= 0
    else:
        one_error(out, "--target-tps", "10^9")


@probe(16, 21)
def test_plan_zero_slo_and_osl_one_are_named(exe):
    i = PLAN.index("--ttft-ms")
    one_error(run(exe, *(PLAN[:i + 1] + ["0"] + PLAN[i + 2:])), "--ttft-ms", "> 0")
    i = PLAN.index("--target-tps")
    one_error(run(exe, *(PLAN[:i + 1] + ["0"] + PLAN[i + 2:])), "--target-tps", "> 0")
    i = PLAN.index("--osl")
    one_error(run(exe, *(PLAN[:i + 1] + ["1"] + PLAN[i + 2:])), "--osl", "two output tokens")


@probe(21)
def test_pp_zero_names_pp(exe):
    one_error(run(exe, "memory", "--model", "nemotron-3-super", "--gpu", "h200", "--pp", "0"), "--pp")


@probe(21)
def test_request_rate_list_in_simulate_names_request_rate(exe):
    one_error(run(exe, "simulate", "--request-rate", "1,2", "--requests", 5), "--request-rate")


# ---- #8: max_model_len --------------------------------------------------------------------------

@probe(8)
def test_prompt_longer_than_max_model_len_is_refused(exe):
    one_error(run(exe, "simulate", *N8, "--isl", 10_000_000, "--requests", 10), "max_model_len 262144")
    one_error(run(exe, "simulate", *N8, "--max-model-len", 100, "--isl", 2000, "--requests", 4), "max_model_len 100")


# ---- #9, #26: datasheet values out of physical range ----------------------------------------------

def hw_file(tmp_path, **changes):
    src = os.environ.get("SERVESIM_SOURCE_DIR")
    if not src:
        pytest.skip("SERVESIM_SOURCE_DIR not set")
    with open(os.path.join(src, "hwmodels", "data", "gpus.json")) as f:
        gpus = json.load(f)["gpus"]
    h200 = dict(next(g for g in gpus if g["name"] == "H200"), name="X1", **changes)
    p = tmp_path / "x1.json"
    p.write_text(json.dumps({"gpus": [h200]}))
    return p


@pytest.mark.parametrize("field,value", [("hbm_bw_bytes_per_s", 1e-300), ("bf16_flops", 1e-300),
                                         ("nvlink_bw_bytes_per_s", 1e-300), ("hbm_usable_bytes", 1e300)])
@probe(9, 26)
def test_absurd_datasheet_values_are_refused(exe, tmp_path, field, value):
    p = hw_file(tmp_path, **{field: value})
    one_error(run(exe, "--hw-file", p, "op", "gemm", "--gpu", "x1", "--m", 1, "--n", 1, "--k", 1), field, "between")


# ---- #10: NaN and inf never become the default -------------------------------------------------------

@probe(10)
@pytest.mark.parametrize("flag", ["--gpu-memory-utilization", "--step-overhead-ms", "--burstiness", "--isl-stddev"])
def test_nan_flags_are_refused(exe, flag):
    extra = ["--isl", 100] if flag == "--isl-stddev" else []
    one_error(run(exe, "simulate", *N8, "--requests", 10, *extra, flag, "nan"), flag, "finite")


def test_negative_stddev_is_refused(exe):
    one_error(run(exe, "simulate", *N8, "--requests", 10, "--isl", 100, "--isl-stddev", "-5"), "--isl-stddev")


@probe(21)
def test_request_rate_nan_is_named(exe):
    one_error(run(exe, "simulate", "--request-rate", "nan", "--requests", 5), "--request-rate", "finite")


@probe(10, 24)
def test_python_nan_is_refused():
    for kw in (dict(gpu_memory_utilization=float("nan")), dict(step_overhead_ms=float("inf"))):
        with pytest.raises(servesim.Error, match="finite"):
            servesim.simulate(servesim.scenario(requests=5, **kw))
    with pytest.raises(servesim.Error, match="out of range"):
        servesim.simulate(servesim.scenario(concurrency=2 ** 70))


# ---- #11: memory's engine knobs -----------------------------------------------------------------

@pytest.mark.parametrize("flag,value", [("--max-num-batched-tokens", "-100000000"), ("--max-num-seqs", "-5"),
                                        ("--num-speculative-tokens", "-50")])
@probe(11)
def test_memory_refuses_impossible_engine_knobs(exe, flag, value):
    one_error(run(exe, "memory", "--model", "nemotron-3-super", "--gpu", "h200", "--precision", "fp8", "--tp", 4,
                  flag, value), flag)


# ---- #13: more clients than requests ----------------------------------------------------------------

@probe(13)
def test_concurrency_above_requests_is_refused(exe):
    one_error(run(exe, "simulate", *N8, "--concurrency", 64, "--requests", 10), "64 clients", "10 requests")
    one_error(run(exe, "sweep", *N8, "--concurrency", "1,64", "--requests", 10), "--concurrency", "64 clients")


# ---- #14: images on a text-only model ------------------------------------------------------------

@probe(14)
def test_images_on_a_text_model_are_refused(exe, tmp_path):
    s = tmp_path / "mm.json"
    s.write_text(json.dumps({"model": "llama-3.1-70b", "gpu": "h200", "gpus": 8, "tp": 8, "workload": {
        "concurrency": 1, "requests": 2, "isl": 1000, "osl": 10,
        "multimodal": {"images": [{"width": 1024, "height": 1024, "count": 2}]}}}))
    one_error(run(exe, "simulate", "--scenario", s), "multimodal", "no vision encoder")
    one_error(run(exe, "step", "--model", "nemotron-3-super", "--gpu", "h200", "--tp", 8, "--precision", "fp8",
                  "--vision-tiles", 5), "--vision-tiles", "no vision encoder")


# ---- #20: TP wider than NVLink -------------------------------------------------------------------

@probe(20)
def test_tp_beyond_nvlink_says_what_to_do(exe):
    one_error(run(exe, "step", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", 16), "--tp", "--pp")


# ---- #25: request-rate sweeps chart ----------------------------------------------------------------

@probe(25)
def test_plot_reads_request_rate_sweeps(exe, tmp_path):
    out = run(exe, "sweep", *N8, "--request-rate", "1,2", "--requests", 30, "--isl", 500, "--osl", 20,
              "--format", "json")
    assert out.returncode == 0, out.stderr
    src = tmp_path / "r.json"
    src.write_text(out.stdout)
    from servesim import plot
    assert plot.main([str(src), "-o", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").stat().st_size > 10_000


# ---- #29, #30: one rule for defaults; contradictory flags ---------------------------------------------

@probe(29)
def test_simulate_model_does_not_inherit_the_embedded_fp8_tp8(exe):
    out = run(exe, "simulate", "--model", "nemotron-3-nano", "--requests", 10)
    assert out.returncode == 0, out.stderr
    head = out.stdout.splitlines()[0]
    assert "bf16" in head and "fp8" not in head, head
    assert "defaults:" in out.stdout and "the checkpoint's" in out.stdout and "smallest shape" in out.stdout
    # The resolved TP is the one min-gpus finds for the model on the GPU.
    mg = [r for r in servesim.min_gpus("nemotron-3-nano", precisions=["bf16"], gpus=["h200"])][0]
    assert f"TP{mg['tp']}" in head, (head, mg)


@probe(30)
def test_gpu_and_instance_must_agree(exe):
    one_error(run(exe, "simulate", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", 8, "--gpus", 8, "--topology",
                  "agg", "--instance", "p6-b200.48xlarge", "--requests", 10), "--gpu", "disagree")
    one_error(run(exe, "op", "collective", "--gpu", "h200", "--instance", "p6-b200.48xlarge", "--op", "all-reduce",
                  "--gpus", 8, "--bytes", 1024), "disagree")


# ---- #32: wrong-shaped fields -------------------------------------------------------------------

@probe(32)
def test_wrong_shaped_engine_is_an_error(exe, tmp_path):
    s = tmp_path / "e.json"
    s.write_text('{"engine": [], "workload": {"concurrency": 1, "isl": 10, "osl": 10, "requests": 2}}')
    one_error(run(exe, "simulate", "--scenario", s, "--max-num-seqs", 4), "engine", "JSON object")


# ---- #35: the reference study's sweep goes on until an SLO binds ------------------------------------

@probe(35)
def test_plan_without_concurrency_extends_past_256(exe):
    out = run(exe, "plan", "--model", "nemotron-3-nano", "--instance", "p5en.48xlarge", "--nodes", 1, "--precision",
              "bf16", "--isl", 200, "--osl", 20, "--ttft-ms", 2000, "--itl-ms", 200, "--target-tps", 1000,
              "--topology", "agg", "--requests", 300, "--format", "json", timeout=300)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    conc = plan["sweep"]["columns"]["concurrency"]
    assert conc[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    top = plan["topologies"][0]
    # Either an SLO line was crossed (the advice names it) or the sweep reached 4096 clients.
    assert top["limited_by"] != "none" or max(conc) >= 4096
    assert conc == sorted(conc)


# ---- #23: nested text_config -------------------------------------------------------------------

@probe(23)
def test_text_config_models_name_the_reason(exe, tmp_path):
    f = tmp_path / "llama4.json"
    f.write_text(json.dumps({"model_type": "llama4", "text_config": {"hidden_size": 5120}, "vision_config": {}}))
    # Nested configs import; an incomplete one names the nested field that is missing.
    one_error(run(exe, "memory", "--model-file", f, "--gpu", "h200"), "text_config.vocab_size", "missing")


# ---- #24: Python errors are servesim.Error and name the argument ----------------------------------

@probe(24)
def test_python_errors_name_the_argument():
    s = servesim.scenario(isl=200, osl=10, requests=20, concurrency=2)
    r = servesim.sweep(s, concurrency="1,2")
    assert r["concurrency"] == [1, 2]
    with pytest.raises(servesim.Error, match="concurrency"):
        servesim.sweep(s, concurrency=["x"])
    with pytest.raises(servesim.Error, match="threads"):
        servesim.sweep(s, concurrency=[1], threads=-3)
    with pytest.raises(servesim.Error, match="out of range"):
        servesim.simulate(servesim.scenario(seed=2 ** 64))
    with pytest.raises(servesim.Error, match="concurrency"):
        servesim.plan(model="nemotron-3-nano", instance="p5en.48xlarge", nodes=1, precision="bf16", isl=100, osl=10,
                      ttft_ms=100, itl_ms=10, target_tps=10, concurrency=[1.7, 2])


@probe(24)
def test_python_errors_use_argument_names_not_flags():
    with pytest.raises(servesim.Error) as e:
        servesim.memory("nemotron-3-super", "h200", tp=0)
    assert str(e.value).startswith("tp: ") and "--" not in str(e.value)


# ---- #29: memory and step resolve what is left open the way simulate does ----------------------

@probe(29)
def test_memory_and_step_resolve_defaults_like_min_gpus(exe):
    # No --gpu, --precision or --tp: H200, the checkpoint's BF16, and the smallest shape that
    # serves the model (the min-gpus table's), printed in the header.
    mg = [r for r in servesim.min_gpus("llama-3.1-70b", precisions="bf16", gpus="h200") if r["precision"] == "bf16"][0]
    mem = servesim.memory("llama-3.1-70b")
    st = servesim.step("llama-3.1-70b")
    for r in (mem, st):
        assert (r["gpu"], r["precision"], r["tp"] * r["pp"]) == ("H200", "bf16", mg["min_gpus"])
        assert any("checkpoint" in n for n in r["defaults"])
    out = run(exe, "memory", "--model", "llama-3.1-70b")
    assert out.returncode == 0, out.stderr
    head = out.stdout.splitlines()
    assert head[0].startswith(f"servesim memory: llama-3.1-70b on H200, TP{mem['tp']}")
    assert head[1].startswith("(defaults: GPU H200 (none named); precision bf16 (the checkpoint's); TP")
    out = run(exe, "step", "--model", "llama-3.1-70b", "--tp", "0")
    assert out.returncode != 0 and "--tp" in out.stderr


# ---- The rest of the probe's reproductions, one test each where none above runs it -------------

@probe(12, 28)
def test_memory_kv_capacity_is_what_simulate_runs(exe):
    # #12: "max sequences at C" follows the KV capacity printed beside it; #28: simulate's KV pool
    # ("auto" = the checkpoint's dtype) is the one memory prints, and the 9216-token request runs.
    out = run(exe, "memory", "--model", "nemotron-3-super", "--gpu", "h100", "--precision", "fp8", "--tp", 2,
              "--context", 9216, "--format", "json")
    assert out.returncode == 0, out.stderr
    kv = json.loads(out.stdout)["kv_cache"]
    assert kv["max_concurrent_seqs"] == min(kv["max_num_seqs"], kv["usable_blocks"] // kv["blocks_per_seq"])
    sim = run(exe, "simulate", "--model", "nemotron-3-super", "--gpu", "h100", "--precision", "fp8", "--tp", 2,
              "--gpus", 2, "--isl", 8192, "--osl", 1024, "--requests", 4, "--concurrency", 4)
    assert sim.returncode == 0, sim.stderr
    assert f"KV blocks per replica: {kv['usable_blocks']} x {kv['block_size']} tokens" in sim.stdout


@probe(33)
def test_memory_max_sequences_never_exceed_max_num_seqs(exe):
    out = run(exe, "memory", "--model", "nemotron-3-super", "--gpu", "h200", "--precision", "fp8", "--tp", 4,
              "--context", 131072, "--max-num-seqs", 256, "--format", "json")
    assert out.returncode == 0, out.stderr
    kv = json.loads(out.stdout)["kv_cache"]
    assert kv["max_num_seqs"] == 256 and kv["max_concurrent_seqs"] <= 256
    assert kv["max_concurrent_seqs"] == min(256, kv["usable_blocks"] // kv["blocks_per_seq"])


@probe(15)
def test_kv_dtype_changes_decode_attention_time(exe):
    def attn(kv):
        out = run(exe, "step", "--model", "nemotron-3-super", "--gpu", "h200", "--tp", 8, "--precision", "fp8",
                  "--batch", 64, "--context", 100000, "--kv-cache-dtype", kv, "--format", "json")
        assert out.returncode == 0, out.stderr
        part = next(p for p in json.loads(out.stdout)["decode"]["parts"] if "decode attention" in p["op"])
        return part["seconds"], part["hbm_bytes"]
    (t8, b8), (t16, b16) = attn("fp8"), attn("bf16")
    assert b8 < 0.6 * b16 and t8 < 0.9 * t16   # FP8 KV reads half the bytes
    one_error(run(exe, "memory", "--model", "nemotron-3-super", "--gpu", "h200", "--kv-cache-dtype", "nvfp4"),
              "--kv-cache-dtype", "nvfp4")


@probe(20)
def test_tp_beyond_nvlink_in_simulate_and_plan(exe):
    one_error(run(exe, "simulate", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", 16, "--gpus", 16, "--topology",
                  "agg", "--instance", "p5en.48xlarge", "--nodes", 2, "--requests", 10), "--tp", "--pp")
    plan = [a for a in PLAN]
    plan[plan.index("--model") + 1] = "llama-3.1-70b"
    plan[plan.index("--nodes") + 1] = "2"
    one_error(run(exe, *plan, "--tp", 16), "--tp", "NVLink", "--pp")


@probe(21)
def test_role_flags_are_named(exe):
    one_error(run(exe, "simulate", "--model", "llama-3.1-70b", "--topology", "disagg", "--instance", "p5en.48xlarge",
                  "--nodes", 2, "--decode-tp", 3, "--requests", 5), "--decode-tp", "does not divide")
    one_error(run(exe, "simulate", "--model", "nemotron-3-nano", "--topology", "disagg", "--prefill-instance",
                  "p5en.48xlarge", "--decode-instance", "p6-b200.48xlarge", "--prefill-nodes", 1, "--prefill-workers", 5,
                  "--prefill-tp", 2, "--requests", 5), "--prefill-nodes", "raise --prefill-nodes")


@probe(21, 24)
def test_python_names_the_argument_of_a_bad_number():
    with pytest.raises(servesim.Error, match="isl"):
        servesim.simulate(servesim.scenario(isl=float("nan"), requests=5))
    with pytest.raises(servesim.Error, match="target_tps"):
        servesim.plan(model="nemotron-3-nano", instance="p5en.48xlarge", nodes=1, precision="bf16", isl=100, osl=10,
                      ttft_ms=100, itl_ms=10, target_tps=0, concurrency=[1])
    with pytest.raises(servesim.Error, match="concurrency"):
        servesim.min_gpus("nemotron-3-super", policy="vllm", concurrency=-5)


@probe(22)
def test_trace_request_that_does_not_fit_names_file_and_line(exe, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"input_length": 100, "output_length": 10}\n\n{"input_length": 300000, "output_length": 10}\n')
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"model": "nemotron-3-super", "gpu": "h200", "gpus": 8, "tp": 8, "precision": "fp8",
                             "workload": {"trace": "t.jsonl", "concurrency": 1}}))
    one_error(run(exe, "simulate", "--scenario", s), "t.jsonl: line 3", "max_model_len")
    # A request within max_model_len that the KV pool cannot hold: the same file and line.
    s.write_text(json.dumps({"model": "llama-3.1-70b", "gpu": "h100", "gpus": 4, "tp": 4, "precision": "bf16",
                             "engine": {"gpu_memory_utilization": 0.5},
                             "workload": {"trace": "t.jsonl", "concurrency": 1}}))
    out = run(exe, "simulate", "--scenario", s)
    one_error(out, "t.jsonl: line 3")
    assert "KV cache blocks" in out.stderr or "max_model_len" in out.stderr


@probe(22)
def test_missing_and_directory_model_files(exe, tmp_path):
    one_error(run(exe, "memory", "--model-file", tmp_path / "nope.json"), "nope.json", "No such file or directory")
    one_error(run(exe, "memory", "--model-file", tmp_path), "is a directory", "regular file")


@probe(27, 29)
def test_model_file_runs_everywhere_with_the_same_defaults(exe, tmp_path):
    src = os.environ.get("SERVESIM_SOURCE_DIR")
    if not src:
        pytest.skip("SERVESIM_SOURCE_DIR not set")
    f = os.path.join(src, "tests", "models", "data", "tiny-qwen3.json")
    mem = json.loads(run(exe, "memory", "--model-file", f, "--format", "json").stdout)
    out = run(exe, "simulate", "--model-file", f, "--requests", 4, "--isl", 100, "--osl", 10)
    assert out.returncode == 0, out.stderr
    head = out.stdout.splitlines()[0]
    # The checkpoint's precision and the smallest shape, as memory resolves them; not the embedded FP8/TP8.
    assert f"TP{mem['tp']}, {mem['precision']})" in head, (head, mem["tp"], mem["precision"])
    assert "defaults:" in out.stdout
    for cmd in (["step"], ["min-gpus"]):
        assert run(exe, *cmd, "--model-file", f).returncode == 0
    # A model file is read, never registered under its name.
    servesim.memory(model_file=f)
    with pytest.raises(servesim.Error, match="unknown model"):
        servesim.memory("tiny-qwen3")


@probe(32)
def test_open_loop_flags_in_a_closed_loop_are_refused(exe):
    one_error(run(exe, "simulate", *N8, "--requests", 10, "--arrival", "gamma", "--concurrency", 4), "--arrival",
              "--request-rate")
    one_error(run(exe, "simulate", *N8, "--requests", 10, "--burstiness", 2), "--burstiness", "--request-rate")
    with pytest.raises(servesim.Error, match="arrival"):
        s = servesim.scenario(requests=5, concurrency=2)
        s["workload"]["arrival"] = "gamma"
        servesim.simulate(s)
    assert run(exe, "simulate", *N8, "--requests", 10, "--request-rate", 5, "--burstiness", 2).returncode == 0


@probe(32)
def test_out_of_range_integers_are_refused_not_clamped(exe):
    for seed in ("99999999999999999999", "18446744073709551615"):
        one_error(run(exe, "simulate", *N8, "--requests", 5, "--seed", seed), "--seed", "out of range")
    with pytest.raises(servesim.Error, match="seed"):
        servesim.simulate('{"seed": 18446744073709551615, "workload": {"concurrency": 1, "isl": 10, "osl": 2, '
                          '"requests": 2}}')
    one_error(run(exe, "min-gpus", "--model", "nemotron-3-super", "--policy", "vllm", "--concurrency", -5),
              "--concurrency", ">= 1")


@probe(34)
def test_declared_fp8_checkpoint_is_sized_as_fp8(exe, tmp_path):
    cfg = {"model_type": "qwen3_moe", "hidden_size": 2048, "vocab_size": 151936, "num_hidden_layers": 48,
           "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
           "num_experts_per_tok": 8, "moe_intermediate_size": 768, "intermediate_size": 6144,
           "max_position_embeddings": 40960, "tie_word_embeddings": False}
    bf = tmp_path / "bf16.json"
    bf.write_text(json.dumps(cfg))
    f8 = tmp_path / "fp8.json"
    f8.write_text(json.dumps(dict(cfg, quantization_config={"quant_method": "fp8", "fmt": "e4m3"})))
    a = json.loads(run(exe, "memory", "--model-file", bf, "--tp", 1, "--format", "json").stdout)
    b = json.loads(run(exe, "memory", "--model-file", f8, "--tp", 1, "--format", "json").stdout)
    assert a["precision"] == "bf16" and b["precision"].startswith("fp8"), (a["precision"], b["precision"])
    # The quantized linears halve (FP8: 1 byte per weight instead of 2).
    assert b["weights_quantized_bytes"] == pytest.approx(a["weights_quantized_bytes"] / 2, rel=0.02)
    # --precision still overrides the checkpoint.
    c = json.loads(run(exe, "memory", "--model-file", f8, "--tp", 1, "--precision", "bf16", "--format", "json").stdout)
    assert c["precision"] == "bf16"


def test_huge_head_count_is_an_error_not_a_crash(exe, tmp_path):
    # Found by the fuzz driver: 2^32 KV heads became 0 as an int and divided by zero (SIGFPE).
    f = tmp_path / "kv.json"
    f.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "vocab_size": 1000, "num_hidden_layers": 2,
                             "num_attention_heads": 32, "num_key_value_heads": 2 ** 32, "intermediate_size": 100}))
    one_error(run(exe, "memory", "--model-file", f), "num_key_value_heads", "2^24")


def test_every_probe_defect_is_exercised():
    assert PROBED == set(range(1, 36)), sorted(set(range(1, 36)) - PROBED)


def test_plan_header_prints_the_resolved_configuration(exe):
    # Issue point 4: plan resolves precision, GPU, shape and KV dtype by the shared rule and says so.
    args = [a for a in PLAN if a not in ("--precision", "bf16")]
    out = run(exe, *args, "--format", "json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert (j["gpu"], j["precision"], j["kv_cache_dtype"]) == ("H200", "bf16", "bf16")
    mg = servesim.min_gpus("nemotron-3-nano", precisions="bf16", gpus="h200")[0]
    assert any(n.startswith(f"TP{mg['tp']} ") for n in j["defaults"]), j["defaults"]
    text = run(exe, *args).stdout.splitlines()
    assert text[0].startswith("Model nemotron-3-nano (bf16 weights, KV bf16) on 1 x p5en.48xlarge (H200)")
    assert text[1].startswith("(defaults: precision bf16 (the checkpoint's); TP")


def test_min_gpus_and_op_say_what_they_resolved(exe, tmp_path):
    # min-gpus tabulates the checkpoint's precision (and NVFP4) by default: a declared FP8 checkpoint
    # gets FP8 rows, not BF16 ones; op names the GPU it chose.
    cfg = {"model_type": "llama", "hidden_size": 4096, "vocab_size": 128256, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "max_position_embeddings": 8192, "quantization_config": {"quant_method": "fp8"}}
    f = tmp_path / "fp8.json"
    f.write_text(json.dumps(cfg))
    rows = json.loads(run(exe, "min-gpus", "--model-file", f, "--gpus", "h200", "--format", "json").stdout)
    assert sorted(r["precision"] for r in rows) == ["fp8", "nvfp4"], rows
    out = run(exe, "min-gpus", "--model-file", f, "--gpus", "h200")
    assert out.stdout.splitlines()[0] == "servesim min-gpus: fp8, precisions fp8, nvfp4, policy headroom", out.stdout
    assert [r["precision"] for r in servesim.min_gpus("llama-3.1-70b", gpus="h200")] == ["bf16", "nvfp4"]
    out = run(exe, "op", "gemm", "--m", 128, "--n", 4096, "--k", 4096)
    assert out.stdout.splitlines()[0] == "(defaults: GPU H200 (none named); dtype bf16)", out.stdout
    assert "defaults" not in run(exe, "op", "gemm", "--gpu", "b200", "--dtype", "fp8", "--m", 1, "--n", 8, "--k", 8).stdout
