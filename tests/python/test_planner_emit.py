"""`servesim planner --emit DIR`: the Dynamo manifest with its Planner service and the autoscaling
bounds the simulated day needed, read back by a YAML parser.

By hand: 6 requests/s for an hour then 14 for an hour, evenly spaced, at 4 requests/s per one-GPU
worker: ceil(6 / 4) = 2 workers, then ceil(14 / 4) = 4, so the bounds are 2..4 workers and at most
4 GPUs; the opening fleet (the manifest's replicas) is 2.
"""
import json
import subprocess

import yaml


def planner(exe, tmp_path, *extra):
    csv = tmp_path / "two_level.csv"
    csv.write_text("time_s,rps\n0,6\n3600,6\n3600.001,14\n7200,14\n")
    return subprocess.run([exe, "planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", "1", "--tp", "1",
                           "--precision", "fp8", "--isl", "1000", "--osl", "100", "--load-profile", str(csv),
                           "--arrivals", "uniform", "--adjustment-interval", "60", "--ttft-ms", "2000", "--itl-ms", "100",
                           "--no-fixed-fleet", "-q", *extra], capture_output=True, text=True, timeout=300)


def test_planner_emits_the_bounds_it_found(exe, tmp_path):
    out = planner(exe, tmp_path, "--replica-rps", "4", "--emit", str(tmp_path / "d"), "--format", "json")
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    b = json.loads((tmp_path / "d" / "planner.json").read_text())
    assert b == j["planner_bounds"]
    (role,) = b["roles"]
    assert (role["name"], role["min_workers"], role["max_workers"], role["opening_workers"]) == ("replica", 2, 4, 2)
    assert b["max_gpu_budget"] == 4 and b["rule"] == "throughput" and b["adjustment_interval_s"] == 60
    doc = yaml.safe_load((tmp_path / "d" / "dynamo-deployment.yaml").read_text())
    services = doc["spec"]["services"]
    assert services["VllmWorker"]["replicas"] == 2
    p = services["Planner"]
    assert p["componentType"] == "planner"
    args = p["extraPodSpec"]["mainContainer"]["args"]
    for a in ("--adjustment-interval=60", "--ttft=2000", "--itl=100", "--load-predictor=constant", "--min-endpoint=1",
              "--max-gpu-budget=4"):
        assert a in args
    assert sorted(x.name for x in (tmp_path / "d").iterdir()) == ["deployment.json", "dynamo-deployment.yaml", "planner.json",
                                                                  "vllm-serve.sh"]
    assert sorted(j["emitted"]) == sorted(str(tmp_path / "d" / n) for n in
                                          ["vllm-serve.sh", "dynamo-deployment.yaml", "planner.json", "deployment.json"])


def test_planner_emits_the_load_rule_and_each_role(exe, tmp_path):
    # Disaggregated: prefill at 4 and decode at 8 requests/s per worker: 6 -> 2 prefill + 1 decode,
    # 14 -> 4 prefill + 2 decode; the load rule's thresholds go to the Planner service.
    out = planner(exe, tmp_path, "--topology", "disagg", "--prefill-rps", "4", "--decode-rps", "8", "--rule", "throughput",
                  "--emit", str(tmp_path / "d"))
    assert out.returncode == 0, out.stderr
    b = json.loads((tmp_path / "d" / "planner.json").read_text())
    got = {r["name"]: (r["min_workers"], r["max_workers"]) for r in b["roles"]}
    assert got == {"prefill": (2, 4), "decode": (1, 2)}
    args = yaml.safe_load((tmp_path / "d" / "dynamo-deployment.yaml").read_text())["spec"]["services"]["Planner"][
        "extraPodSpec"]["mainContainer"]["args"]
    assert "--prefill-engine-num-gpu=1" in args and "--decode-engine-num-gpu=1" in args and "--max-gpu-budget=6" in args
    out = planner(exe, tmp_path, "--replica-rps", "4", "--rule", "load", "--emit", str(tmp_path / "l"))
    assert out.returncode == 0, out.stderr
    args = yaml.safe_load((tmp_path / "l" / "dynamo-deployment.yaml").read_text())["spec"]["services"]["Planner"][
        "extraPodSpec"]["mainContainer"]["args"]
    assert "--prefill-queue-scale-up-threshold=5" in args and "--decode-kv-scale-down-threshold=0.5" in args


def test_planner_emit_refuses_a_bad_folder_before_the_day(exe, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    out = planner(exe, tmp_path, "--replica-rps", "4", "--emit", str(tmp_path / "mine"))
    assert out.returncode != 0
    assert "--emit: " in out.stderr and "notes.txt" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert sorted(x.name for x in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    out = planner(exe, tmp_path, "--replica-rps", "4", "--emit", "")
    assert out.returncode != 0 and "give a folder name" in out.stderr


def test_disaggregated_mean_prompt_counts_the_vision_tokens(exe, tmp_path):
    # By hand: one 1024x1024 image is 1,280 vision tokens (`servesim simulate` prints them) on
    # 30 % of requests, so the mean prompt is 6,000 + 0.3 x 1,280 = 6,384 tokens. A flat 5.8
    # requests/s at 2 per prefill worker needs ceil(5.8 / 2) = 3 prefill workers all along; dividing
    # the observed prompt tokens (vision included) by a text-only mean would ask for
    # ceil(2.9 x 6,384 / 6,000) = ceil(3.09) = 4.
    csv = tmp_path / "flat.csv"
    csv.write_text("time_s,rps\n0,5.8\n1200,5.8\n")
    out = subprocess.run([exe, "planner", "--model", "nemotron-3.5-super-vl", "--gpu", "b200", "--gpus", "1", "--tp", "1",
                          "--precision", "nvfp4", "--isl", "6000", "--osl", "600", "--images", "1024x1024",
                          "--image-fraction", "0.3", "--topology", "disagg", "--prefill-rps", "2", "--decode-rps", "10",
                          "--load-profile", str(csv), "--arrivals", "uniform", "--adjustment-interval", "120",
                          "--ttft-ms", "1000", "--itl-ms", "60", "--no-fixed-fleet", "-q", "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert j["mean_vision_tokens_per_request"] == 0.3 * 1280
    prefill, decode = j["roles"]
    assert prefill["mean_prompt_tokens"] == 6000 + 0.3 * 1280 and decode["mean_answer_tokens"] == 600
    assert [t["prefill_held"] for t in j["timeline"]] == [3] * 10
    assert [t["decode_held"] for t in j["timeline"]] == [1] * 10


def _flags(tokens):
    return {t.split("=", 1)[0] for t in tokens if isinstance(t, str) and t.startswith("--")}


def test_every_dynamo_name_of_the_manifest_is_marked_unverified(exe, tmp_path):
    # No source servesim carries pins Dynamo's CLI or the operator's schema to a release (its
    # reference names the runtime images only): every flag of the written manifest that is not the
    # engine's own (those its launch script runs) must be listed on the header's UNVERIFIED lines,
    # with every module the services run; the image is the one measured runs name.
    scripts = {"vllm": "vllm-serve.sh", "sglang": "sglang-launch.sh", "trtllm": "trtllm-serve.sh"}
    images = {"vllm": "vllm-runtime:0.8.0", "sglang": "sglang-runtime:0.8.0", "trtllm": "tensorrtllm-runtime:0.8.0"}
    for engine, rule in (("vllm", "throughput"), ("sglang", "load"), ("trtllm", "throughput")):
        d = tmp_path / engine
        out = planner(exe, tmp_path, "--topology", "disagg", "--prefill-rps", "4", "--decode-rps", "8", "--engine", engine,
                      "--rule", rule, "--emit", str(d))
        assert out.returncode == 0, out.stderr
        text = (d / "dynamo-deployment.yaml").read_text()
        head = [line for line in text.splitlines() if line.startswith("#")]
        listed = next(line for line in head if line.startswith("#   flags: ")).split()[2:]
        modules = next(line for line in head if line.startswith("#   modules: ")).split()[2:]
        assert any("UNVERIFIED Dynamo names" in line for line in head)
        doc = yaml.safe_load(text)
        assert doc["apiVersion"] == "nvidia.com/v1alpha1" and doc["kind"] == "DynamoGraphDeployment"
        engine_flags = _flags((d / scripts[engine]).read_text().split())
        seen_modules = set()
        for name, svc in doc["spec"]["services"].items():
            c = svc["extraPodSpec"]["mainContainer"]
            assert c["image"] == "nvcr.io/nvidia/ai-dynamo/" + images[engine]
            cmd = c["command"]
            seen_modules.add(cmd[cmd.index("-m") + 1])
            own = engine_flags if svc["componentType"] == "worker" else set()
            for f in _flags(cmd + c.get("args", [])):
                assert f in own or f in listed, (engine, name, f)
        assert seen_modules == set(modules), (engine, seen_modules, modules)
        assert ("--prefill-queue-scale-up-threshold" in listed) == (rule == "load")


def test_planner_plot_leaves_only_the_chart(exe, tmp_path):
    # The chart's data file is the plotter's input only: a temporary, gone once the chart is drawn.
    out = planner(exe, tmp_path, "--replica-rps", "4", "--plot", str(tmp_path / "day.png"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "day.png").stat().st_size > 0
    assert sorted(x.name for x in tmp_path.iterdir()) == ["day.png", "two_level.csv"]
