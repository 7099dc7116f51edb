"""Every output says what ran: `simulate`, `sweep`, `plan`, `search`, `recommend` and `planner` carry
(JSON `what_ran`, and the same as the text header's `ran:` lines) the resolved model, checkpoint
precision, KV-cache dtype, the engine profile and its knobs, the memory plan and the calibration,
and `input_config` is what was given.

Checks a person can do by hand, on Llama-3.1-8B FP8 with an FP8 KV cache on H200, ISL 1000, OSL 100:
- the memory plan holds the sequences it claims: blocks x block size x attention-DP ranks >=
  sequences x context, and the context is ISL + OSL (+ the vision tokens of a request with images);
- the sequences are the fewer of max_num_seqs and what the blocks hold, as `bound` says;
- the CUDA-graph sizes ascend and end at the largest captured size;
- the same block count and sequences as `servesim memory` for that replica and context.
"""
import json
import os
import subprocess

BASE = ["--model", "llama-3.1-8b", "--isl", "1000", "--osl", "100"]
SLO = ["--ttft-ms", "600", "--itl-ms", "50"]
SMALL = ["--concurrency", "1,4", "--requests", "40"]


def run(exe, *args):
    out = subprocess.run([exe, *args, *(["-q"] if args[0] != "memory" else [])], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def memory(exe, context, *extra):
    return json.loads(run(exe, "memory", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--precision", "fp8",
                          "--kv-cache-dtype", "fp8", "--context", str(context), *extra, "--format", "json"))["kv_cache"]


def check_what_ran(exe, w, context=1100, calibration="measured on H200"):
    assert w["model"] == "llama-3.1-8b"
    assert w["checkpoint_precision"] == "fp8" and w["kv_cache_dtype"] == "fp8"
    e = w["engine"]
    assert e["profile"].startswith("vllm")
    assert e["max_num_seqs"] >= 1 and e["max_num_batched_tokens"] >= 1 and e["max_model_len"] >= context
    sizes = e["cudagraph_capture_sizes"]
    assert sizes == sorted(sizes) and sizes[-1] == e["max_cudagraph_capture_size"]
    assert isinstance(e["enable_prefix_caching"], bool)
    m = w["memory"]
    assert m["context_tokens"] == context
    assert m["kv_blocks"] * m["block_size"] * m["data_parallel_ranks"] >= m["max_concurrent_seqs"] * context
    by_cache = m["kv_blocks"] * m["data_parallel_ranks"] // -(-context // m["block_size"])
    assert m["max_concurrent_seqs"] == min(e["max_num_seqs"] * m["data_parallel_ranks"], by_cache)
    assert m["bound"] == ("max_num_seqs" if e["max_num_seqs"] * m["data_parallel_ranks"] <= by_cache else "kv_cache")
    mem = memory(exe, context, "--max-num-seqs", str(e["max_num_seqs"]))
    assert (m["kv_blocks"], m["max_concurrent_seqs"]) == (mem["usable_blocks"], mem["max_concurrent_seqs"])
    assert calibration in w["calibration"]


def check_text(text):
    assert "ran: llama-3.1-8b, fp8 weights" in text and "KV cache fp8" in text
    assert "  engine vllm" in text and "max_num_seqs" in text and "CUDA graphs" in text
    assert "  memory: " in text and "  calibration: " in text


def both(exe, *args):
    j = json.loads(run(exe, *args, "--format", "json"))
    check_text(run(exe, *args))
    return j


def test_simulate_says_what_ran(exe):
    j = both(exe, "simulate", *BASE, "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8", "--kv-cache-dtype", "fp8",
             "--concurrency", "4", "--requests", "40")
    check_what_ran(exe, j["what_ran"])
    c = j["input_config"]
    assert (c["model"], c["gpu"], c["workload"]["isl"], c["workload"]["osl"], c["workload"]["concurrency"]) == \
        ("llama-3.1-8b", "h200", 1000, 100, 4)


def test_sweep_says_what_ran(exe):
    j = both(exe, "sweep", *BASE, "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8", "--kv-cache-dtype", "fp8",
             *SMALL)
    check_what_ran(exe, j["what_ran"])
    c = j["input_config"]
    assert c["model"] == "llama-3.1-8b" and c["workload"]["isl"] == 1000
    assert c["sweep"] == {"axis": "concurrency", "values": [1, 4]}
    assert "threads" not in json.dumps(c)


def test_plan_says_what_ran_per_topology(exe):
    prof = os.path.join(os.environ.get("SERVESIM_SOURCE_DIR", "."), "tests", "sim", "data", "h200-slow-kernels.calibration.json")
    j = both(exe, "plan", *BASE, "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "fp8", "--kv-cache-dtype", "fp8",
             *SLO, "--target-tps", "2000", *SMALL, "--tp", "1", "--calibration", prof)
    assert len(j["topologies"]) == 2
    for t in j["topologies"]:
        check_what_ran(exe, t["what_ran"], calibration="user calibration: ")
        assert t["kv_cache"]["context_tokens"] == 1100
    c = j["input_config"]
    assert (c["model"], c["instance"], c["nodes"], c["isl"], c["osl"], c["ttft_ms"], c["concurrency"], c["tp"]) == \
        ("llama-3.1-8b", "p5en.48xlarge", 1, 1000, 100, 600, "1,4", 1)
    assert c["calibration"] == prof and c["replicas"] is None and "threads" not in c


def test_plan_counts_vision_tokens_in_the_memory_plan(exe):
    # One 1024x1024 image is 1,280 vision tokens on Nemotron 3.5 Super VL: the context a request
    # with it holds is 6,000 + 600 + 1,280 = 7,880 tokens, as simulate, search and recommend say.
    j = json.loads(run(exe, "plan", "--model", "nemotron-3.5-super-vl", "--instance", "p6-b200.48xlarge", "--nodes", "1",
                       "--precision", "nvfp4", "--isl", "6000", "--osl", "600", "--images", "1024x1024", "--image-fraction",
                       "0.3", *SLO, "--target-tps", "2000", "--concurrency", "1", "--requests", "4", "--tp", "1",
                       "--topology", "agg", "--format", "json"))
    (t,) = j["topologies"]
    assert t["what_ran"]["memory"]["context_tokens"] == 7880 and t["kv_cache"]["context_tokens"] == 7880


def search_args(kind):
    return [kind, *BASE, "--gpu", "h200", "--precision", "fp8", "--kv-cache-dtype", "fp8", "--tp", "1", *SLO, "--target-tps",
            "2000", *SMALL, "--topology", "agg"]


def test_search_says_what_ran(exe):
    j = both(exe, *search_args("search"))
    check_what_ran(exe, j["best"]["what_ran"])
    for b in j["best_per_instance"]:
        check_what_ran(exe, b["what_ran"])
    c = j["input_config"]
    assert (c["model"], c["gpus"], c["isl"], c["osl"], c["tp"], c["kv_cache_dtype"]) == \
        ("llama-3.1-8b", "h200", 1000, 100, "1", "fp8")
    assert "threads" not in c


def test_recommend_says_what_ran(exe):
    j = both(exe, *search_args("recommend"))
    assert j["recommendations"]
    for r in j["recommendations"]:
        check_what_ran(exe, r["what_ran"])
    assert j["input_config"]["target_tps"] == 2000 and "threads" not in j["input_config"]


def test_planner_says_what_ran(exe):
    args = ["planner", *BASE, "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8", "--kv-cache-dtype", "fp8",
            *SLO, "--load-profile", "diurnal", "--peak-rps", "4", "--hours", "1", "--replica-rps", "4", "--no-fixed-fleet"]
    j = both(exe, *args)
    check_what_ran(exe, j["what_ran"])
    c = j["input_config"]
    assert c["scenario"]["model"] == "llama-3.1-8b" and c["scenario"]["workload"]["isl"] == 1000
    assert (c["planner"]["peak_rps"], c["planner"]["replica_rps"], c["planner"]["ttft_ms"]) == (4, 4, 600)


def test_python_runs_from_the_default_scenario_describe_what_ran(exe):
    # The embedded scenario describes Nemotron 3 Super on 8 H200; a Llama run built on it from
    # arguments names the Llama run (in Python as on the command line), open loop included.
    import servesim
    r = servesim.simulate(model="llama-3.1-8b", gpu="h200", gpus=1, tp=1, precision="fp8", isl=1000, osl=100,
                          request_rate=2, requests=20)
    d = r["input_config"]["description"]
    assert d == "Default servesim scenario with arguments applied: llama-3.1-8b on 1 x h200, 2 requests/s open loop, ISL 1000, OSL 100"
    j = json.loads(run(exe, "simulate", *BASE, "--gpu", "h200", "--gpus", "1", "--tp", "1", "--request-rate", "2",
                       "--requests", "20", "--format", "json"))
    assert "llama-3.1-8b on 1 x h200, 2 requests/s open loop, ISL 1000, OSL 100" in j["input_config"]["description"]


def test_memory_counts_a_requests_images_in_the_context(exe):
    # 6,600 tokens of prompt and answer plus one 1024x1024 image (1,280 vision tokens) is a context
    # of 7,880: the same sequences as --context 7880, the context plan and recommend size with.
    m = ["memory", "--model", "nemotron-3.5-super-vl", "--gpu", "b200", "--precision", "nvfp4", "--tp", "1"]
    a = json.loads(run(exe, *m, "--context", "6600", "--images", "1024x1024", "--format", "json"))
    b = json.loads(run(exe, *m, "--context", "7880", "--format", "json"))
    assert a["vision_tokens_per_request"] == 1280 and a["context_tokens"] == 7880
    assert a["kv_cache"]["max_concurrent_seqs"] == b["kv_cache"]["max_concurrent_seqs"]
    out = subprocess.run([exe, *m, "--images", "1024x1024"], capture_output=True, text=True)
    assert out.returncode == 2 and "--images: give --context" in out.stderr
