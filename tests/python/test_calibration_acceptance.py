"""tools/calibration_acceptance.py draws the third `calibrate e2e --train-fraction 0.33 --seed N` fits on.

The acceptance figures of docs/calibration.md hold only if the tool's third is the one calibrate e2e
draws: its held-out points must be the others, for any seed."""
import csv
import importlib.util
import json
import os
import subprocess

import pytest

HEADER = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,"
          "moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,"
          "prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,"
          "prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,"
          "decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms").split(",")


def tool():
    path = os.path.join(os.environ["SERVESIM_SOURCE_DIR"], "tools", "calibration_acceptance.py")
    spec = importlib.util.spec_from_file_location("calibration_acceptance", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def write_csv(path):
    """Nine Llama-3.1-8B points on one H200 under vLLM 0.19 and two under SGLang (another group)."""
    rows = []
    for backend, version, loads in (("vllm", "0.19.0", (2, 4, 8, 16, 24, 32, 48, 64, 96)), ("sglang", "0.5.9", (4, 8))):
        for c in loads:
            r = dict.fromkeys(HEADER, "")
            r.update({"id": f"{backend}_c{c}_", "silicon_data_source": f"silicon_concurrency={c}", "backend": backend,
                      "backend_version": version, "model_path": "meta-llama/Llama-3.1-8B-Instruct", "system": "h200_sxm",
                      "precision": "bf16", "mode": "agg", "isl": "1024", "osl": "128", "batch_size": str(c), "tp_size": "1",
                      "pp_size": "1", "attention_dp_size": "1", "moe_tp_size": "1", "moe_ep_size": "1",
                      "silicon_ttft_ms": str(80 + 4 * c), "silicon_tpot_ms": str(7 + 0.1 * c)})
            rows.append(r)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows(rows)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_tools_third_is_the_one_calibrate_fits_on(exe, tmp_path, seed):
    ca = tool()
    src = tmp_path / "split.csv"
    write_csv(src)
    header, groups = ca.groups_of(str(src), "vllm,sglang", "agg")
    # a group per engine, model, GPU and release; the engine is part of its name
    assert sorted(groups) == [("sglang", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "0.5.9"),
                              ("vllm", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "0.19.0")]
    pts = groups[("vllm", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "0.19.0")]
    train, test = ca.train_indices(len(pts), seed, 0.33)
    assert len(train) == 3 and sorted(train + test) == list(range(9))   # llround(0.33 x 9) = 3
    whole = tmp_path / "group.csv"
    ca.write_rows(str(whole), header, pts)
    out = subprocess.run([exe, "calibrate", "e2e", str(whole), "--output", str(tmp_path / "p.json"), "--train-fraction", "0.33",
                          "--seed", str(seed), "--folds", "1", "--parameters", "gemm_scale", "--threads", "1", "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    held = [p["id"] for p in json.loads(out.stdout)["held_out"]["each"]]
    assert sorted(held) == sorted(pts[i][0]["id"] for i in test)


def test_a_cluster_scenario_replaces_the_measured_figures_with_its_prediction(exe, tmp_path):
    """--cluster: each point's measured TTFT and TPOT become servesim's own under the scenario, a
    cluster known exactly. Llama-3.1-8B BF16 on one H200 under vLLM 0.19 decodes in 5-12 ms a step at
    2-96 clients of 1,024 + 128 tokens; a cluster whose engine core takes 40 ms of host time a step on a
    synchronous loop (host, then forward) measures 44-64 ms a token at every load, where the CSV says
    7-17 ms. Only the groups given are simulated (here vLLM's, not SGLang's)."""
    ca = tool()
    src = tmp_path / "split.csv"
    write_csv(src)
    header, groups = ca.groups_of(str(src), "vllm,sglang", "agg")
    vllm = {k: v for k, v in groups.items() if k[0] == "vllm"}
    scenario = tmp_path / "slow.json"
    scenario.write_text(json.dumps({"engine": {"step_overhead_ms": 40, "async_scheduling": False}}))
    out = ca.as_cluster(exe, header, vllm, str(scenario), "agg")
    pts = out[("vllm", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "0.19.0")]
    assert len(pts) == 9
    for rows in pts:
        tpot = float(rows[0]["silicon_tpot_ms"])
        # a synchronous loop: 40 ms of host time, then the forward (4-12 ms), every token
        assert 44 < tpot < 65, rows[0]["id"]
        assert float(rows[0]["silicon_ttft_ms"]) > 40
        assert rows[0]["silicon_tpot_ms"] != str(7 + 0.1 * int(rows[0]["batch_size"]))
    assert ca.group_name(("vllm", "meta-llama/Llama-3.1-8B-Instruct", "h200_sxm", "0.19.0")) == "vllm Llama-3.1-8B-Instruct H200 0.19.0"
