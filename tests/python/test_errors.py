"""Bad input raises servesim.Error with one line that names the argument and the known names."""
import pytest

import servesim


def one_line(excinfo):
    msg = str(excinfo.value)
    assert "\n" not in msg and msg
    return msg


def test_unknown_names_list_the_known_ones():
    with pytest.raises(servesim.Error) as e:
        servesim.memory("nemotron-3-super", "h300")
    assert "H200" in one_line(e) and "B300" in str(e.value)
    with pytest.raises(servesim.Error) as e:
        servesim.model("gpt-5")
    assert "nemotron-3-super" in one_line(e)
    with pytest.raises(servesim.Error) as e:
        servesim.op_time("conv3d", "h200", m=1)
    assert "gemm" in one_line(e) and "mamba-step" in str(e.value)
    with pytest.raises(servesim.Error) as e:
        servesim.plan(model="nemotron-3-nano", instance="p9.48xlarge", nodes=1, isl=100, osl=10, ttft_ms=1, itl_ms=1,
                      target_tps=1)
    assert "p5en.48xlarge" in one_line(e)


def test_unknown_and_missing_arguments():
    with pytest.raises(servesim.Error) as e:
        servesim.memory("nemotron-3-super", "h200", max_num_seq=8)
    assert "max_num_seq" in one_line(e) and "max_num_seqs" in str(e.value)
    with pytest.raises(servesim.Error) as e:
        servesim.op_time("gemm", "h200", m=1, n=2)
    assert "k" in one_line(e) and "required" in str(e.value)
    with pytest.raises(servesim.Error) as e:
        servesim.op_time("gemm", "h200", m=1.5, n=2, k=2)
    one_line(e)
    with pytest.raises(servesim.Error) as e:
        servesim.scenario(isl_stdev=3)
    assert "isl_stddev" in one_line(e)


def test_bad_scenarios():
    with pytest.raises(servesim.Error) as e:
        servesim.simulate("{not json")
    one_line(e)
    with pytest.raises(servesim.Error) as e:
        servesim.simulate(servesim.scenario(osl=0))
    assert "osl" in one_line(e)
    with pytest.raises(servesim.Error) as e:
        servesim.simulate(dict(servesim.default_scenario(), colour="red"))
    assert "colour" in one_line(e)
    with pytest.raises(servesim.Error) as e:
        servesim.sweep(servesim.scenario(), concurrency=[1, 2.5])
    one_line(e)
    with pytest.raises(servesim.Error):
        servesim.sweep(servesim.scenario())     # no axis


def test_model_that_does_not_fit_says_by_how_much():
    with pytest.raises(servesim.Error) as e:
        servesim.memory("nemotron-3-ultra", "h100", precision="bf16", tp=1)
    msg = one_line(e)
    assert "GB" in msg or "GiB" in msg


def test_error_is_a_value_error():
    assert issubclass(servesim.Error, ValueError)


def test_an_empty_item_in_a_list_names_the_argument_and_the_item():
    with pytest.raises(servesim.Error) as e:
        servesim.search("nemotron-3-nano", "h200", isl=1000, osl=100, ttft_ms=400, itl_ms=25, engine="vllm,,sglang")
    assert "engine: item 2 of 'vllm,,sglang' is empty" in one_line(e)
    with pytest.raises(servesim.Error) as e:
        servesim.min_gpus("nemotron-3-nano", gpus="h200,")
    assert "gpus: item 2 of 'h200,' is empty" in one_line(e)
