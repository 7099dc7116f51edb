"""model_file= in Python: the same specs as --model-file, never registered under a name."""
import os

import pytest

import servesim

DATA = os.path.join(os.path.dirname(__file__), "..", "models", "data")


def fixture(name):
    return os.path.join(DATA, name)


def test_model_file_is_not_added_to_the_catalogue():
    m = servesim.model(model_file=fixture("tiny-qwen3.json"))
    assert m["name"] == "tiny-qwen3" and m["layer_counts"]["attention"] == 2
    servesim.memory(model_file=fixture("tiny-qwen3.json"), gpu="h200")
    with pytest.raises(servesim.Error) as e:
        servesim.simulate(servesim.scenario(model="tiny-qwen3", gpu="h200", gpus=1, tp=1, concurrency=1, requests=4))
    assert "unknown model" in str(e.value)
    assert "tiny-qwen3" not in [r["name"] for r in servesim.models()]


def test_model_file_on_every_call(cli):
    f = fixture("tiny-deepseek-v3.json")
    mem = servesim.memory(model_file=f, gpu="h200")
    assert mem["weight_precision"] == "fp8_block"  # the checkpoint's quantization_config (128x128 blocks)
    assert mem == cli("memory", "--model-file", f, "--gpu", "h200", "--format", "json")
    step = servesim.step(model_file=f, gpu="h200", batch=4, context=2048)
    assert any(p["kind"] == "mla" for p in step["decode"]["parts"])
    rows = servesim.min_gpus(model_file=f, precisions="bf16", gpus="h200")
    assert rows[0]["min_gpus"] == 1
    run = servesim.simulate(servesim.scenario(model_file=fixture("tiny-gpt-oss.json"), gpu="h200", gpus=1, tp=1,
                                              precision="bf16", isl=256, osl=8, concurrency=2, requests=6))
    assert run["summary"]["request_count"] == 6


def test_model_and_model_file_together_is_an_error():
    with pytest.raises(servesim.Error) as e:
        servesim.memory("llama-3.1-8b", "h200", model_file=fixture("tiny-qwen3.json"))
    assert "not both" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(servesim.Error):
        servesim.scenario(model="llama-3.1-8b", model_file=fixture("tiny-qwen3.json"))


def test_model_file_in_search_and_recommend():
    f = fixture("tiny-qwen3.json")
    kw = dict(gpu="h200", isl=256, osl=8, ttft_ms=1000, itl_ms=100, precision="bf16", tp=[1], topology="agg",
              concurrency=[1, 2], requests=6)
    s = servesim.search(model_file=f, **kw)
    assert s["best"] is not None and s["best"]["deployment"]["model"] == "tiny-qwen3"
    r = servesim.recommend(model_file=f, target_tps=100, **kw)
    assert len(r["recommendations"]) == 1
