"""sweep() and plan() over a Dask LocalCluster give exactly the local results."""
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
                ttft_ms=300, itl_ms=20, target_tps=20000, concurrency=[1, 16], requests=60)
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
