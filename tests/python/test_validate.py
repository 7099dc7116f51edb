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
