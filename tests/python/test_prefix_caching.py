"""Prefix caching as a search dimension, with traffic whose prompts share a prefix (a system prompt).

By hand: N requests whose prompts start with the same P tokens, one client at a time on one
replica of a model whose KV block is 16 tokens, prefill P once and hit it N - 1 times, so the
prefix cache serves (N - 1) x P prompt tokens (P a multiple of 16) out of N x ISL.
"""
import subprocess

import servesim


def run(exe, *args):
    out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=300)
    return out


LLAMA = dict(model="llama-3.1-8b", gpu="h100", precision="fp8", tp=1, isl=3000, osl=50)


def test_a_shared_prefix_saves_n_minus_one_prefixes(exe):
    import json
    n, p = 20, 2000
    out = run(exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", 1, "--tp", 1, "--precision", "fp8",
              "--isl", 3000, "--osl", 50, "--concurrency", 1, "--requests", n, "--shared-prefix-tokens", p, "--format", "json", "-q")
    assert out.returncode == 0, out.stderr
    pc = json.loads(out.stdout)["prefix_cache"]
    assert pc["prompt_tokens"] == n * 3000
    assert pc["cached_tokens"] == (n - 1) * p
    # Distinct prompts (no shared prefix): nothing hits.
    out = run(exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", 1, "--tp", 1, "--precision", "fp8",
              "--isl", 3000, "--osl", 50, "--concurrency", 1, "--requests", n, "--format", "json", "-q")
    assert json.loads(out.stdout)["prefix_cache"]["cached_tokens"] == 0


def test_search_tries_prefix_caching_on_and_off_and_shows_the_hit_rate():
    r = servesim.search(**LLAMA, topology="agg", ttft_ms=300, itl_ms=30, prefix_caching=["on", "off"],
                        shared_prefix_tokens=2000, concurrency=[1, 4], requests=200, threads=1)
    by = {c["prefix_caching"]: c for c in r["configurations"]}
    assert set(by) == {"on", "off"}
    assert by["on"]["label"].endswith("prefix cache on") and by["off"]["label"].endswith("prefix cache off")
    on, off = by["on"], by["off"]
    assert on["bound"]["prefix_caching"] is True and off["bound"]["prefix_caching"] is False
    # The prefill of a cached prompt is its 1,000 tokens after the prefix: the TTFT bound drops.
    assert on["bound"]["ttft_lb_ms"] < 0.6 * off["bound"]["ttft_lb_ms"]
    assert off["score"]["prefix_cache_hit_rate"] == 0
    # The warm-up (32 per client) and the measured requests all hit 2000 of 3000 tokens but the first.
    hit = on["score"]["prefix_cache_hit_rate"]
    assert 0.66 <= hit <= 2000 / 3000
    assert r["best"]["prefix_caching"] == "on"
    assert r["best"]["score"]["ttft_ms"] < by["off"]["score"]["ttft_ms"]
    assert r["best"]["deployment"]["enable_prefix_caching"] is True


def test_the_emitted_engine_says_what_was_searched(tmp_path):
    r = servesim.search(**LLAMA, topology="agg", ttft_ms=300, itl_ms=30, prefix_caching=["off"],
                        shared_prefix_tokens=1024, concurrency=[1], requests=100, threads=1)
    files = servesim.emit(r["best"]["deployment"], str(tmp_path / "d"))
    script = open(next(f for f in files if f.endswith("vllm-serve.sh"))).read()
    assert "--no-enable-prefix-caching" in script
    scenario = open(next(f for f in files if f.endswith("scenario.json"))).read()
    assert '"shared_prefix_tokens": 1024' in scenario and '"enable_prefix_caching": false' in scenario


def test_a_hybrid_model_says_why_its_prompts_never_hit(exe):
    # Nemotron 3.5 Super VL's block is 8,320 tokens (an attention page sized to hold a Mamba state
    # page): a 2,000-token shared prefix is no whole block, so no prompt can hit; the table says so.
    out = run(exe, "recommend", "--model", "nemotron-3.5-super-vl", "--gpu", "b200", "--precision", "nvfp4", "--tp", 1,
              "--topology", "agg", "--isl", 6000, "--osl", 600, "--ttft-ms", 1000, "--itl-ms", 60,
              "--prefix-caching", "on", "--shared-prefix-tokens", 2000, "--target-rps", 5, "--arrival", "poisson", "-q")
    assert out.returncode == 0, out.stderr
    assert "0% (block 8320 > prefix)" in out.stdout
    assert "a hit is a whole KV block of 8320 tokens" in out.stdout and "no prompt can ever hit" in out.stdout


def test_bad_prefix_options_are_one_line(exe):
    base = ["search", "--model", "llama-3.1-8b", "--gpu", "h100", "--isl", 1000, "--osl", 100, "--ttft-ms", 500, "--itl-ms", 50]
    out = run(exe, *base, "--prefix-caching", "maybe")
    assert out.returncode != 0 and "--prefix-caching: unknown value 'maybe'; give on, off or on,off" in out.stderr
    out = run(exe, *base, "--shared-prefix-tokens", 2000)
    assert out.returncode != 0 and "--shared-prefix-tokens: must be 0..1000 (at most --isl), got 2000" in out.stderr
    out = run(exe, "search", "--model", "gpt-oss-120b", "--gpu", "h100", "--isl", 1000, "--osl", 100, "--ttft-ms", 500,
              "--itl-ms", 50, "--prefix-caching", "on")
    assert out.returncode != 0 and "sliding-window layers" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
