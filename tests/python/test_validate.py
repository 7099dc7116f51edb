"""servesim.validate(): the same document as `servesim validate --format json`, one DataFrame row
per measured point, errors as (predicted - measured) / measured, and the validation chart."""
import os

import pytest

import servesim

DATA = os.path.join(os.environ.get("SERVESIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                    "tests", "sim", "data")
CSV = os.path.join(DATA, "validate_sample.csv")
MODEL = os.path.join(DATA, "llama-3.1-8b.json")


def test_validate_matches_cli_and_frames(cli):
    r = servesim.validate(CSV, gpu="h200", mode="agg", model_file=MODEL, threads=2)
    assert r["csv"] == {"rows": 16, "points": 14, "merged_points": 1, "merged_rows": 2, "layout_from_id": 0,
                        "layout_from_pattern": 1, "layout_from_moe_grid": 0}  # the B200 "dp2" row: TP2 DP2 EP4
    assert r["counts"] == {"points": 9, "ran": 4, "unmodellable": 5, "filtered_out": 5}  # the int4_wo row runs (W4A16)
    c = cli("validate", CSV, "--gpu", "h200", "--mode", "agg", "--model-file", MODEL, "--format", "json")
    ran = [p for p in r["points"] if "predicted" in p]
    ran_cli = [p for p in c["points"] if "predicted" in p]
    assert [p["predicted"] for p in ran] == [p["predicted"] for p in ran_cli]
    for p in ran:
        m, q, e = p["measured"], p["predicted"], p["error_pct"]
        assert e["ttft"] == pytest.approx(100 * (q["ttft_ms"] - m["ttft_ms"]) / m["ttft_ms"])
        assert e["itl"] == pytest.approx(100 * (q["itl_ms"] - m["tpot_ms"]) / m["tpot_ms"])
    assert r["by_release"] == c["by_release"]
    assert sorted((g["release"], g["points"]) for g in r["by_release"]) == [("0.12.0", 3), ("0.16.0", 1)]
    df = servesim.frame(r)
    assert len(df) == 9
    assert {"measured_ttft_ms", "predicted_itl_ms", "error_pct_ttft", "unmodellable"} <= set(df.columns)
    assert df["unmodellable"].notna().sum() == 5


def test_validation_chart(tmp_path):
    from servesim import plot
    r = servesim.validate(CSV, gpu="h200", model_file=MODEL)
    path = plot.save_validation_chart(r, str(tmp_path / "v.png"))
    assert os.path.getsize(path) > 10000


def test_validate_errors():
    with pytest.raises(servesim.Error, match="no such file"):
        servesim.validate("/nonexistent.csv")
    with pytest.raises(servesim.Error, match="statistic"):
        servesim.validate(CSV, statistic="p99")
    with pytest.raises(servesim.Error, match="osl_spread_pct"):
        servesim.validate(CSV, osl_spread_pct=-1)


def test_validate_osl_spread_matches_cli(cli):
    r = servesim.validate(CSV, gpu="h200", mode="agg", model_file=MODEL, threads=2, osl_spread_pct=0.5)
    c = cli("validate", CSV, "--gpu", "h200", "--mode", "agg", "--model-file", MODEL, "--osl-spread", "0.5",
            "--format", "json")
    assert r["osl_spread_pct"] == c["osl_spread_pct"] == 0.5
    assert [p.get("predicted") for p in r["points"]] == [p.get("predicted") for p in c["points"]]


def test_validate_across_seeds_are_the_single_seed_runs(cli):
    """--seeds 3: the per-GPU median |error| at seeds 1, 2 and 3 are those of three --seed runs;
    the main tables stay seed 1's."""
    args = ("validate", CSV, "--gpu", "h200", "--mode", "agg", "--model-file", MODEL, "--format", "json")
    many = cli(*args, "--seeds", "3")
    one = [cli(*args, "--seed", str(s)) for s in (1, 2, 3)]
    assert many["by_gpu"] == one[0]["by_gpu"]
    across = many["across_seeds"]
    assert across["seeds"] == [1, 2, 3]
    py = servesim.validate(CSV, gpu="h200", mode="agg", model_file=MODEL, seeds=3)
    assert py["across_seeds"] == across
    for row in across["by_gpu"]:
        for k, run in enumerate(one):
            g = next(x for x in run["by_gpu"] if (x["engine"], x["gpu"], x["mode"]) == (row["engine"], row["gpu"], row["mode"]))
            for m in ("ttft", "itl", "output_tps"):
                assert row[m][k] == pytest.approx(g[m]["median_abs_pct"])


def test_validated_itl_has_no_jump_between_neighbouring_client_counts(tmp_path):
    # validate runs a CSV point with AIConfigurator's generated flags: a CUDA graph at every batch
    # size 1...C, so C clients decode in a graph of exactly C rows, no padding. One more client then
    # adds one sequence to each step and one prompt's prefill to each cycle: ITL rises by a few %
    # per client and never jumps (a block-FP8 MoE on two H200 under vLLM 0.12, 1 to 20 clients).
    # The measured columns are placeholders; only the predictions are compared.
    header = open(CSV).readline()
    cols = header.strip().split(",")
    rows = []
    for c in range(1, 21):
        row = dict.fromkeys(cols, "")
        row.update(id=f"moe_h200_vllm_agg_1024x256_c{c}_tp2", backend="vllm", backend_version="0.12.0",
                   model_path="Qwen/Qwen3-235B-A22B-FP8", system="h200_sxm", precision="fp8", mode="agg",
                   isl="1024", osl="256", gemm_quant_mode="fp8_block", moe_quant_mode="fp8_block",
                   batch_size=str(c), tp_size="2", pp_size="1", attention_dp_size="1", moe_tp_size="2",
                   moe_ep_size="1", silicon_ttft_ms="100", silicon_tpot_ms="50")
        row["silicon_data_source"] = f"source_file=placeholder.csv; silicon_concurrency={c}"
        rows.append(",".join(row[k] for k in cols))
    path = tmp_path / "moe.csv"
    path.write_text(header + "\n".join(rows) + "\n")
    r = servesim.validate(str(path), threads=1)
    ran = [p for p in r["points"] if "predicted" in p]
    assert not any(p.get("harness_note") for p in ran)   # the generated flags, no re-sent prompts
    itl = {p["concurrency"]: p["predicted"]["itl_ms"] for p in ran}
    assert sorted(itl) == list(range(1, 21))
    for c in range(1, 20):
        assert itl[c] * 0.98 <= itl[c + 1] <= itl[c] * 1.15, (c, itl[c], itl[c + 1])
