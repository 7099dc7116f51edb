"""Dask speed-up of servesim.search(client=...): the same search on one local thread, then on a
LocalCluster of 1 and of 2 workers (1 thread each), alternating twice, each run cold (new workers)
and warm (the same search again on the same workers); checks each result is
identical to the local one. Figures read by hand (README, speed section); not run by the tests.

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/dask_search.py LABEL [prune|big]

``big``: the space of BM_Search (servesim_bench), FP8 and BF16, aggregated TP 2/4/8 (with DP for
this MoE model) and xPyD in 4 ratios, three max_num_seqs x two token budgets, 8 concurrency points.
"""
import os, sys, time
import servesim
import distributed

ARGS = dict(model="nemotron-3-super", gpu="h200", isl=1000, osl=200, ttft_ms=2000, itl_ms=100,
            precision=["fp8", "bf16"], tp=[2, 4, 8], pd_ratios=["1:1", "1:2", "2:1"],
            max_num_seqs=[128, 256], concurrency=[1, 4, 16, 64], requests=64, prune=False)
if len(sys.argv) > 2 and sys.argv[2] == "prune":
    ARGS["prune"] = True
if len(sys.argv) > 2 and sys.argv[2] == "big":
    ARGS = dict(model="nemotron-3-super", gpu="h200", isl=1000, osl=200, ttft_ms=600, itl_ms=40, target_tps=20000,
                tp=[2, 4, 8], pd_ratios=["1:1", "1:2", "2:1", "1:3"], max_num_seqs=[128, 256, 512],
                max_num_batched_tokens=[2048, 8192], prune=False)
def main():
    which = sys.argv[1]
    t = time.perf_counter(); local = servesim.search(**ARGS, threads=1); tl = time.perf_counter() - t
    print(f"[{which}] local 1 thread: {tl:.2f} s, {local['counts']['configurations']} configurations, "
          f"{local['counts']['simulated']} simulated", flush=True)
    for n in (1, 2, 1, 2):
        cl = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        c = distributed.Client(cl)
        c.run(lambda: __import__("servesim"))
        # cold: fresh worker processes (each builds the kernel model and the step-cost tables of the
        # layouts it is dealt); warm: the same search again on the same workers.
        for phase in ("cold", "warm"):
            t = time.perf_counter(); r = servesim.search(**ARGS, client=c); td = time.perf_counter() - t
            print(f"[{which}] dask {n} worker(s) {phase}: {td:.2f} s", "identical" if r == local else "DIFFERENT",
                  os.getloadavg()[0], flush=True)
        c.close(); cl.close()


if __name__ == "__main__":
    main()
