"""The Dynamo layer through the bindings: sessions and the KV router in simulate(), the planner."""
import pytest

import servesim


def session_scenario(router):
    return {"model": "llama-3.1-8b", "gpu": "h200", "gpus": 2, "tp": 1, "precision": "fp8", "router": router,
            "engine": {"enable_prefix_caching": True}, "frontend": {"enabled": False},
            "workload": {"sessions": {"count": 1, "turns": 4, "isl": 8000, "turn_isl": 1000, "osl": 100}}}


def test_sessions_and_kv_router_report_hit_rates_per_replica_and_turn():
    kv = servesim.simulate(session_scenario("kv"))
    rr = servesim.simulate(session_scenario("round_robin"))
    # Turn k's prompt is 8000 + 1100 k; kv hits the previous turn's prompt + answer in 64-token chunks.
    prompts = sum(8000 + 1100 * k for k in range(4))
    cached = sum((8000 + 1100 * (k - 1) + 100) // 64 * 64 for k in range(1, 4))
    assert kv["prefix_cache_hit_rate"]["overall"] == pytest.approx(cached / prompts)
    assert len(kv["prefix_cache_hit_rate"]["per_replica"]) == 2
    assert [t["turn"] for t in kv["sessions"]["per_turn"]] == [1, 2, 3, 4]
    assert kv["router"]["kind"] == "kv" and rr["router"]["kind"] == "round_robin"
    assert kv["prefix_cache_hit_rate"]["overall"] > rr["prefix_cache_hit_rate"]["overall"]


def test_planner_constant_load_and_cli_agree(cli, tmp_path):
    base = {"model": "llama-3.1-8b", "gpu": "h200", "gpus": 1, "tp": 1, "precision": "fp8",
            "workload": {"request_rate": 1, "isl": 1000, "osl": 100}}
    csv = tmp_path / "flat.csv"
    csv.write_text("time_s,rps\n0,10\n1200,10\n")
    r = servesim.planner(base, load_profile=str(csv), ttft_ms=2000, itl_ms=100, replica_rps=4, arrivals="uniform",
                         adjustment_interval=60, fixed_fleet=False)
    assert {x["workers_held"] for x in r["timeline"]} == {3}
    assert r["gpu_hours"] == pytest.approx(3 * 1200 / 3600)
    out = cli("planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", 1, "--tp", 1, "--precision", "fp8",
              "--isl", 1000, "--osl", 100, "--load-profile", csv, "--ttft-ms", 2000, "--itl-ms", 100, "--replica-rps", 4,
              "--arrivals", "uniform", "--adjustment-interval", 60, "--no-fixed-fleet", "--format", "json")
    assert out["gpu_hours"] == pytest.approx(r["gpu_hours"])
    with pytest.raises(servesim.Error, match="ttft_ms"):
        servesim.planner(base, peak_rps=5)


def test_planner_disaggregated_roles_and_reserved_split(tmp_path):
    base = {"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "precision": "fp8",
            "topology": {"kind": "disagg", "instance": "p5en.48xlarge"},
            "workload": {"request_rate": 1, "isl": 1000, "osl": 100}}
    csv = tmp_path / "flat.csv"
    csv.write_text("time_s,rps\n0,10\n1200,10\n")
    r = servesim.planner(base, load_profile=str(csv), ttft_ms=2000, itl_ms=100, prefill_rps=4, decode_rps=8,
                         arrivals="uniform", adjustment_interval=60, fixed_fleet=False)
    assert [x["name"] for x in r["roles"]] == ["prefill", "decode"]
    # ceil(10 / 4) = 3 prefill and ceil(10 / 8) = 2 decode workers of one GPU for 20 minutes.
    assert {(x["prefill_held"], x["decode_held"]) for x in r["timeline"]} == {(3, 2)}
    assert r["seconds_at_gpus"][5] == pytest.approx(1200)
    # Reserving all 5 GPUs at any reserved price below on-demand is cheapest for a flat day.
    split = servesim.reserved_split(r, reserved_discount=0.3)
    assert split["best"]["reserved_gpus"] == 5
    assert split["best"]["total_usd"] == pytest.approx(5 * 1200 / 3600 * 0.7 * r["usd_per_gpu_hour"])
    with pytest.raises(servesim.Error, match="reserved"):
        servesim.reserved_split(r)


def test_emitted_dynamo_manifest_parses_with_probes_resources_and_nixl(tmp_path):
    """The emitted DynamoGraphDeployment is YAML a Kubernetes client reads: every worker requests
    the GPUs it is limited to (its TP), has startup / liveness / readiness probes on the system
    port its env enables, sits on its instance type; disaggregated prefill and decode workers move
    KV over NIXL (the same --kv-transfer-config as vllm-serve.sh), aggregated ones do not."""
    import json
    import pytest
    yaml = pytest.importorskip("yaml")
    for topology in ("disagg", "agg"):
        r = servesim.search(model="llama-3.1-8b", gpu="h200", isl=1000, osl=100, ttft_ms=5000, itl_ms=200,
                            precision="bf16", tp=[1], topology=topology, concurrency=[1, 4], requests=16, threads=2)
        out = tmp_path / topology
        servesim.emit(r["best"], str(out))
        doc = yaml.safe_load((out / "dynamo-deployment.yaml").read_text())
        assert doc["kind"] == "DynamoGraphDeployment"
        services = doc["spec"]["services"]
        front = services["Frontend"]["extraPodSpec"]["mainContainer"]
        assert front["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
        workers = {k: v for k, v in services.items() if k != "Frontend"}
        roles = set()
        for name, svc in workers.items():
            c = svc["extraPodSpec"]["mainContainer"]
            tp = "1"
            assert svc["resources"]["limits"]["gpu"] == tp and svc["resources"]["requests"]["gpu"] == tp
            env = {e["name"]: e["value"] for e in c["env"]}
            port = int(env["DYN_SYSTEM_PORT"])
            assert env["DYN_SYSTEM_ENABLED"] == "true"
            for p in ("startupProbe", "livenessProbe", "readinessProbe"):
                assert c[p]["httpGet"]["port"] == port
            assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 600
            assert svc["extraPodSpec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == r["best"]["instance"]
            args = c["args"]
            role = svc.get("subComponentType", "aggregated")
            roles.add(role)
            if role in ("prefill", "decode"):
                cfg = json.loads(args[args.index("--kv-transfer-config") + 1])
                assert cfg["kv_connector"] == "NixlConnector"
            else:
                assert "--kv-transfer-config" not in args
        assert roles == ({"prefill", "decode"} if topology == "disagg" else {"aggregated"})
        serve = (out / "vllm-serve.sh").read_text()
        assert serve.count("NixlConnector") == (2 if topology == "disagg" else 0)
