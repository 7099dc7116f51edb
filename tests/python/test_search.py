"""search() / recommend() through the bindings, the deployment files they emit (the manifests parse
as YAML and name the workers and TP of the plan), and the pre-purchase figures checked by hand."""
import json
import os
import subprocess

import pytest

import servesim

yaml = pytest.importorskip("yaml")

SMALL = dict(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=400, itl_ms=25, concurrency=[1, 8, 32],
             requests=40, tp=[1, 2], pd_ratios=["1:1", (1, 2)])


def test_search_returns_frames():
    r = servesim.search(**SMALL)
    df = servesim.frame(r)
    assert len(df) == r["counts"]["configurations"]
    assert set(df["status"]) <= {"simulated", "does_not_fit", "cannot_meet_slo", "cannot_win"}
    assert (df["status"] == "simulated").sum() == r["counts"]["simulated"]
    fr = servesim.frontier_frame(r)
    assert len(fr) > 0
    # A frontier: within a family, per-GPU throughput falls as per-user throughput rises.
    for _, g in fr.groupby("family"):
        g = g.sort_values("output_tps_per_user")
        assert list(g["output_tps_per_gpu"]) == sorted(g["output_tps_per_gpu"], reverse=True)
    assert r["best"] is not None and r["best"]["score"]["itl_ms"] <= 25


def test_recommend_figures_by_hand():
    target = 20000
    r = servesim.recommend(**{**SMALL, "gpu": ["h100", "h200"]}, target_tps=target, mixed_gpus=False)
    rows = r["recommendations"]
    assert {x["gpu"] for x in rows} <= {"H100", "H200"} and rows
    tdp = {g["name"]: g["tdp_watts"] for g in servesim.gpus()}
    price = {i["name"]: i["usd_per_hour"] for i in servesim.instances()}
    for x in rows:
        assert x["usd_per_hour"] == pytest.approx(x["nodes"] * price[x["instance"]])
        assert x["usd_per_million_output_tokens"] == pytest.approx(x["usd_per_hour"] / (target * 3600) * 1e6)
        assert x["power_watts"] == pytest.approx(x["gpus"] * tdp[x["gpu"]])
        assert x["joules_per_output_token"] == pytest.approx(x["power_watts"] / target)
        assert x["capacity_tps"] >= target
        assert x["ttft_headroom_pct"] >= 0 and x["itl_headroom_pct"] >= 0
        _check_bands(r, x)
    # Every figure of a mode with measured runs in the embedded band table has a band (its kind's, or
    # the widest of the mode, marked widened); a mode without any says why it has none: a disaggregated
    # deployment never borrows aggregated runs'.
    cells = _band_cells()[0]
    modes = {k[2] for k in cells}
    for x in rows:
        cfg = r["configurations"][x["index"]]
        mode = "disagg" if cfg["kind"] == "disaggregated" else "agg"
        if mode in modes:
            assert "lo" in x["band"]["itl_ms"] and "lo" in x["band"]["capacity_tps"]
        else:
            assert "no band" in x["band"]["itl_ms"]["note"]
    usd = [x["usd_per_hour"] for x in rows]
    assert usd == sorted(usd)
    df = servesim.frame(r)
    assert len(df) == len(rows)


def test_recommend_headroom_sizes_for_more_and_prices_the_target():
    # headroom=0.5: each GPU type's winner is the one a target of 1.5 x 20000 picks (same copies,
    # GPUs, $/hour), while $ per million output tokens and joules per token stay those of the
    # 20000 tok/s actually asked for: the spare half is paid for, not served.
    target = 20000
    kw = {**SMALL, "gpu": ["h100", "h200"], "mixed_gpus": False}
    h = servesim.recommend(**kw, target_tps=target, headroom=0.5)
    big = servesim.recommend(**kw, target_tps=1.5 * target)
    assert h["objective"]["target_tps"] == target and h["objective"]["headroom"] == 0.5
    assert h["objective"]["sized_tps"] == pytest.approx(1.5 * target)
    assert [(x["label"], x["copies"], x["gpus"], x["usd_per_hour"]) for x in h["recommendations"]] == \
        [(x["label"], x["copies"], x["gpus"], x["usd_per_hour"]) for x in big["recommendations"]]
    for x in h["recommendations"]:
        assert x["capacity_tps"] >= 1.5 * target
        assert x["usd_per_million_output_tokens"] == pytest.approx(x["usd_per_hour"] / (target * 3600) * 1e6)
        assert x["joules_per_output_token"] == pytest.approx(x["power_watts"] / target)
    with pytest.raises(servesim.Error, match="headroom: sizes a load target"):
        servesim.search(**SMALL, total_gpus=8, headroom=0.2)


def test_recommend_spare_capacity_is_bracketed_by_the_copy_search():
    # Open loop, 100 requests/s + 20 % headroom: k copies met both SLOs at 120 requests/s (120 / k
    # each) and f fewer failed (120 / f each), so the k copies serve between 120 and 120 k / f
    # requests/s: spare over the 100 asked for between 20 % and 100 (1.2 k / f - 1) %.
    r = servesim.recommend(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=400, itl_ms=25, tp=[1, 2],
                           topology="agg", precision="fp8", target_rps=100, arrival="poisson", headroom=0.2)
    cols = r["sweep"]["columns"]
    for x in r["recommendations"]:
        k, score = x["copies"], r["configurations"][x["index"]]["score"]
        f = score["fewer_copies"]
        assert x["spare_pct"]["lo"] == pytest.approx(20)
        assert 1 <= f < k and x["spare_pct"]["hi"] == pytest.approx(100 * (1.2 * k / f - 1))
        meets = {c: m for i, c, m in zip(cols["index"], cols["concurrency"], cols["meets_slo"]) if i == x["index"]}
        assert meets[k] and not meets[f]   # open-loop rows carry the copy count as their concurrency
    # Closed loop: at least the copies x one copy's throughput at its SLO point, over the target.
    c = servesim.recommend(**SMALL, target_tps=20000)
    for x in c["recommendations"]:
        assert x["spare_pct"]["lo"] == pytest.approx(100 * (x["capacity_tps"] / 20000 - 1))
        assert x["spare_pct"]["hi"] is None and x["spare_pct"]["lo"] >= 0
    df = servesim.frame(r)
    assert list(df["spare_pct_lo"]) == [x["spare_pct"]["lo"] for x in r["recommendations"]]
    assert list(df["spare_pct_hi"]) == [x["spare_pct"]["hi"] for x in r["recommendations"]]


def _band_cells():
    with open(os.path.join(os.environ["SERVESIM_SOURCE_DIR"], "sim", "data", "prediction_bands.json")) as f:
        t = json.load(f)
    return {(c["gpu"], c.get("engine", "vllm"), c.get("mode", "agg"), c["metric"], c["regime"]): c for c in t["cells"]}, \
        t.get("min_points", 8), t.get("min_models", 1)


def _check_bands(result, rec):
    """Each figure's band is the figure x the table's ratio percentiles of its kind's cell: the GPU, the
    engine, the mode (aggregated or disaggregated) and the load regime of clients per replica (aggregated copy) or per decode
    worker (<= 16 light, <= 128 medium, above max_num_seqs saturated), falling back to the kind's "all" cell when the regime's
    is thin (under min_points runs or min_models models), then to the engine's cell of every GPU widened to the hull of it,
    the kind's own runs of all loads and the engine's every-GPU cell of the regime (when that one is not thin); a kind no run
    validated takes the widest validated band of its mode, marked widened."""
    cells, min_points, min_models = _band_cells()
    cfg = result["configurations"][rec["index"]]
    clients = rec["slo_concurrency"] / (cfg["decode_workers"] if cfg["kind"] == "disaggregated" else 1)
    regime = ("saturated" if clients > cfg["max_num_seqs"] else "light" if clients <= 16 else
              "medium" if clients <= 128 else "heavy")
    assert rec["band"]["load_regime"] == regime

    def ok(c):
        return c is not None and c["n"] >= min_points

    def enough(c):
        return ok(c) and (min_models <= 1 or c.get("models", 0) >= min_models)

    for key, metric, value in (("ttft_ms", "ttft", rec["ttft_ms"]), ("itl_ms", "itl", rec["itl_ms"]),
                               ("capacity_tps", "output_tps", rec["capacity_tps"])):
        gpu = (cfg["decode_gpu"] or cfg["gpu"]) if metric != "ttft" else cfg["gpu"]
        mode = "disagg" if cfg["kind"] == "disaggregated" else "agg"
        engine = cfg.get("engine", "vllm").split("-")[0]
        exact = cells.get((gpu.lower(), engine, mode, metric, regime))
        own = cells.get((gpu.lower(), engine, mode, metric, "all"))
        every = cells.get(("all", engine, mode, metric, "all"))
        b = rec["band"][key]
        if not ok(own):
            wide = [c for k, c in cells.items() if k[0] != "all" and k[2] == mode and k[3] == metric and k[4] == "all" and ok(c)]
            if not wide:
                assert "lo" not in b and "no band" in b["note"]
            else:   # not validated: the widest validated band of the mode
                lo, hi = min(c["ratio_lo"] for c in wide), max(c["ratio_hi"] for c in wide)
                assert b["lo"] == pytest.approx(value * lo) and b["hi"] == pytest.approx(value * hi)
        else:
            cell = exact if enough(exact) else own if enough(own) or not ok(every) else every
            lo = cell["ratio_lo"] if "ratio_lo" in cell else cell["ratio_p10"]   # tables before out-of-fit bands
            hi = cell["ratio_hi"] if "ratio_hi" in cell else cell["ratio_p90"]
            if cell is every:
                hull = [own] + [c for c in [cells.get(("all", engine, mode, metric, regime))] if enough(c)]
                lo, hi = min([lo] + [c["ratio_lo"] for c in hull]), max([hi] + [c["ratio_hi"] for c in hull])
            assert b["lo"] == pytest.approx(value * lo) and b["hi"] == pytest.approx(value * hi)


def _workers(manifest):
    svcs = manifest["spec"]["services"]
    out = {}
    for name, s in svcs.items():
        if s.get("componentType") != "worker":
            continue
        args = s["extraPodSpec"]["mainContainer"]["args"]
        tp = int(args[args.index("--tensor-parallel-size") + 1])
        out[name] = (s["replicas"], tp)
    return out


def test_search_emit_matches_the_plan(tmp_path):
    r = servesim.search(**SMALL, target_tps=20000)
    d = r["best"]["deployment"]
    files = servesim.emit(r["best"], tmp_path)
    assert any(f.endswith("dynamo-deployment.yaml") for f in files)
    with open(tmp_path / "dynamo-deployment.yaml") as f:
        m = yaml.safe_load(f)
    assert m["kind"] == "DynamoGraphDeployment"
    want = {}
    names = {"aggregated": "VllmWorker", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"}
    for w in d["workers"]:
        want[names[w["role"]]] = (w["count"], w["tp"])
    assert _workers(m) == want
    # Worker counts = copies x workers of one copy, as the search sized it.
    copies = r["best"]["score"]["copies"]
    per_copy = 1 if r["best"]["kind"] == "aggregated" else r["best"]["prefill_workers"] + r["best"]["decode_workers"]
    assert sum(c for c, _ in want.values()) == copies * per_copy
    # Every file was written whole (no temporary files left behind).
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]
    lines = (tmp_path / "predicted.csv").read_text().splitlines()
    assert len(lines) == 1 + len(SMALL["concurrency"])


def test_plan_emit_matches_the_plan(tmp_path):
    exe = os.environ.get("SERVESIM_BIN", "build/servesim")
    out = subprocess.run([exe, "plan", "--model", "nemotron-3.5-super-vl", "--instance", "p5en.48xlarge", "--nodes", "2",
                          "--precision", "bf16", "--isl", "4000", "--osl", "500", "--ttft-ms", "600", "--itl-ms", "100",
                          "--target-tps", "10000", "--concurrency", "1,16", "--requests", "40", "--emit", str(tmp_path),
                          "--format", "json"], check=True, capture_output=True, text=True).stdout
    plan = json.loads(out)
    checked = 0
    for t in plan["topologies"]:
        if not t["feasible"]:
            continue
        with open(tmp_path / t["name"] / "dynamo-deployment.yaml") as f:
            m = yaml.safe_load(f)
        w = _workers(m)
        if t["name"] == "aggregated":
            # 2 x p5en hold two TP8 replicas per copy.
            assert w == {"VllmWorker": (2 * t["replicas"], 8)}
        else:
            assert w == {"VllmPrefillWorker": (t["replicas"], 8), "VllmDecodeWorker": (t["replicas"], 8)}
        for s in m["spec"]["services"].values():
            if s.get("componentType") == "worker":
                assert s["resources"]["limits"]["gpu"] == "8"
                assert s["extraPodSpec"]["mainContainer"]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
        checked += 1
    assert checked == 2


def test_plan_runs_and_emits_the_engine_it_is_given(tmp_path):
    # plan --engine trtllm: the topologies run TensorRT-LLM's profile (here MoE TP2 x EP4 on 8 H200),
    # and --emit writes trtllm-serve lines, the Dynamo TRT-LLM workers and a scenario that re-runs it;
    # vLLM refuses the layout in one line.
    exe = os.environ.get("SERVESIM_BIN", "build/servesim")
    args = [exe, "plan", "--model", "qwen3-235b-a22b", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "fp8",
            "--tp", "8", "--ep", "4", "--isl", "1000", "--osl", "100", "--ttft-ms", "2000", "--itl-ms", "100",
            "--target-tps", "1000", "--concurrency", "1,8", "--requests", "16", "--topology", "agg"]
    out = subprocess.run(args + ["--engine", "trtllm", "--emit", str(tmp_path), "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    (t,) = json.loads(out)["topologies"]
    d = tmp_path / t["name"]
    assert "--tp_size 8 --ep_size 4 " in (d / "trtllm-serve.sh").read_text()
    assert not (d / "vllm-serve.sh").exists()
    with open(d / "dynamo-deployment.yaml") as f:
        m = yaml.safe_load(f)
    assert "TrtllmWorker" in m["spec"]["services"]
    sc = json.loads((d / "scenario.json").read_text())
    assert (sc["engine_profile"], sc["expert_parallel_size"]) == ("trtllm-1.3", 4)
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode != 0 and "vLLM's expert parallelism spans the whole group" in r.stderr


def test_plan_dp_lays_out_attention_dp_workers(tmp_path):
    # plan --dp 2 --ep 2 on an MoE model: every worker is TP1 DP2 EP2 (2 GPUs); the emitted vllm serve
    # lines ask for --data-parallel-size 2, and each role of the disaggregated scenario keeps its DP.
    exe = os.environ.get("SERVESIM_BIN", "build/servesim")
    out = subprocess.run([exe, "plan", "--model", "nemotron-3-nano", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "fp8",
                          "--tp", "1", "--dp", "2", "--ep", "2", "--isl", "1000", "--osl", "100", "--ttft-ms", "2000", "--itl-ms", "200",
                          "--target-tps", "1000", "--concurrency", "1,8", "--requests", "16", "--emit", str(tmp_path), "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    emitted = [t for t in json.loads(out)["topologies"] if (tmp_path / t["name"]).exists()]
    assert emitted
    for t in emitted:
        d = tmp_path / t["name"]
        assert "--tensor-parallel-size 1 --data-parallel-size 2 --enable-expert-parallel" in (d / "vllm-serve.sh").read_text()
        sc = json.loads((d / "scenario.json").read_text())
        if t["name"] == "aggregated":
            assert (sc["tensor_parallel_size"], sc["data_parallel_size"], sc["expert_parallel_size"]) == (1, 2, 2)
        else:
            top = sc["topology"]
            assert (top["prefill_dp"], top["decode_dp"], top["prefill_ep"], top["decode_ep"]) == (2, 2, 2, 2)


def test_nccl_busbw_definition():
    j = servesim.nccl("p5en.48xlarge", 2)
    assert j["gpus"] == 16 and "-np 16 -N 8" in j["command"] and "all_reduce_perf" in j["command"]
    for r in j["rows"]:
        algbw = r["bytes"] / (r["time_us"] * 1e-6) / 1e9
        assert r["algbw_gb_per_s"] == pytest.approx(algbw)
        assert r["busbw_gb_per_s"] == pytest.approx(algbw * 2 * 15 / 16)


def test_data_parallel_attention_is_searched_and_emitted(tmp_path):
    # An MoE model: the search tries attention data-parallel ranks (TP1 x DP2, experts over EP2),
    # and the winner's manifest asks vLLM for them on a pod of tp x dp GPUs.
    r = servesim.search(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=2000, itl_ms=200,
                        concurrency=[8, 32], requests=32, tp=[1], dp=[2], topology="agg", precision="fp8")
    labels = [c["label"] for c in r["configurations"]]
    assert labels and all("DP2" in x for x in labels)
    assert {c["gpus"] for c in r["configurations"]} == {2}
    servesim.emit(r["best"], tmp_path)
    with open(tmp_path / "dynamo-deployment.yaml") as f:
        m = yaml.safe_load(f)
    (worker,) = [s for s in m["spec"]["services"].values() if s.get("componentType") == "worker"]
    args = worker["extraPodSpec"]["mainContainer"]["args"]
    assert args[args.index("--data-parallel-size") + 1] == "2"
    assert worker["resources"]["limits"]["gpu"] == "2"
    # A dense model has no MoE layers to share: no DP layouts.
    d = servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, ttft_ms=2000, itl_ms=200,
                        concurrency=[8], requests=16, tp=[1], topology="agg", precision="fp8")
    assert not [c for c in d["configurations"] if "DP" in c["label"]]


def test_attention_dp_is_emitted_as_each_engine_counts_its_gpus(tmp_path):
    # TP1 x DP2 of an MoE model: SGLang's --tp-size and TensorRT-LLM's tp_size count both GPUs (each
    # splits them into attention-DP ranks), vLLM's --tensor-parallel-size is one rank's; the emitted
    # scenario re-runs the layout.
    for engine, script, expect in (("sglang", "sglang-launch.sh", "--tp-size 2 --dp-size 2 --enable-dp-attention"),
                                   ("trtllm", "trtllm-serve.sh", "--tp_size 2 "),
                                   ("vllm", "vllm-serve.sh", "--tensor-parallel-size 1 --data-parallel-size 2")):
        r = servesim.search(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=2000, itl_ms=200, engine=[engine],
                            concurrency=[8], requests=16, tp=[1], dp=[2], topology="agg", precision="fp8")
        d = tmp_path / engine
        servesim.emit(r["best"], str(d))
        assert expect in (d / script).read_text(), engine
        with open(d / "dynamo-deployment.yaml") as f:
            m = yaml.safe_load(f)
        (worker,) = [s for s in m["spec"]["services"].values() if s.get("componentType") == "worker"]
        args = worker["extraPodSpec"]["mainContainer"]["args"]
        assert worker["resources"]["limits"]["gpu"] == "2", engine
        if engine == "trtllm":
            assert args[args.index("--tensor-parallel-size") + 1] == "2"
            assert "enable_attention_dp: true" in (d / "trtllm-aggregated.yaml").read_text()
        sc = json.loads((d / "scenario.json").read_text())
        assert (sc["tensor_parallel_size"], sc["data_parallel_size"]) == (1, 2), engine
    # TensorRT-LLM runs attention DP with one GPU an attention rank: TP2 x DP2 is not among its candidates.
    t = servesim.search(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=2000, itl_ms=200, engine=["trtllm"],
                        concurrency=[8], requests=16, tp=[1, 2], dp=[2], topology="agg", precision="fp8")
    assert t["configurations"] and not [c for c in t["configurations"] if c["label"].startswith("agg TP2 DP2")]


def test_moe_tp_times_ep_is_searched_on_the_engines_that_launch_it(tmp_path):
    # ep=[1, 2, 4, 8] on TP8: TensorRT-LLM runs all four (2 and 4 as MoE TP x EP), vLLM 1 and 8; the
    # winner's files give TensorRT-LLM its ep_size, and its scenario re-runs the layout.
    r = servesim.search(model="qwen3-235b-a22b", gpu="h200", isl=1000, osl=100, ttft_ms=3000, itl_ms=200, precision="fp8",
                        tp=[8], dp=[1], ep=[1, 2, 4, 8], topology="agg", concurrency=[8], requests=16, engine=["trtllm", "vllm"])
    labels = sorted(c["label"].split(" H200")[0] + " " + c["label"].split()[-1] for c in r["configurations"])
    assert labels == ["agg TP8 EP2 (MoE TP4) trtllm-1.3", "agg TP8 EP4 (MoE TP2) trtllm-1.3", "agg TP8 EP8 trtllm-1.3",
                      "agg TP8 EP8 vllm-0.19", "agg TP8 trtllm-1.3", "agg TP8 vllm-0.19"]
    h = servesim.search(model="qwen3-235b-a22b", gpu="h200", isl=1000, osl=100, ttft_ms=3000, itl_ms=200, precision="fp8",
                        tp=[8], dp=[1], ep=[4], topology="agg", concurrency=[8], requests=16, engine=["trtllm"])
    assert "EP4 (MoE TP2)" in h["best"]["label"]
    servesim.emit(h["best"], str(tmp_path))
    assert "--tp_size 8 --ep_size 4 " in (tmp_path / "trtllm-serve.sh").read_text()
    sc = json.loads((tmp_path / "scenario.json").read_text())
    assert (sc["tensor_parallel_size"], sc["expert_parallel_size"], sc["engine_profile"]) == (8, 4, "trtllm-1.3")


def test_disaggregated_decode_workers_of_attention_dp_ranks_are_searched_and_emitted(tmp_path):
    # decode_dp=[2]: every disaggregated candidate's decode workers are TP1 DP2 (prefill TP1, no DP);
    # the winner's scenario gives each role its own DP, so the re-run lays out the same GPUs.
    r = servesim.search(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=2000, itl_ms=200, tp=[1], decode_dp=[2],
                        topology="disagg", concurrency=[8], requests=16, precision="fp8", pd_ratios=["1:1", "1:2"])
    labels = [c["label"] for c in r["configurations"]]
    assert labels and all(" TP1 DP2" in x.split(" + ")[1] and "DP" not in x.split(" + ")[0] for x in labels), labels
    best = r["best"]
    servesim.emit(best, str(tmp_path))
    sc = json.loads((tmp_path / "scenario.json").read_text())
    t = sc["topology"]
    assert (t["prefill_tp"], t["prefill_dp"], t["decode_tp"], t["decode_dp"]) == (1, 1, 1, 2)
    gpus = t["prefill_workers"] * 1 + t["decode_workers"] * 2
    ran = servesim.simulate(scenario=sc)["what_ran"]["deployment"]
    assert f"({gpus} GPUs;" in ran and "prefill TP1," in ran and "decode TP1 DP2 " in ran, ran


def test_kv_cache_dtype_is_searched_and_emitted(tmp_path):
    # Llama-3.1-8B BF16 on one H200: "auto" is its BF16 cache, "fp8" adds a candidate whose label,
    # configuration and emitted vllm serve line carry the FP8 cache.
    r = servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, ttft_ms=2000, itl_ms=200,
                        precision="bf16", tp=[1], topology="agg", concurrency=[1, 8], requests=16, threads=2,
                        kv_cache_dtype=["auto", "fp8"])
    kv = {c["kv_cache_dtype"]: c["label"] for c in r["configurations"]}
    assert set(kv) == {"bf16", "fp8"}
    assert " kv " not in kv["bf16"] and " kv fp8 " in kv["fp8"]
    files = servesim.emit(r["best"], str(tmp_path))
    serve = open(os.path.join(str(tmp_path), "vllm-serve.sh")).read()
    assert ("--kv-cache-dtype fp8" in serve) == (r["best"]["kv_cache_dtype"] == "fp8")
    assert files


def test_mtp_is_searched_and_emitted_on_each_engine(tmp_path):
    # --num-speculative-tokens 2 (num_speculative_tokens=[2]): every candidate drafts; the winner's
    # files ask each engine for its MTP drafts on the decode-carrying workers, and its scenario
    # re-runs them.
    for engine, script, expect in (("vllm", "vllm-serve.sh", '--speculative-config \'{"method":"mtp","num_speculative_tokens":2}\''),
                                   ("sglang", "sglang-launch.sh", "--speculative-algorithm EAGLE --speculative-num-steps 2 "
                                                                  "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3"),
                                   ("trtllm", "trtllm-aggregated.yaml", "num_nextn_predict_layers: 2")):
        r = servesim.search(model="nemotron-3-super", gpu="h200", isl=1000, osl=200, ttft_ms=3000, itl_ms=200, precision="fp8",
                            tp=[8], topology="agg", concurrency=[8], requests=32, engine=[engine], num_speculative_tokens=[2],
                            mtp_acceptance=[0.8])
        assert {c["num_speculative_tokens"] for c in r["configurations"]} == {2}
        assert all(c["label"].endswith(" MTP 2") for c in r["configurations"])
        d = tmp_path / engine
        servesim.emit(r["best"], str(d))
        assert expect in (d / script).read_text(), engine
        sc = json.loads((d / "scenario.json").read_text())
        assert sc["engine"]["num_speculative_tokens"] == 2 and sc["engine"]["acceptance_rate"] == [0.8]


def test_frontier_chart_draws_slo_failures_open():
    """A frontier point that fails an SLO is drawn open (white face), one that meets both filled."""
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    fr = [{"output_tps_per_user": 100.0, "output_tps_per_gpu": 50.0, "meets_slo": True, "concurrency": 1},
          {"output_tps_per_user": 20.0, "output_tps_per_gpu": 300.0, "meets_slo": False, "concurrency": 64}]
    result = {"frontiers": [{"family": "agg H200", "frontier": fr, "simulated_points": 2}],
              "sweep": {"columns": {"family": ["agg H200"] * 2, "meets_slo": [True, False],
                                    "output_tps_per_user": [100.0, 20.0], "output_tps_per_gpu": [50.0, 300.0]}},
              "itl_ms": 50.0, "ttft_ms": 600.0, "statistic": "p90"}
    fig = plot.search_figure(result)
    ax = fig.axes[0]
    by_gid = {c.get_gid(): c for c in ax.collections if c.get_gid()}
    meets, fails = by_gid["frontier-meets"], by_gid["frontier-fails"]
    assert [tuple(p) for p in meets.get_offsets()] == [(100.0, 50.0)]
    assert [tuple(p) for p in fails.get_offsets()] == [(20.0, 300.0)]
    assert tuple(fails.get_facecolor()[0][:3]) == (1.0, 1.0, 1.0)
    assert tuple(meets.get_facecolor()[0][:3]) != (1.0, 1.0, 1.0)


def test_frontier_chart_per_dollar_panel():
    """With prices, a second panel puts the frontier in $ per million output tokens: a GPU at
    $10/hour making 1,000 tok/s costs 10 / (1000 x 3600) x 1e6 = 2.78 $/M tok."""
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    fr = [{"output_tps_per_user": 100.0, "output_tps_per_gpu": 1000.0, "meets_slo": True, "concurrency": 1,
           "usd_per_gpu_hour": 10.0}]
    result = {"frontiers": [{"family": "agg H200", "frontier": fr, "simulated_points": 1}],
              "sweep": {"columns": {"family": ["agg H200"], "meets_slo": [True], "usd_per_gpu_hour": [10.0],
                                    "output_tps_per_user": [100.0], "output_tps_per_gpu": [1000.0]}},
              "itl_ms": 50.0, "ttft_ms": 600.0, "statistic": "p90"}
    fig = plot.search_figure(result)
    assert len([a for a in fig.axes if a.get_xlabel()]) == 2
    ax = fig.axes[1]
    assert "USD per million" in ax.get_ylabel()
    meets = {c.get_gid(): c for c in ax.collections if c.get_gid()}["frontier-meets"]
    (x, y), = [tuple(p) for p in meets.get_offsets()]
    assert x == 100.0 and abs(y - 10.0 / 3600.0 / 1000.0 * 1e6) < 1e-9
    # Unpriced: one panel, and asking per dollar is one clear error.
    del result["sweep"]["columns"]["usd_per_gpu_hour"]
    assert len(plot.search_figure(result).axes) == 1
    import pytest
    with pytest.raises(ValueError, match="no configuration of this search has a price"):
        plot.search_figure(result, per=("dollar",))


def test_open_loop_emit_predicts_copies_at_the_target_rate(tmp_path):
    # Sized open loop, the predicted curve is the copy counts tried at the target rate (not clients):
    # each row k copies sharing 100 requests/s; the chosen copies serve about 100 x 100 output tok/s.
    r = servesim.search(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=400, itl_ms=25, tp=[1],
                        topology="agg", precision="fp8", target_rps=100, arrival="poisson")
    d = r["best"]["deployment"]
    servesim.emit(r["best"], tmp_path)
    lines = (tmp_path / "predicted.csv").read_text().splitlines()
    head = lines[0].split(",")
    assert head[:3] == ["copies", "request_rate", "request_rate_per_copy"]
    rows = [dict(zip(head, map(float, line.split(",")))) for line in lines[1:]]
    ks = [row["copies"] for row in rows]
    assert ks == sorted(ks) and d["copies"] in ks and len(ks) >= 2
    for row in rows:
        assert row["request_rate"] == pytest.approx(100, abs=1e-3)
        assert row["request_rate_per_copy"] == pytest.approx(100 / row["copies"], abs=1e-3)
    (chosen,) = [row for row in rows if row["copies"] == d["copies"]]
    assert chosen["output_tps"] == pytest.approx(100 * 100, rel=0.15)


def test_emitted_files_carry_the_context_the_prediction_ran_with(tmp_path):
    # One max_model_len in the run and every emitted file: ISL + OSL + the answer-length spread
    # (6 sd, none for fixed lengths past rounding) + 1500 tokens of chat template, under the model's.
    r = servesim.search(**SMALL, target_tps=20000)
    ran = json.dumps(r["best"]["what_ran"])
    servesim.emit(r["best"], tmp_path)
    dep = json.loads((tmp_path / "deployment.json").read_text())["max_model_len"]
    scen = json.loads((tmp_path / "scenario.json").read_text())["engine"]["max_model_len"]
    serve = (tmp_path / "vllm-serve.sh").read_text()
    flags = {int(x) for x in serve.split("--max-model-len ")[1:] for x in [x.split()[0].rstrip(":")]}
    assert flags == {dep} and scen == dep
    assert '"max_model_len": %d' % dep in ran
    assert 1000 + 100 + 1500 <= dep <= 1000 + 100 + 1500 + 100
