"""What the outputs say their figures are, checked by hand:
- a disaggregated run's TTFT in parts (queue, prefill, handoff, wait for decode KV room, KV transfer,
  first decode step) adds up to its mean TTFT, and at one client nothing queues or waits;
- the `ran:` line says why a hybrid model's KV block is not 16 tokens (the block `servesim memory`
  gives, raised from the 16 it was asked for);
- `step --engine sglang / trtllm` names that engine's sampler, not vLLM's, at vLLM's time;
- `min-gpus` says what its `vendor` column is.
"""
import json
import subprocess

import pytest

DISAGG = ["simulate", "--model", "nemotron-3.5-super-vl", "--precision", "bf16", "--instance", "p5en.48xlarge",
          "--nodes", "2", "--topology", "disagg", "--prefill-workers", "1", "--decode-workers", "1",
          "--concurrency", "1", "--requests", "20", "--isl", "4000", "--osl", "50"]
PARTS = ["queue", "prefill", "handoff", "reserve_wait", "transfer", "first_decode_step"]


def text(exe, *args):
    out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_disaggregated_ttft_parts_add_up_to_the_ttft(exe, cli):
    j = cli(*DISAGG, "--format", "json")
    p = j["kv_transfer"]["ttft_parts_ms_avg"]
    assert p["requests"] == 20
    assert sum(p[k] for k in PARTS) == pytest.approx(p["ttft"], rel=1e-9)
    assert p["ttft"] == pytest.approx(j["records"]["time_to_first_token"]["avg"], rel=1e-9)
    # One client: no queue before the prefill, no wait for room on the decode worker.
    assert p["queue"] == pytest.approx(0, abs=1e-6) and p["reserve_wait"] == pytest.approx(0, abs=1e-6)
    # Every pull is the same prompt's: the transfer part is the handoffs' mean (48.57 ms: tests/cli/sim.cmake).
    assert p["transfer"] == pytest.approx(j["kv_transfer"]["avg_ms"], rel=1e-9)
    # The handoff part is the framework's sampled delay: the vllm profile's 200 ms mean, cv 0.2
    # (20 draws: the mean's sd is 9 ms).
    assert p["handoff"] == pytest.approx(200, abs=45)
    t = text(exe, *DISAGG, "-q")
    assert "TTFT avg in parts (20 measured requests): queue 0.00 + prefill " in t
    assert f"= {p['ttft']:.2f} ms" in t


def test_sweep_of_a_disaggregated_layout_shows_the_ttft_parts(exe):
    args = [a for a in DISAGG[1:]]
    args[args.index("--concurrency") + 1] = "1,2"
    t = text(exe, "sweep", *args, "--format", "csv", "-q")
    head, first = t.splitlines()[:2]
    cols = dict(zip(head.split(","), first.split(",")))
    parts = sum(float(cols[f"ttft_{k}_ms_avg"]) for k in PARTS)
    assert parts == pytest.approx(float(cols["time_to_first_token_ms_avg"]), rel=1e-6)
    assert "TTFT avg parts ms" in text(exe, "sweep", *args, "-q")


def test_ran_line_explains_the_hybrid_block(exe, cli):
    args = ["--model", "nemotron-3-super", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--precision", "fp8"]
    mem = cli("memory", "--model", "nemotron-3-super", "--gpu", "h200", "--tp", "8", "--precision", "fp8", "--format", "json")["kv_cache"]
    assert mem["block_size"] > mem["requested_block_size"] == 16
    j = cli("simulate", *args, "--concurrency", "1", "--requests", "4", "--isl", "500", "--osl", "20", "--format", "json")
    m = j["what_ran"]["memory"]
    assert (m["block_size"], m["requested_block_size"]) == (mem["block_size"], 16)
    t = text(exe, "simulate", *args, "--concurrency", "1", "--requests", "4", "--isl", "500", "--osl", "20", "-q")
    assert f"KV blocks x {mem['block_size']} tokens (hybrid model: raised from 16 so one attention page holds a Mamba " \
           "state page; servesim memory explains)" in t
    # A model without Mamba layers keeps its 16-token block and says nothing.
    t = text(exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--concurrency", "1", "--requests", "4",
             "--isl", "500", "--osl", "20", "-q")
    assert "KV blocks x 16 tokens" in t and "hybrid model: raised" not in t


@pytest.mark.parametrize("engine,name", [("sglang", "SGLang sampler"), ("trtllm", "TRT-LLM TorchSampler"),
                                         ("vllm", "vLLM Sampler")])
def test_step_names_the_engines_sampler(cli, engine, name):
    base = ["step", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--format", "json"]
    vllm = [p for p in cli(*base)["decode"]["parts"] if p["kind"] == "sampler"]
    rows = [p for p in cli(*base, "--engine", engine)["decode"]["parts"] if p["kind"] == "sampler"]
    assert len(rows) == 1 and rows[0]["kernel"].startswith(name)
    assert (engine == "vllm") == ("vLLM" in rows[0]["kernel"].split(" (")[0])
    # The time is vLLM's PyTorch-op sampler table whatever the engine.
    assert rows[0]["seconds"] == pytest.approx(vllm[0]["seconds"], rel=1e-12)


def test_min_gpus_says_what_the_vendor_column_is(exe):
    t = text(exe, "min-gpus", "--model", "nemotron-3.5-super-vl")
    assert "vendor: the fewest GPUs the model's vendor lists for serving it with vLLM" in t
    t = text(exe, "min-gpus", "--model", "nemotron-3-nano", "--gpus", "h200")
    assert "vendor: '-' in every row" in t
