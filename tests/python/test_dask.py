"""sweep(), plan() and search() over a Dask LocalCluster, and `servesim search|recommend --dask`, give
exactly the local results."""
import os
import subprocess

import pytest

import servesim

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_sweep_on_dask_equals_local(client):
    sc = servesim.scenario(model="nemotron-3-super", gpu="h200", gpus=16, tp=8, precision="fp8", isl=1000, osl=100,
                           requests=200, seed=3)
    local = servesim.sweep(sc, concurrency=[1, 8, 32, 128])
    remote = servesim.sweep(sc, concurrency=[1, 8, 32, 128], client=client)
    assert remote == local
    rates = servesim.sweep(sc, request_rate=[1, 4], client=client)
    assert rates == servesim.sweep(sc, request_rate=[1, 4], threads=1)


def test_plan_on_dask_equals_local(client):
    args = dict(model="nemotron-3-nano", instance="p5en.48xlarge", nodes=1, precision="bf16", isl=1000, osl=100,
                ttft_ms=300, itl_ms=20, target_tps=20000, concurrency=[1, 16], requests=60, headroom=0.25)
    assert servesim.plan(**args, client=client) == servesim.plan(**args)


def test_errors_come_back_from_the_workers(client):
    with pytest.raises(servesim.Error):
        servesim.sweep(servesim.scenario(osl=0), concurrency=[1, 2], client=client)


def test_search_on_dask_equals_local(client):
    args = dict(model="nemotron-3-nano", gpu="h200", isl=1000, osl=100, ttft_ms=400, itl_ms=25, concurrency=[1, 8, 32],
                requests=40, tp=[1, 2], pd_ratios=["1:1"], target_tps=20000)
    local = servesim.search(**args)
    remote = servesim.search(**args, client=client)
    assert remote == local
    assert servesim.recommend(**args, client=client) == servesim.recommend(**args)


def _cli(*args):
    return subprocess.run([os.environ["SERVESIM_BIN"], *args], capture_output=True, text=True, timeout=300)


CLI_SEARCH = ["--model", "nemotron-3-nano", "--gpu", "h100,h200", "--isl", "1000", "--osl", "100", "--ttft-ms", "400",
              "--itl-ms", "25", "--gap-ms", "40", "--concurrency", "1,8,32", "--requests", "40", "--tp", "1,2",
              "--pd-ratios", "1:1", "--target-tps", "20000", "--headroom", "0.3"]
# MTP draft counts and their acceptance travel to the workers too.
CLI_MTP = ["--model", "nemotron-3-super", "--gpu", "h200", "--precision", "fp8", "--tp", "8", "--topology", "agg", "--isl",
           "1000", "--osl", "100", "--ttft-ms", "2000", "--itl-ms", "50", "--concurrency", "8", "--requests", "32",
           "--num-speculative-tokens", "0,2", "--mtp-acceptance", "0.8,0.6", "--target-tps", "5000"]
# Expert-parallel sizes, decode workers' attention DP and engines travel too.
CLI_LAYOUTS = ["--model", "nemotron-3-nano", "--gpu", "h200", "--precision", "fp8", "--tp", "1,2", "--ep", "1,2",
               "--decode-dp", "1,2", "--engine", "vllm,trtllm", "--pd-ratios", "1:1", "--isl", "1000", "--osl", "100",
               "--ttft-ms", "2000", "--itl-ms", "50", "--concurrency", "8", "--requests", "32", "--target-tps", "5000"]


@pytest.mark.skipif("SERVESIM_BIN" not in os.environ, reason="needs the servesim binary (ctest sets SERVESIM_BIN)")
def test_cli_search_and_recommend_on_dask_equal_local(client, tmp_path):
    # `--dask ADDRESS` runs the rounds through python/servesim/dask_search.py on the cluster: the JSON the
    # CLI prints and the CSV it writes are byte for byte those of the local run.
    address = client.scheduler.address
    for cmd in ("search", "recommend"):
        local = _cli(cmd, *CLI_SEARCH, "--format", "json")
        remote = _cli(cmd, *CLI_SEARCH, "--format", "json", "--dask", address)
        assert local.returncode == 0, local.stderr
        assert remote.returncode == 0, remote.stderr
        assert remote.stdout == local.stdout and '"headroom": 0.3' in local.stdout
    local = _cli("search", *CLI_MTP, "--format", "json")
    remote = _cli("search", *CLI_MTP, "--format", "json", "--dask", address)
    assert local.returncode == 0 and remote.returncode == 0, local.stderr + remote.stderr
    assert remote.stdout == local.stdout and '"num_speculative_tokens": 2' in local.stdout
    local = _cli("search", *CLI_LAYOUTS, "--format", "json")
    remote = _cli("search", *CLI_LAYOUTS, "--format", "json", "--dask", address)
    assert local.returncode == 0 and remote.returncode == 0, local.stderr + remote.stderr
    assert remote.stdout == local.stdout and "EP2 (MoE TP2)" in local.stdout and "1D TP1 DP2" in local.stdout
    csv_local, csv_remote = tmp_path / "local.csv", tmp_path / "remote.csv"
    assert _cli("recommend", *CLI_SEARCH, "--output", str(csv_local)).returncode == 0
    assert _cli("recommend", *CLI_SEARCH, "--output", str(csv_remote), "--dask", address).returncode == 0
    assert csv_remote.read_text() == csv_local.read_text()
    assert len(csv_local.read_text().splitlines()) >= 2


@pytest.mark.skipif("SERVESIM_BIN" not in os.environ, reason="needs the servesim binary (ctest sets SERVESIM_BIN)")
def test_cli_dask_unreachable_scheduler_is_one_line():
    r = _cli("search", *CLI_SEARCH, "--dask", "tcp://127.0.0.1:9", "--dask-timeout", "1")
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("servesim: error: --dask: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert "within 1 s" in lines[0]
