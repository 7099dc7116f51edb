"""A new user's purchase study, as the CLI answers it: each test reproduces one friction found
repeating the README's tour and checks the output now answers it (docs/capacity-planning.md,
"Frictions of the purchase study")."""
import csv
import json
import io
import math
import os
import re
import subprocess

# One request at a time (max_num_seqs 1) on Llama 3.1 8B FP8 / one H100, ISL 128 / OSL 100:
# 458 ms each, so 2.18 requests/s (docs/capacity-planning.md, Overload).
ONE_SEAT = ["--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--precision", "fp8", "--max-num-seqs", "1",
            "--isl", "128", "--osl", "100", "--no-frontend", "--requests", "400", "-q"]


def run(exe, *args):
    out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


# An open-loop recommendation of 120 requests/s on aggregated TP1 H200 copies (several copies).
OPEN_REC = ["recommend", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", "1000", "--osl", "100", "--precision", "fp8",
            "--tp", "1", "--ttft-ms", "300", "--itl-ms", "15", "--target-rps", "120", "--arrival", "poisson",
            "--topology", "agg", "-q"]


def out_of(script):
    """The folder an emitted aiperf-sweep.sh writes its runs into (its OUT), relative to where it runs."""
    return re.search(r"^OUT=\$\{ARTIFACTS:-(.+)\}$", open(script).read(), re.M).group(1)


def stand_in_aiperf(tmp_path):
    """An `aiperf` on PATH that appends its arguments to a log: (environment, log file)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "aiperf").write_text('#!/bin/sh\necho "$@" >> "$LOG"\n')
    (fake / "aiperf").chmod(0o755)
    log = tmp_path / "calls.txt"
    return dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", LOG=str(log)), log


def test_sweep_table_and_overload_line_quote_one_served_rate(exe):
    # A rate sweep printed aiperf's request_throughput (ramp-up and drain included) in its table
    # and the load window's served rate in its OVERLOADED line: two figures for one question.
    text = run(exe, "sweep", *ONE_SEAT, "--request-rate", "1.1,4.4")
    head = next(l for l in text.splitlines() if l.startswith("request_rate"))
    assert "served req/s" in head
    row = next(l for l in text.splitlines() if l.strip().startswith("4.40"))
    table_served = float(row.split()[1])
    line = next(l for l in text.splitlines() if l.startswith("OVERLOADED: offered 4.4"))
    line_served = float(re.search(r"([0-9.]+) served per second", line).group(1))
    assert table_served == line_served
    assert "over the later half of the sends" in line and "later half of the sends" in text.split(line)[0]
    # By hand: one seat answers at 1 / 458 ms = 2.18 requests/s when it cannot keep up.
    assert abs(table_served - 2.18) < 0.05
    rows = list(csv.DictReader(io.StringIO(run(exe, "sweep", *ONE_SEAT, "--request-rate", "1.1,4.4", "--format", "csv"))))
    assert abs(float(rows[1]["served_requests_per_s"]) - table_served) < 5e-4
    assert abs(float(rows[0]["served_requests_per_s"]) - 1.1) < 0.1   # keeps up: served = offered


# Llama 3.1 8B FP8 at 20 requests/s, prefill and decode on separate TP1 workers, three GPU types:
# 3 single-GPU rows and 6 mixed pairs (prefill on one type, decode on another).
REC = ["recommend", "--model", "llama-3.1-8b", "--gpu", "h100,h200,b200", "--isl", "1000", "--osl", "100",
       "--precision", "fp8", "--tp", "1", "--ttft-ms", "1000", "--itl-ms", "50", "--target-rps", "20",
       "--arrival", "poisson", "--topology", "disagg", "--pd-ratios", "1:1", "-q"]


def test_recommend_emits_what_a_user_deploys_with_an_index(exe, tmp_path):
    # recommend --emit wrote one folder per row: 5 GPU types gave 25 folders (20 mixed pairs).
    # Now: the recommendation, and the cheapest of every other GPU type, named so, and an index.
    em = tmp_path / "deploy"
    em.mkdir()
    # An earlier emitted set's folder (servesim's files beside its deployment.json) is replaced;
    # a user's own folder is left alone.
    run(exe, *REC, "--emit", em)
    (em / "recommended").rename(em / "p5en.48xlarge+p5.48xlarge")
    (em / "mine").mkdir()
    (em / "mine" / "notes.txt").write_text("mine")
    j = json.loads(run(exe, *REC, "--emit", em, "--format", "json"))
    recs = j["recommendations"]
    assert len(recs) == 9 and sum("+" in r["gpu"] for r in recs) == 6
    index = json.loads((em / "index.json").read_text())
    folders = [e["folder"] for e in index["folders"]]
    assert folders[0] == "recommended" and index["folders"][0]["instance"] == recs[0]["instance"]
    assert index["folders"][0]["usd_per_hour"] == recs[0]["usd_per_hour"] == min(r["usd_per_hour"] for r in recs)
    singles = [r for r in recs if "+" not in r["gpu"]]
    assert sorted(folders[1:]) == sorted("best-" + r["instance"] for r in singles if r["gpu"] != recs[0]["gpu"])
    assert all(e["what"] for e in index["folders"])
    assert sorted(p.name for p in em.iterdir()) == sorted(folders + ["index.json", "mine"])
    assert (em / "mine" / "notes.txt").read_text() == "mine"
    dep = json.loads((em / "recommended" / "deployment.json").read_text())
    assert dep["describe"].startswith(recs[0]["label"])
    text = run(exe, *REC, "--emit", em)
    assert "index.json says what each folder is" in text and "recommended/" in text and "<- the recommendation" in text


def test_open_loop_emit_checks_at_the_planned_rates(exe, tmp_path):
    # An open-loop plan's aiperf-sweep.sh was a closed-loop concurrency sweep. Now it sends at the
    # planned rate and at the rates whose per-copy share the plan simulated, each as long as the
    # plan's run: max(1000, 60 s x rate) measured after max(100, 10 s x rate). Run it with a
    # stand-in aiperf that records its arguments.
    em = tmp_path / "em"
    run(exe, *OPEN_REC, "--emit", em)
    dep = json.loads((em / "recommended" / "deployment.json").read_text())
    copies = dep["copies"]
    assert copies > 1
    script = (em / "recommended" / "aiperf-sweep.sh").read_text()
    assert "UNVERIFIED" in script and "--concurrency" not in script
    env, log = stand_in_aiperf(tmp_path)
    subprocess.run(["bash", em / "recommended" / "aiperf-sweep.sh"], cwd=tmp_path, env=env, check=True)
    calls = [c.split() for c in log.read_text().splitlines()]
    rates = [float(c[c.index("--request-rate") + 1]) for c in calls]
    assert 120 in rates   # the planned rate
    rows = list(csv.DictReader(io.StringIO((em / "recommended" / "predicted.csv").read_text())))
    per_copy = [r["request_rate_per_copy"] for r in rows]
    assert {float(r["request_rate_on_deployed_copies"]) for r in rows} >= set(rates)
    for r, c in zip(rates, calls):
        assert 0.75 * 120 <= r <= 1.5 * 120
        assert any(abs(r - copies * float(x)) < 2e-3 for x in per_copy)   # a rate the plan simulated, on the deployed copies
        assert int(c[c.index("--request-count") + 1]) == max(1000, math.ceil(60 * r - 1e-9))
        assert int(c[c.index("--warmup-request-count") + 1]) == max(100, math.ceil(10 * r - 1e-9))
    # Checking the winner open loop meant hand-editing the one-copy scenario.json (replicas to the
    # copies, the rate to the target). scenario-all-copies.json is the whole fleet at the target:
    # it keeps up, so over the load window it serves what it is offered.
    whole = json.loads((em / "recommended" / "scenario-all-copies.json").read_text())
    assert whole["topology"]["replicas"] == copies and whole["workload"]["request_rate"] == 120
    assert whole["workload"]["requests"] == 60 * 120 and whole["workload"]["warmup_requests"] == 10 * 120
    sim = json.loads(run(exe, "simulate", "--scenario", em / "recommended" / "scenario-all-copies.json", "--format", "json", "-q"))
    assert sim["load"]["overloaded"] is False
    assert abs(sim["load"]["served_requests_per_s"] - 120) < 0.1 * 120


def test_open_loop_deployment_names_its_rows_copies(exe, tmp_path):
    # An open-loop deployment.json held the copy counts it tried under `predicted.concurrency`, out
    # of order (1, 2, 4, 8, 6, 7), beside a top-level `concurrency` list of clients no run used.
    em = tmp_path / "em"
    run(exe, *OPEN_REC, "--emit", em)
    dep = json.loads((em / "recommended" / "deployment.json").read_text())
    p = dep["predicted"]
    assert dep["predicted_axis"] == "copies" and "concurrency" not in dep and "concurrency" not in p
    assert p["copies"] == sorted(p["copies"]) and dep["copies"] in p["copies"] and len(p["ttft_p90_ms"]) == len(p["copies"])
    rows = list(csv.DictReader(io.StringIO((em / "recommended" / "predicted.csv").read_text())))
    assert [int(r["copies"]) for r in rows] == p["copies"]
    # k copies share the target: each is offered 120 / k requests/s.
    assert all(abs(float(r["request_rate_per_copy"]) * int(r["copies"]) - 120) < 0.01 for r in rows)
    import servesim
    servesim.emit(dep, str(tmp_path / "again"))   # the dict as written is a deployment emit() takes back
    assert (tmp_path / "again" / "predicted.csv").read_text() == (em / "recommended" / "predicted.csv").read_text()
    # Closed loop: the rows are clients per copy, said so.
    closed = servesim.search("llama-3.1-8b", "h200", isl=1000, osl=100, precision="fp8", tp=1, topology="agg",
                             ttft_ms=600, itl_ms=50, target_tps=1000, concurrency=[1, 2], requests=10)["best"]["deployment"]
    assert closed["predicted_axis"] == "clients_per_copy" and closed["predicted"]["concurrency"] == closed["concurrency"] == [1, 2]


def test_open_loop_plan_checks_the_planned_rate(exe, tmp_path):
    # An open-loop plan's aiperf-sweep.sh swept closed-loop concurrency only, and stopped at 256
    # clients when the plan had simulated on to 768 while the topology met both SLOs.
    em = tmp_path / "em"
    run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", "1", "--tp", "1", "--precision",
        "fp8", "--isl", "1000", "--osl", "100", "--ttft-ms", "300", "--itl-ms", "15", "--target-rps", "120", "--arrival",
        "poisson", "--topology", "agg", "-q", "--emit", em)
    dep = json.loads((em / "aggregated" / "deployment.json").read_text())
    assert dep["predicted_axis"] == "clients_per_copy" and dep["concurrency"] == dep["predicted"]["concurrency"]
    script = (em / "aggregated" / "aiperf-sweep.sh").read_text()
    clients = [int(c) for c in re.search(r"for C in ([0-9 ]+); do", script).group(1).split()]
    assert clients == [c * dep["copies"] for c in dep["concurrency"]]
    rate = dep["rate_per_copy"] * dep["copies"]
    assert rate == 120
    # One open-loop run at the planned rate, as long as the plan's: max(1000, 60 s x rate) after max(100, 10 s x rate).
    assert subprocess.run(["bash", "-n", em / "aggregated" / "aiperf-sweep.sh"]).returncode == 0
    env, log = stand_in_aiperf(tmp_path)
    subprocess.run(["bash", em / "aggregated" / "aiperf-sweep.sh"], cwd=tmp_path, env=env, check=True)
    assert "--request-rate 120.000 --request-count 7200 --warmup-request-count 1200" in log.read_text().splitlines()[-1]


def test_sweep_output_file_keeps_the_table_and_p90_on_the_terminal(exe, tmp_path):
    # `sweep --output rate.csv` (the README's step 2) printed nothing: no table, no OVERLOADED line;
    # and the table showed p50 and p99 when the SLOs are p90.
    out = tmp_path / "rate.csv"
    text = run(exe, "sweep", *ONE_SEAT, "--request-rate", "1.1,4.4", "--output", out)
    head = next(l for l in text.splitlines() if l.startswith("request_rate"))
    assert "TTFT p90 ms" in head and "ITL p90 ms" in head
    assert any(l.startswith("OVERLOADED: offered 4.4") for l in text.splitlines())
    assert text.rstrip().endswith(f"Wrote {out} (csv)")
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    for r in rows:
        assert float(r["time_to_first_token_ms_p50"]) <= float(r["time_to_first_token_ms_p90"]) <= float(r["time_to_first_token_ms_p99"])
    row = next(l for l in text.splitlines() if l.strip().startswith("1.10"))
    assert f"{float(rows[0]['time_to_first_token_ms_p90']):.2f}" in row.split()


def test_rate_chart_off_scale_label_clears_the_overload_marker(exe, tmp_path):
    # The off-scale TTFT value was written on the overloaded point, under its red x.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    sweep = json.loads(run(exe, "sweep", *ONE_SEAT, "--request-rate", "0.5,1,1.5,2,4.4", "--format", "json"))
    fig = plot.latency_figure(sweep, ttft_ms=1000, itl_ms=50)
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t for t in ax.texts if "off scale" in t.get_text()]
    assert labels, "the 4.4 requests/s TTFT is off scale"
    top = ax.get_ylim()[1]
    x_marker = ax.transData.transform((4.4, top))
    box = labels[0].get_window_extent()
    pad = 10 * fig.dpi / 72 / 2   # half the x marker (10 points)
    assert not (box.x0 - pad <= x_marker[0] <= box.x1 + pad and box.y0 - pad <= x_marker[1] <= box.y1 + pad)
    assert box.x1 <= ax.get_window_extent().x1 + 1   # inside the axes, not cut at the edge


def test_search_chart_draws_mixed_gpu_pairs_as_one_entry(exe):
    # recommend over three GPU types drew a line per prefill/decode GPU pair: 9 disaggregated
    # families on a 10-colour cycle, colours repeated. Now the 6 mixed pairs are one grey entry.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    r = json.loads(run(exe, *REC, "--format", "json"))
    fams = [f["family"] for f in r["frontiers"]]
    mixed = [f for f in fams if "+" in f]
    assert len(mixed) == 6
    fig = plot.search_figure(r)
    labels = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert sum("different GPU types (6 pairs" in l for l in labels) == 1
    assert not any("+" in l for l in labels if not l.startswith("best"))
    lines = [h for h in fig.axes[0].get_lines() if h.get_label() in {f"{f['family']} ({f['simulated_points']} points)" for f in r["frontiers"]}]
    assert len(lines) == 3 and len({l.get_color() for l in lines}) == 3


def test_open_loop_check_sends_the_image_share_the_plan_simulated(exe, tmp_path):
    # aiperf-sweep.sh put the image on every request when the plan had images on 30 % of them.
    # Now two Poisson streams at once per rate: 70 % of R text-only and 30 % with the image
    # (their sum is a Poisson stream at R with 30 % images), each with its share of the requests.
    import servesim
    em = tmp_path / "em"
    run(exe, *OPEN_REC, "--emit", em)
    dep = json.loads((em / "recommended" / "deployment.json").read_text())
    dep["images"], dep["image_fraction"] = [{"width": 1024, "height": 1024, "count": 1}], 0.3
    servesim.emit(dep, str(tmp_path / "mix"))
    env, log = stand_in_aiperf(tmp_path)
    subprocess.run(["bash", tmp_path / "mix" / "aiperf-sweep.sh"], cwd=tmp_path, env=env, check=True)
    calls = [c.split() for c in log.read_text().splitlines()]
    arg = lambda c, k: c[c.index(k) + 1]
    by_rate = {}
    for c in calls:
        rate_dir = arg(c, "--artifact-dir").split("/")[-1]   # OUT/rR-text, OUT/rR-images
        by_rate.setdefault(rate_dir.rsplit("-", 1)[0], {})[rate_dir.rsplit("-", 1)[1]] = c
    assert "r120.000" in by_rate and all(set(v) == {"text", "images"} for v in by_rate.values())
    for name, pair in by_rate.items():
        r = float(name[1:])
        t, i = pair["text"], pair["images"]
        assert "--image-width-mean" not in t and arg(i, "--image-width-mean") == "1024"
        assert abs(float(arg(t, "--request-rate")) - 0.7 * r) < 2e-3 and abs(float(arg(i, "--request-rate")) - 0.3 * r) < 2e-3
        n = max(1000, math.ceil(60 * r - 1e-9))
        assert int(arg(t, "--request-count")) + int(arg(i, "--request-count")) == n
        assert int(arg(i, "--request-count")) == round(0.3 * n)


def test_fp8_rows_of_a_bf16_only_model_load_the_bf16_checkpoint(tmp_path):
    # The H200 row of the study (FP8) emitted MODEL=/fsx/models/nemotron-3.5-super-vl-fp8, "the fp8
    # checkpoint", which is not published (bf16 only in the catalogue). vLLM quantizes the BF16
    # checkpoint to FP8 as it loads (--quantization fp8): the file says so and does it.
    import servesim
    r = servesim.search("nemotron-3-nano", "h100", isl=500, osl=50, precision="fp8", tp=1, topology="agg",
                        ttft_ms=2000, itl_ms=100, target_tps=500, concurrency=[1, 2], requests=10)
    dep = r["best"]["deployment"]
    assert servesim.model("nemotron-3-nano")["checkpoint_precision"] == "bf16"
    assert dep["precision"] == "fp8" and dep["checkpoint"] == "bf16"
    servesim.emit(dep, str(tmp_path / "d"))
    script = (tmp_path / "d" / "vllm-serve.sh").read_text()
    assert "DEFAULT_MODEL=/fsx/models/nemotron-3-nano-bf16" in script and "--quantization fp8" in script
    assert "no fp8 checkpoint is published" in script
    assert "nemotron-3-nano-bf16" in (tmp_path / "d" / "dynamo-deployment.yaml").read_text()
    # A published FP8 checkpoint is loaded as it is.
    own = servesim.search("llama-3.1-8b", "h200", isl=1000, osl=100, precision="fp8", tp=1, topology="agg", ttft_ms=600,
                          itl_ms=50, target_tps=1000, concurrency=[1, 2], requests=10)["best"]["deployment"]
    assert "checkpoint" not in own


def test_plan_charts_name_each_topologys_gpus(exe, tmp_path):
    # The plan chart drew one copy of 8-GPU aggregated replicas and one 2-GPU 1P1D pair on one
    # concurrency axis without saying the copies differ in size. Each legend entry now carries the
    # copy's GPUs: output tok/s / tok/s per GPU, 4 TP2 replicas = 8, 1P1D of TP1 = 2.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    out = tmp_path / "p.png"
    run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "fp8",
        "--tp", "2", "--isl", "1000", "--osl", "100", "--ttft-ms", "600", "--itl-ms", "40", "--target-tps", "5000",
        "--concurrency", "1,8", "--plot", out)
    sweep = json.loads((tmp_path / "p-sweep.json").read_text())
    for fig in (plot.latency_figure(sweep), plot.throughput_figure(sweep)):
        labels = {t.get_text() for ax in fig.axes for lg in [ax.get_legend()] if lg for t in lg.get_texts()}
        labels |= {t.get_text() for lg in fig.legends for t in lg.get_texts()}
        assert "aggregated (8 GPUs)" in labels, labels
        assert "disaggregated-1p1d (4 GPUs)" in labels, labels


def test_recommend_plot_writes_the_managers_cost_chart(exe, tmp_path):
    # The chart for a manager ($/hour per GPU type, the winner outlined) came only from Python's
    # cost_figure; recommend --plot drew the engineers' Pareto frontier alone.
    j = json.loads(run(exe, *REC, "--plot", tmp_path / "rec.png", "--format", "json"))
    assert j["cost_plot"] == str(tmp_path / "rec-cost.png")
    for name in ("rec.png", "rec-cost.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = run(exe, *REC, "--plot", tmp_path / "rec.png")
    assert f"{tmp_path / 'rec-cost.png'} ($/hour of the cheapest deployment per GPU type" in text
    # Every GPU type asked about keeps its bar, cheaper prefill/decode pairs or not; each bar says
    # its $/hour, GPUs, nodes, $/M tokens (= $/hour / (tok/s x 3600) x 1e6) and layout.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    row = dict(kind="aggregated", label="agg TP1 X fp8 seqs 1024 tokens 8192", gpus=8, nodes=1)
    rows = [dict(row, gpu=f"P{i}+Q", instance="p+q", usd_per_hour=10.0 + i, usd_per_million_output_tokens=0.5) for i in range(10)]
    rows += [dict(row, gpu=g, instance=g.lower(), usd_per_hour=100.0 + i, usd_per_million_output_tokens=100 / (1000 * 3600) * 1e6)
             for i, g in enumerate(("H100", "H200", "B200"))]
    fig = plot.cost_figure({"recommendations": sorted(rows, key=lambda r: r["usd_per_hour"]), "objective": {"target_tps": 1000},
                            "model": "m", "statistic": "p90", "ttft_ms": 1000, "itl_ms": 60})
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert len(names) == 8 and all(any(n.startswith(g + "\n") for n in names) for g in ("H100", "H200", "B200"))
    labels = [t.get_text() for t in ax.texts]
    assert "  100.00 USD/h: 8 GPUs, 1 node, 27.78 USD/M output tok\n  agg TP1 X fp8" in labels


def test_open_loop_predicted_csv_marks_the_copies_that_fall_behind(exe, tmp_path):
    # predicted.csv listed 1 copy at the whole target rate with a p90 TTFT of minutes and no word
    # that it could not keep up; deployment.json knew (predicted.overloaded).
    em = tmp_path / "em"
    run(exe, *OPEN_REC, "--emit", em)
    dep = json.loads((em / "recommended" / "deployment.json").read_text())
    rows = list(csv.DictReader(io.StringIO((em / "recommended" / "predicted.csv").read_text())))
    assert [r["overloaded"] for r in rows] == ["1" if o else "0" for _, o in sorted(zip(dep["predicted"]["copies"],
                                                                                         dep["predicted"]["overloaded"]))]
    deployed = next(r for r in rows if int(r["copies"]) == dep["copies"])
    assert deployed["overloaded"] == "0"
    for r in rows:
        if r["overloaded"] == "1":   # by hand: fewer copies than deployed, serving under the offered 120 x 100 tok/s
            assert int(r["copies"]) < dep["copies"] and float(r["output_tps"]) < 0.95 * 120 * 100


def test_planner_prices_the_million_tokens_of_its_period(exe):
    # The planner printed the day's $ but not $ per million output tokens, the figure recommend
    # gives at the peak; a user divided by hand.
    text = run(exe, "planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8",
               "--isl", "500", "--osl", "50", "--ttft-ms", "1000", "--itl-ms", "50", "--hours", "0.1", "--peak-rps", "3",
               "--replica-rps", "2", "-q")
    gpu_hours, usd = map(float, re.search(r"GPU-hours ([0-9.]+) against .*?\$([0-9.]+) against", text).groups())
    per_gpu_hour = float(re.search(r"\(\$([0-9.]+) per GPU-hour\)", text).group(1))
    line = re.search(r"\$ per million output tokens over the period \(([0-9.]+) M tokens: (\d+) requests x (\d+)\): "
                     r"\$([0-9.]+) scaled per GPU-hour, \$([0-9.]+) on the whole node held throughout", text)
    assert line, text
    mtok, requests, osl, scaled, held = line.groups()
    assert int(osl) == 50 and abs(float(mtok) - int(requests) * 50 / 1e6) < 1e-3 * float(mtok)
    assert abs(float(scaled) - gpu_hours * per_gpu_hour / float(mtok)) <= 0.02 * float(scaled) + 0.01
    assert abs(float(held) - 63.296 * 0.1 / float(mtok)) <= 0.01   # one p5en.48xlarge node for 0.1 h


def test_listed_prices_multiply_to_the_dollars_recommend_prints(exe):
    # list instances printed p5en.48xlarge at 63.30 while recommend priced 3 nodes at 189.89
    # (3 x 63.296): nodes x the listed price missed by a cent.
    text = run(exe, "list", "instances")
    price = float(next(l for l in text.splitlines() if l.startswith("p5en.48xlarge")).split()[-1])
    assert price == 63.296 and f"{3 * price:.2f}" == "189.89"
    assert next(l for l in text.splitlines() if l.startswith("p5.48xlarge")).split()[-1] == "98.32"


def test_recommend_says_its_as_run_block_is_one_copy(exe):
    # "Cheapest, as run: ... aggregated: 1 x replica TP1 (1 GPUs)" under a row of several copies read
    # as a one-GPU answer.
    j = json.loads(run(exe, *OPEN_REC, "--format", "json"))
    best = j["recommendations"][0]
    assert best["copies"] > 1
    text = run(exe, *OPEN_REC)
    assert f"Cheapest, as run: one of its {best['copies']} copies ({best['gpus']} GPUs in all)" in text
    # search's best had the same one-copy block under its table.
    score = json.loads(run(exe, "search", *OPEN_REC[1:], "--format", "json"))["best"]["score"]
    assert f"Best, as run: one of its {score['copies']} copies ({score['total_gpus']} GPUs in all)" in run(exe, "search", *OPEN_REC[1:])


def test_planner_chart_puts_each_slo_line_in_its_own_labelled_panel():
    # TTFT and ITL shared one panel on two axes, and both SLO lines sat at its top edge, one over
    # the other, unlabelled.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import planner_plot
    tl = [dict(start_s=600.0 * i, offered_rps=2.0, observed_rps=2.0, workers_held=1, workers_ready=1, ttft_p90_ms=300.0 + i,
               itl_p90_ms=40.0 + i) for i in range(6)]
    fig = planner_plot.figure({"timeline": tl, "peak_workers": 1, "gpu_hours": 1.0, "fixed_fleet_gpu_hours": 1.0,
                               "slo_attainment": 1.0, "slo": {"ttft_ms": 1000, "itl_ms": 60}})
    panels = {ax.get_ylabel(): ax for ax in fig.axes}
    for name, slo in (("TTFT p90 (ms)", 1000), ("ITL p90 (ms)", 60)):
        ax = panels[name]
        assert f"SLO {slo} ms" in [t.get_text() for t in ax.get_legend().get_texts()]
        assert ax.get_ylim()[1] >= 1.4 * slo   # the line sits below the legend and the top edge


def test_an_option_another_subcommand_takes_is_named_in_the_order_typed(exe):
    # `simulate ... --threads 1` (sweep takes --threads, simulate runs one point on one thread) said
    # "The following arguments were not expected: 1 --threads": the words reversed, no subcommand.
    out = subprocess.run([exe, "simulate", "--model", "llama-3.1-8b", "--threads", "1"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr == ("servesim: error: --threads 1: not an option or argument of servesim simulate "
                          "(see servesim simulate --help)\n")


def test_a_sweeps_last_concurrency_is_labelled(tmp_path):
    # plan's sweep went on past 1024 to 1536 clients (while a topology still met both SLOs) and the
    # chart left the last point, where the reading ends, without a label (1024 kept it).
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    c = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536]
    fig = plot.latency_figure({"concurrency": c, "ttft_p50_ms": [100.0] * len(c), "itl_p50_ms": [10.0] * len(c),
                               "output_tps_per_gpu": [1.0] * len(c), "output_tps_per_user": [1.0] * len(c)})
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels[-1] == "1536" and "1024" not in labels and "512" in labels, labels


def test_a_rate_sweeps_curve_says_it_is_the_open_loop_arrival_rate():
    # A sweep of one scenario has no topology column, and its curve was labelled "sweep". It now
    # says what was swept: the open-loop arrival rate (requests/s) or the closed loop's clients.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    cols = {"ttft_p50_ms": [40, 60], "ttft_p90_ms": [50, 90], "itl_p50_ms": [5, 9], "itl_p90_ms": [6, 12],
            "output_tps": [200, 400], "output_tps_per_gpu": [25, 50], "output_tps_per_user": [150, 120]}

    def labels(fig):
        out = {t.get_text() for ax in fig.axes for lg in [ax.get_legend()] if lg for t in lg.get_texts()}
        return out | {t.get_text() for lg in fig.legends for t in lg.get_texts()}

    rate = labels(plot.latency_figure(dict(cols, request_rate=[1, 2]), ttft_ms=1000, itl_ms=60))
    assert "open-loop arrival rate (8 GPUs)" in rate and not any("sweep" in t for t in rate), rate
    clients = labels(plot.latency_figure(dict(cols, concurrency=[1, 2])))
    assert "closed-loop clients (8 GPUs)" in clients and not any("sweep" in t for t in clients), clients


def test_simulate_prints_the_steady_rate_plan_reads(exe):
    # plan, search and recommend read a closed loop's steady rate; simulate printed only aiperf's
    # window, a few % lower, so the same point read differently. By Little's law the steady rate is
    # clients / mean request latency x mean answer; behind a phase barrier no steady line is given.
    base = ["simulate", "--requests", "1000", "--warmup-requests", "200"]
    text = run(exe, *base, "--warmup-until-steady")
    steady = float(re.search(r"the figure plan, search and recommend read: ([0-9.]+) tokens/sec", text).group(1))
    latency_ms = float(re.search(r"^request_latency +ms +([0-9.]+)", text, re.M).group(1))
    osl = float(re.search(r"^output_sequence_length +tokens +([0-9.]+)", text, re.M).group(1))
    clients = 32   # the embedded default scenario
    assert abs(steady - clients / (latency_ms / 1e3) * osl) <= 0.02 * steady
    assert "the figure plan, search and recommend read" not in run(exe, *base)


def test_open_loop_search_says_which_tokens_per_gpu_is_which(exe):
    # Open loop, 20 requests/s of 100-token answers on one TP1 GPU: the best row serves 20 x 100 =
    # 2,000 tok/s per GPU; the frontier's figure is aiperf's, over the run with its ramp and drain.
    out = run(exe, "search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", "1000", "--osl", "100", "--precision", "fp8",
              "--topology", "agg", "--tp", "1", "--ttft-ms", "600", "--itl-ms", "50", "--requests", "20", "--target-rps", "20",
              "--arrival", "poisson", "-q")
    lines = out.splitlines()
    front = next(i for i, l in enumerate(lines) if l.startswith("Pareto frontier"))
    assert "aiperf's tok/s/GPU" in lines[front] and "ramp and drain" in lines[front]
    assert "aiperf tok/s/GPU" in lines[front + 1]
    best = next(i for i, l in enumerate(lines) if l.startswith("best under the SLO"))
    header = lines[best].split("  ")
    assert "served tok/s/GPU" in lines[best]
    cells = [c for c in lines[best + 2].split("  ") if c.strip()]
    cols = [c.strip() for c in header if c.strip()]
    assert float(cells[cols.index("served tok/s/GPU")]) == 2000.0


def concurrency_stand_in(tmp_path, exe, scenario):
    """An `aiperf` on PATH standing in for the closed-loop sweep: each --concurrency run is servesim
    simulating `scenario` (a shell word) at the run's clients and request counts, its input_config
    cut to aiperf's loadgen block. Returns the environment."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "aiperf").write_text(
        "#!/usr/bin/env bash\n"
        "while [ $# -gt 0 ]; do case \"$1\" in --concurrency) C=$2; shift;; --request-count) N=$2; shift;;\n"
        "  --warmup-request-count) W=$2; shift;; --artifact-dir) D=$2; shift;; --isl) I=$2; shift;; esac; shift; done\n"
        f"'{exe}' simulate --scenario {scenario} --concurrency \"$C\" --requests \"$N\" --warmup-requests \"$W\" "
        "--isl \"$I\" --export \"$D\" > /dev/null\n"
        "/usr/bin/python3 -c \"import json,sys; p=sys.argv[1]+'/profile_export_aiperf.json'; d=json.load(open(p)); "
        "d['input_config']={'loadgen':{'concurrency':int(sys.argv[2])}}; json.dump(d,open(p,'w'))\" \"$D\" \"$C\"\n")
    (fake / "aiperf").chmod(0o755)
    return dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")


def test_the_emitted_sweep_leaves_each_run_s_setup_for_validate(exe, tmp_path):
    # "How to check after": aiperf's folders alone hold no servesim setup, so `servesim validate
    # artifacts` refused them (servesim_run.json missing). The sweep now writes the emitted scenario
    # with the run's clients and request counts beside each folder. Here aiperf is stood in for by
    # servesim itself simulating the same scenario, its input_config cut to aiperf's loadgen block:
    # validate must then read both folders and find 0.0 % everywhere (the same run, predicted twice).
    em = tmp_path / "em"
    run(exe, "plan", "--model", "nemotron-3-nano", "--instance", "p5.48xlarge", "--nodes", 1, "--tp", 1, "--isl", 1000,
        "--osl", 50, "--concurrency", "1,2", "--ttft-ms", 600, "--itl-ms", 100, "--target-tps", 100, "--topology", "agg",
        "--emit", em, "-q")
    env = concurrency_stand_in(tmp_path, exe, f"'{em / 'aggregated' / 'scenario.json'}'")
    work = tmp_path / "run"
    work.mkdir()
    subprocess.run(["bash", em / "aggregated" / "aiperf-sweep.sh"], cwd=work, env=env, check=True, timeout=300)
    arts = work / "artifacts" / "nemotron-3-nano-aggregated-bf16-1xp5.48xlarge"   # name, precision, instances
    side = json.loads((arts / "c2" / "servesim_run.json").read_text())
    assert (side["concurrency"], side["requests"], side["warmup_requests"]) == (2, 40, 4)
    assert side["model"] == "nemotron-3-nano"
    out = run(exe, "validate", arts)
    rows = [l.split() for l in out.splitlines() if l.startswith("vllm ") and " agg " in l]
    assert rows and all(r[r.index("agg") + 1] == "2" for r in rows), out
    assert all(v in ("0.0%", "+0.0%", "-0.0%") for r in rows for v in r[r.index("agg") + 4:]), out


def test_an_aiperf_run_of_ones_own_needs_only_the_gpu_and_layout_beside_it(exe, tmp_path):
    # A user's own aiperf run (not the emitted sweep) with a hand-written servesim_run.json of
    # {"gpu", "tp"}: its model came from the default scenario (Nemotron 3 Super, FP8) and its GPU
    # count too (8: four TP2 replicas of one client each). The model is now aiperf's served name
    # (input_config.endpoint.model_names, a Hugging Face id), the GPUs one server's, the precision
    # the checkpoint's; without a GPU or a model the setup is refused in one line. aiperf is stood in
    # for by servesim simulating that server (the sidecar gives its seed and the answers' 256 tokens,
    # of which aiperf's export counts the 254 after gpt-oss's format tokens): validate must find 0.0 %.
    d = tmp_path / "run1"
    run(exe, "simulate", "--model", "gpt-oss-120b", "--gpu", "h200", "--tp", 2, "--isl", 1024, "--osl", 256,
        "--concurrency", 4, "--requests", 40, "--warmup-requests", 8, "--export", d, "-q")
    p = d / "profile_export_aiperf.json"
    doc = json.loads(p.read_text())
    doc["input_config"] = {"endpoint": {"model_names": ["openai/gpt-oss-120b"], "type": "chat", "streaming": True},
                           "loadgen": {"concurrency": 4}}
    p.write_text(json.dumps(doc))
    side = d / "servesim_run.json"
    side.write_text(json.dumps({"gpu": "h200", "tp": 2, "seed": 1, "osl": 256}))
    rep = json.loads(run(exe, "validate", d, "--format", "json", "--threads", 1))
    (pt,) = rep["points"]
    assert pt["model"] == "gpt-oss-120b" and pt["precision"] == "mxfp4" and pt["concurrency"] == 4 and pt["runs_at_once"] == 4, pt
    assert abs(pt["error_pct"]["ttft"]) < 0.05 and abs(pt["error_pct"]["itl"]) < 0.05, pt
    assert pt["scenario"]["gpus"] == 2 and "precision" not in pt["scenario"], pt["scenario"]
    for setup, field in (({"tp": 2}, "gpu"), ({"gpu": "h200", "tp": 2, "model_names_dropped": True}, "model")):
        if setup.pop("model_names_dropped", False):
            doc["input_config"] = {"loadgen": {"concurrency": 4}}
            p.write_text(json.dumps(doc))
        side.write_text(json.dumps(setup))
        out = subprocess.run([exe, "validate", d], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert f"servesim_run.json: {field}: missing" in out.stderr, out.stderr


def test_an_aiperf_run_of_a_quantised_repository_runs_its_checkpoint(exe, tmp_path):
    # aiperf names the model the server served: a quantised repository's Hugging Face id names the
    # checkpoint too. A run of Qwen/Qwen3-32B-FP8 whose servesim_run.json gives no precision had been
    # simulated in BF16 (the catalogue's default checkpoint); it runs the id's 128x128 block FP8, as
    # `simulate --model Qwen/Qwen3-32B-FP8` does (aiperf stood in for by that simulation: 0.0 %).
    d = tmp_path / "fp8run"
    out = run(exe, "simulate", "--model", "Qwen/Qwen3-32B-FP8", "--gpu", "h200", "--tp", 1, "--isl", 1024, "--osl", 64,
              "--concurrency", 2, "--requests", 8, "--warmup-requests", 2, "--export", d)
    assert "qwen3-32b" in out and "fp8_block" in out, out
    p = d / "profile_export_aiperf.json"
    doc = json.loads(p.read_text())
    doc["input_config"] = {"endpoint": {"model_names": ["Qwen/Qwen3-32B-FP8"], "type": "chat", "streaming": True},
                           "loadgen": {"concurrency": 2}}
    p.write_text(json.dumps(doc))
    (d / "servesim_run.json").write_text(json.dumps({"gpu": "h200", "tp": 1, "seed": 1, "osl": 64}))
    rep = json.loads(run(exe, "validate", d, "--format", "json", "--threads", 1))
    (pt,) = rep["points"]
    assert pt["model"] == "qwen3-32b" and pt["precision"] == "fp8_block", pt
    assert abs(pt["error_pct"]["ttft"]) < 0.05 and abs(pt["error_pct"]["itl"]) < 0.05, pt


def test_a_sweep_without_a_short_prompt_at_light_load_measures_one_for_the_floor(exe, tmp_path):
    # A plan of 3,000-token prompts at 16-32 clients emitted a sweep with no run of a short prompt at
    # light load, the only regime that shows the first-token floor: calibrate e2e on its runs held the
    # floor at the shipped calibration's and asked for one. The sweep now ends with one (4 clients of a
    # 1,024-token prompt, its own setup beside it); validate reads it with the others (aiperf stood in
    # for by servesim simulating the script's scenario: 0.0 %), and calibrate e2e sees the floor measured.
    em = tmp_path / "em"
    run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5.48xlarge", "--nodes", 1, "--tp", 1, "--precision", "fp8",
        "--isl", 3000, "--osl", 50, "--concurrency", "16,32", "--ttft-ms", 2000, "--itl-ms", 100, "--target-tps", 100,
        "--topology", "agg", "--emit", em, "-q")
    script = (em / "aggregated" / "aiperf-sweep.sh").read_text()
    assert "--isl 1024" in script and '"$OUT/floor-c$C"' in script, script
    env = concurrency_stand_in(tmp_path, exe, f"'{em / 'aggregated' / 'scenario.json'}'")
    work = tmp_path / "run"
    work.mkdir()
    out = subprocess.run(["bash", em / "aggregated" / "aiperf-sweep.sh"], cwd=work, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    (art,) = (work / "artifacts").iterdir()
    side = json.loads((art / "floor-c4" / "servesim_run.json").read_text())
    assert (side["isl"], side["concurrency"], side["requests"]) == (1024, 4, 80), side
    rep = json.loads(run(exe, "validate", art, "--format", "json", "--threads", 1))
    assert sorted(p["id"] for p in rep["points"]) == ["c16", "c32", "floor-c4"], rep["points"]
    (floor,) = [p for p in rep["points"] if p["id"] == "floor-c4"]
    assert floor["isl"] == 1024 and floor["concurrency"] == 4, floor
    assert all(abs(v) < 0.05 for p in rep["points"] for v in p["error_pct"].values()), rep["points"]
    cal = json.loads(run(exe, "calibrate", "e2e", art, "--output", tmp_path / "prof.json", "--parameters", "gemm_scale",
                         "--folds", 1, "--format", "json", "--threads", 1))
    assert cal["short_prompt_low_load_measured"] is True, cal


def test_two_deployments_checked_from_one_folder_keep_their_runs_apart(exe, tmp_path):
    # A plan's aggregated and disaggregated sets, each checked with its aiperf-sweep.sh from one
    # working folder: both wrote artifacts/c1 and artifacts/c2, so the second overwrote the first's
    # runs and setups. Each now writes under artifacts/<name>-<precision>-<instances>, and validate
    # reads each folder as its own deployment (aiperf stood in for by servesim simulating the script's
    # own scenario: 0.0 % everywhere); a folder that holds another deployment's runs is refused.
    em = tmp_path / "em"
    run(exe, "plan", "--model", "nemotron-3-nano", "--instance", "p5.48xlarge", "--nodes", 1, "--tp", 1, "--isl", 1000,
        "--osl", 50, "--concurrency", "1,2", "--ttft-ms", 600, "--itl-ms", 100, "--target-tps", 100, "--topology", "both",
        "--emit", em, "-q")
    stand_in = concurrency_stand_in(tmp_path, exe, '"$SCENARIO"')   # each script's own scenario, from the environment
    work = tmp_path / "run"
    work.mkdir()
    arts = {}
    for kind, name in (("aggregated", "nemotron-3-nano-aggregated-bf16-1xp5.48xlarge"),
                       ("disaggregated-1p1d", "nemotron-3-nano-disaggregated-1p1d-bf16-1xp5.48xlarge")):
        env = dict(stand_in, SCENARIO=str(em / kind / "scenario.json"))
        out = subprocess.run(["bash", em / kind / "aiperf-sweep.sh"], cwd=work, env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        arts[kind] = work / "artifacts" / name
        assert out.stdout.strip().endswith(f"servesim validate artifacts/{name}"), out.stdout
    assert sorted(p.name for p in (work / "artifacts").iterdir()) == sorted(a.name for a in arts.values())
    topologies = [json.loads((a / "c2" / "servesim_run.json").read_text())["topology"] for a in arts.values()]
    assert topologies[0] != topologies[1]
    # validate on artifacts/ itself (two deployments' folders of runs): one line naming where the runs are.
    out = subprocess.run([exe, "validate", work / "artifacts"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "writes each deployment's runs to artifacts/<deployment>, the folder its last line names" in out.stderr, out.stderr
    for kind, a in arts.items():
        side = json.loads((a / "c2" / "servesim_run.json").read_text())
        assert side["topology"] == json.loads((em / kind / "scenario.json").read_text())["topology"]   # its own deployment
        rep = json.loads(run(exe, "validate", a, "--format", "json", "--threads", 1))
        assert sorted(p["id"] for p in rep["points"]) == ["c1", "c2"], rep["points"]
        assert all(abs(v) < 0.05 for p in rep["points"] for v in p["error_pct"].values()), rep["points"]
    # The disaggregated check pointed at the aggregated one's folder: one line, nothing sent.
    before = (arts["aggregated"] / "c2" / "servesim_run.json").read_text()
    env = dict(stand_in, SCENARIO=str(em / "disaggregated-1p1d" / "scenario.json"), ARTIFACTS=str(arts["aggregated"]))
    out = subprocess.run(["bash", em / "disaggregated-1p1d" / "aiperf-sweep.sh"], cwd=work, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "holds runs of another deployment" in out.stderr and "set ARTIFACTS to a new folder" in out.stderr
    assert (arts["aggregated"] / "c2" / "servesim_run.json").read_text() == before


def rate_stand_in(tmp_path, exe, scenario):
    """An `aiperf` on PATH standing in for the open-loop checks: each --request-rate run is servesim
    simulating `scenario` at the run's rate and request counts (each half of an rR-text / rR-images
    pair is the mixed stream at its own share of the rate), its input_config cut to aiperf's loadgen
    block; closed-loop runs leave an empty folder (not stood in for here)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "aiperf").write_text(
        "#!/usr/bin/env bash\n"
        "while [ $# -gt 0 ]; do case \"$1\" in --request-rate) R=$2; shift;; --request-count) N=$2; shift;;\n"
        "  --warmup-request-count) W=$2; shift;; --artifact-dir) D=$2; shift;; --concurrency) C=$2; shift;; esac; shift; done\n"
        "mkdir -p \"$D\"\n[ -n \"$C\" ] && exit 0\n"
        f"'{exe}' simulate --scenario '{scenario}' --request-rate \"$R\" --requests \"$N\" --warmup-requests \"$W\" "
        "--export \"$D\" > /dev/null\n"
        "/usr/bin/python3 -c \"import json,sys; p=sys.argv[1]+'/profile_export_aiperf.json'; d=json.load(open(p)); "
        "d['input_config']={'loadgen':{'request_rate':float(sys.argv[2])}}; json.dump(d,open(p,'w'))\" \"$D\" \"$R\"\n")
    (fake / "aiperf").chmod(0o755)
    return dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")


def test_the_emitted_open_loop_check_leaves_each_run_s_setup_for_validate(exe, tmp_path):
    # Friction 51: the open-loop checks (artifacts/rR) had no setup, so validate refused them. Each
    # folder now gets servesim_run.json: the whole fleet's scenario (scenario-all-copies.json, 3
    # copies here) with the run's rate, Poisson arrivals and request counts. aiperf is stood in for
    # by servesim simulating that scenario: every point must then validate at 0.0 %.
    em = tmp_path / "em"
    run(exe, *OPEN_REC, "--emit", em)
    env = rate_stand_in(tmp_path, exe, em / "recommended" / "scenario-all-copies.json")
    work = tmp_path / "run"
    work.mkdir()
    subprocess.run(["bash", em / "recommended" / "aiperf-sweep.sh"], cwd=work, env=env, check=True, timeout=300)
    arts = work / out_of(em / "recommended" / "aiperf-sweep.sh")
    side = json.loads((arts / "r120.000" / "servesim_run.json").read_text())
    # 120 requests/s for a minute after 10 s of warm-up, as the plan ran it.
    assert (side["request_rate"], side["arrival"], side["requests"], side["warmup_requests"]) == (120.0, "poisson", 7200, 1200)
    assert side["topology"]["replicas"] == 3 and side["workload"]["isl"] == 1000 and side["workload"]["osl"] == 100
    rep = json.loads(run(exe, "validate", arts, "--format", "json", "--threads", 1))
    pts = rep["points"]
    assert sorted(p["request_rate"] for p in pts) == [90.0, 120.0, 180.0], pts
    for p in pts:
        assert p["scenario"]["workload"]["request_rate"] == p["request_rate"] and "concurrency" not in p["scenario"]["workload"]
        assert all(abs(v) < 0.05 for v in p["error_pct"].values()), p["error_pct"]
    text = run(exe, "validate", arts, "--threads", 1)
    assert "open loop at its request rate" in text and "closed loop at its concurrency" not in text, text


def test_an_images_pair_validates_as_one_stream(exe, tmp_path):
    # With images on 30 % of requests the open-loop check is two aiperf runs at once, rR-text (70 %
    # of the rate, no image) and rR-images (30 %, one 1024x1024 image each): the plan simulated one
    # stream, so validate reads the pair as one point of 700 + 300 measured requests, TTFT and ITL
    # from both folders' per-request records (or, without them, the two figures weighted by their
    # requests), output tok/s the sum, and says which.
    em = tmp_path / "em"
    run(exe, "plan", "--model", "nemotron-3.5-super-vl", "--instance", "p6-b200.48xlarge", "--nodes", 1, "--tp", 1,
        "--precision", "nvfp4", "--topology", "agg", "--isl", 2000, "--osl", 100, "--images", "1024x1024",
        "--image-fraction", 0.3, "--ttft-ms", 1000, "--itl-ms", 60, "--target-rps", 3, "--arrival", "poisson",
        "--emit", em, "-q")
    script = (em / "aggregated" / "aiperf-sweep.sh").read_text()
    assert "$OUT/r$R-text" in script and "$OUT/r$R-images" in script
    env = rate_stand_in(tmp_path, exe, em / "aggregated" / "scenario.json")
    work = tmp_path / "run"
    work.mkdir()
    subprocess.run(["bash", em / "aggregated" / "aiperf-sweep.sh"], cwd=work, env=env, check=True, timeout=300)
    arts = work / out_of(em / "aggregated" / "aiperf-sweep.sh")
    halves = [json.loads((arts / f"r3.000-{p}" / "servesim_run.json").read_text()) for p in ("text", "images")]
    assert [(h["stream"]["part"], h["stream"]["requests"], h["stream"]["warmup_requests"]) for h in halves] == \
        [("text", 700, 70), ("images", 300, 30)]
    assert all((h["request_rate"], h["requests"], h["workload"]["multimodal"]["fraction"]) == (3.0, 1000, 0.3) for h in halves)
    rep = json.loads(run(exe, "validate", arts, "--format", "json", "--threads", 1))
    pts = [p for p in rep["points"] if p["id"].startswith("r")]
    assert len(pts) == 1 and pts[0]["id"] == "r3.000" and pts[0]["requests"] == 1000, pts
    assert "1000 per-request records" in pts[0]["stream_note"], pts[0]
    # Each half stands in as the mixed stream at 2.1 and 0.9 requests/s: on 8 B200 copies at this
    # light load the latencies barely depend on the rate, and the two served rates add up to the whole.
    assert all(abs(v) < 5 for v in pts[0]["error_pct"].values()), pts[0]["error_pct"]
    # Without per-request records: the request-weighted figures, said so.
    for p in ("text", "images"):
        (arts / f"r3.000-{p}" / "profile_export.jsonl").unlink()
    rep = json.loads(run(exe, "validate", arts, "--format", "json", "--threads", 1))
    pt = [p for p in rep["points"] if p["id"] == "r3.000"][0]
    assert "weighted by their requests (700 and 300" in pt["stream_note"], pt
    # README's step 6 fits on the same folder (friction 52: it globbed artifacts/c*/, which an
    # open-loop check does not write): the pair is one measured point there too.
    out = subprocess.run([exe, "calibrate", "e2e", arts, "--output", tmp_path / "cal.json", "--folds", "1",
                          "--threads", "1", "--parameters", "decode_scale"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "cal.json").read_text())["fitted_on"]["points"] == 1


def test_an_open_loop_plan_s_chart_says_its_curves_are_closed_loop(exe, tmp_path):
    # Friction 53: `plan --arrival poisson --plot` drew "TTFT p90 vs concurrency" with nothing saying
    # these are the closed-loop sweep's curves while the plan (1 copy at 40 req/s) was read open loop.
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", 1, "--tp", 1, "--precision", "fp8",
        "--isl", 1000, "--osl", 100, "--ttft-ms", 600, "--itl-ms", 50, "--concurrency", "1,2", "--target-rps", 4,
        "--arrival", "poisson", "--topology", "agg", "-q", "--threads", 1, "--plot", tmp_path / "p.png")
    sweep, plan = (json.loads((tmp_path / f"p-{k}.json").read_text()) for k in ("sweep", "plan"))
    titles = [ax.get_title() for ax in plot.latency_figure(sweep, plan=plan).axes]
    assert titles and all("closed loop; the plan is read open loop at 4 req/s" in t for t in titles), titles
    closed = dict(plan, open_loop=None)
    assert not any("open loop" in ax.get_title() for ax in plot.latency_figure(sweep, plan=closed).axes)


def test_a_rate_sweep_says_whose_tok_s_it_prints(exe):
    # Friction 54: the tour's step-2 sweep at 60 req/s printed served 43.3 req/s beside out tok/s
    # 30,733 (51 answers/s of 600 tokens): the tok/s is aiperf's over the whole run, its drain after
    # the last send included. The footnote now says so. One seat offered 4.4 req/s (capacity 2.18,
    # docs/capacity-planning.md, Overload): both figures read its capacity, the window's served req/s
    # and aiperf's whole-run 218 tok/s of 100-token answers.
    out = run(exe, "sweep", *ONE_SEAT, "--request-rate", "1.1,4.4")
    assert "out tok/s, tok/s/GPU and tok/s/user are aiperf's, over the whole run" in out, out
    rows = {float(l.split()[0]): l.split() for l in out.splitlines() if re.match(r"^\s+[0-9.]+\s+[0-9.]+\s", l)}
    served, tok = float(rows[4.4][1]), float(rows[4.4][2])
    assert tok / 100 >= served * 0.95, (served, tok)   # whole-run answers/s at least the window's


def test_search_states_its_objective_in_words(exe):
    # Friction 55: `search ... --target-rps 40 --arrival poisson` printed "objective target_tps", a
    # field name, for a question asked in requests/s. 40 requests/s x 100-token answers = 4000 tok/s.
    head = run(exe, "search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", 1000, "--osl", 100, "--ttft-ms", 300,
               "--itl-ms", 15, "--target-rps", 40, "--arrival", "poisson", "-q", "--threads", 1).splitlines()[0]
    assert "objective: the cheapest deployment serving 40 requests/s x OSL 100 = 4000 output tok/s, poisson arrivals (open loop)" \
        in head, head
    head = run(exe, "search", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", 1000, "--osl", 100, "--ttft-ms", 300,
               "--itl-ms", 15, "--concurrency", "1,2", "-q", "--threads", 1).splitlines()[0]
    assert "objective: the most output tok/s per GPU under the SLO" in head and "target_tps" not in head, head


def test_a_closed_loop_target_rate_is_named_where_the_target_is(exe):
    # `search --target-rps 20` without --arrival (read off closed-loop sweeps) said only "serving 2000
    # output tok/s": the rate the user gave was nowhere. Search, recommend and plan now name it, with
    # the tok/s it makes (20 requests/s x 100-token answers = 2000 tok/s) and how it is read; a
    # --target-tps target stays in tok/s alone.
    load = ["--model", "llama-3.1-8b", "--isl", 1000, "--osl", 100, "--precision", "fp8", "--tp", 1, "--topology", "agg",
            "--ttft-ms", 600, "--itl-ms", 50, "--concurrency", "1,2", "-q", "--threads", 1]
    head = run(exe, "search", "--gpu", "h200", *load, "--target-rps", 20).splitlines()[0]
    assert "objective: the cheapest deployment serving 20 requests/s x OSL 100 = 2000 output tok/s, read off closed-loop" \
        in head, head
    rep = json.loads(run(exe, "search", "--gpu", "h200", *load, "--target-rps", 20, "--format", "json"))
    assert (rep["objective"]["target_rps"], rep["objective"]["target_tps"]) == (20, 2000)
    head = run(exe, "recommend", "--gpu", "h200", *load, "--target-rps", 20).splitlines()[0]
    assert "ISL 1000 / OSL 100, 20 requests/s x OSL 100 = 2000 output tok/s under TTFT p90 <= 600 ms" in head, head
    out = run(exe, "plan", "--instance", "p5en.48xlarge", "--nodes", 1, *load, "--target-rps", 20)
    assert "target 20 requests/s x OSL 100 = 2000 output tok/s (clients per copy" in out, out
    head = run(exe, "search", "--gpu", "h200", *load, "--target-tps", 2000).splitlines()[0]
    assert "objective: the cheapest deployment serving 2000 output tok/s" in head and "requests/s" not in head, head


def test_plan_chart_labels_a_planned_point_on_an_unlabelled_tick(exe, tmp_path):
    # The reference study's stars sat at 768 clients, a tick the axis leaves unlabelled (only the
    # powers of two and the last point are): a reader could not tell the planned concurrency.
    # A planned point off the labelled ticks now carries its clients beside the star, on both
    # panels; one on a labelled tick carries none (the axis says it).
    import matplotlib
    matplotlib.use("Agg")
    from servesim import plot
    run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", "1", "--precision", "fp8",
        "--tp", "4", "--isl", "1000", "--osl", "50", "--ttft-ms", "600", "--itl-ms", "100", "--target-tps", "100",
        "--concurrency", "1,2,4,8,16,32,48,64,96,128", "--plot", tmp_path / "p.png")
    sweep = json.loads((tmp_path / "p-sweep.json").read_text())
    for clients, labelled in ((48, False), (64, True)):
        plan = {"ttft_ms": 600, "itl_ms": 100, "topologies": [{"name": "aggregated", "max_concurrency": clients}]}
        fig = plot.latency_figure(sweep, plan=plan)
        for ax in fig.axes[:2]:
            texts = [t.get_text() for t in ax.texts]
            assert (str(clients) in texts) != labelled, (clients, texts)


def test_help_names_each_value_plainly(exe):
    # --help glued each check's label onto the value's type: "--seed INT:INT" (two values?),
    # "--target-tps FLOAT:NUMBER", "--tp INT:INT in [1 - 1048576]" (a range to type?). Every
    # subcommand's --help now names a value INT, FLOAT, TEXT, FILE, DIR, PATH or its choices.
    subs = ["list", "model", "memory", "min-gpus", "op", "calibrate", "step", "simulate", "sweep", "plan", "validate",
            "search", "nccl", "recommend", "planner"]
    for args in [["--help"]] + [[s, "--help"] for s in subs]:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        glued = re.findall(r"\b(?:INT|FLOAT|UINT|TEXT):\S*", out.stdout)
        assert not glued, (args, glued)
    sim = subprocess.run([exe, "simulate", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert re.search(r"--seed INT +Random seed", sim) and "--format {table,json}" in sim and "--scenario FILE" in sim, sim
    # sweep --output said "instead of stdout", while the terminal still gets the table.
    sweep = subprocess.run([exe, "sweep", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "instead of stdout" not in sweep and "the terminal still gets the table" in sweep, sweep
    # The checks still run: a negative thread count is refused, naming what is valid.
    out = subprocess.run([exe, "sweep", "--threads", "-1", "--concurrency", "1"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and ">= 0" in out.stderr, out.stderr


def test_the_sweep_table_says_what_its_columns_hold(exe):
    # A sweep's busy, batch and KV columns (a mean, a peak, the whole fleet's?) and tok/s/user were
    # explained nowhere, and its band legend read "(a,b)" under cells written "(a-b)". Two TP1
    # replicas and one client: one request at a time on the pair, so the mean batch of a running
    # step is 1 and its tok/s/user is 1 / ITL.
    out = run(exe, "sweep", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", 2, "--tp", 1, "--precision", "fp8",
              "--isl", 1000, "--osl", 100, "--concurrency", "1", "--requests", 20, "-q")
    assert "(a,b)" not in out and "(a-b): prediction band" in out, out
    legend = next(l for l in out.splitlines() if l.startswith("tok/s/user:"))
    for words in ("busy: share of the run a replica was running steps", "batch: sequences in a step",
                  "KV: share of the replica's KV cache in use", "means over the replicas"):
        assert words in legend, legend
    cells = next(l for l in out.splitlines() if re.match(r"^\s+1\s", l)).split()
    assert cells[-2] == "1.0", cells   # batch: one sequence in every running step
    cols = json.loads(run(exe, "sweep", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", 2, "--tp", 1, "--precision",
                          "fp8", "--isl", 1000, "--osl", 100, "--concurrency", "1", "--requests", 20, "-q", "--format", "json"))
    per_user, itl = float(cells[5]), cols["inter_token_latency_ms_avg"][0]   # after out tok/s, its band, tok/s/GPU
    assert abs(per_user - 1000 / itl) < 0.02 * per_user, (per_user, itl)   # one client, steady steps: 1 / ITL
    plan = run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", 1, "--tp", 1, "--precision",
               "fp8", "--isl", 1000, "--osl", 100, "--ttft-ms", 600, "--itl-ms", 50, "--concurrency", "1", "--topology", "agg", "--target-tps", 100,
               "-q", "--threads", 1)
    assert "tok/s/user: mean over requests of 1 / ITL" in plan and "concurrency: clients of one copy of the topology" in plan


def test_simulate_says_what_its_summary_figures_are(exe):
    # simulate printed "little's law check ... = 63.12" with no unit, an input_sequence_length of
    # 7280 for --isl 6000 with nothing saying why, and "simulated 169.91 s" (wall time?). A
    # 1024x1024 image is 4 tiles of 512 + a thumbnail, 256 tokens each: 1280 vision tokens, so
    # requests with the image read 6000 + 1280 = 7280 input tokens; Little's law: in flight =
    # throughput x mean latency, at most the 64 clients.
    out = run(exe, "simulate", "--model", "nemotron-3.5-super-vl", "--gpu", "b200", "--gpus", 8, "--tp", 1, "--precision",
              "nvfp4", "--isl", 6000, "--osl", 600, "--images", "1024x1024", "--image-fraction", 0.3, "--concurrency", 64,
              "--requests", 400, "-q")
    isl = next(l for l in out.splitlines() if l.startswith("input_sequence_length ")).split()
    assert (float(isl[3]), float(isl[-1])) == (6000.0, 7280.0), isl   # min text only, max text + 1280
    assert "input_sequence_length: the prompt's text tokens + 1280 vision tokens on a request with images (30 % of requests)" in out
    x = float(re.search(r"request_throughput +([0-9.]+) requests/sec", out).group(1))
    w = float(next(l for l in out.splitlines() if l.startswith("request_latency ")).split()[2]) / 1e3
    m = re.search(r"little's law check .* = ([0-9.]+) requests in flight on average \(closed loop: at most its 64 clients\)", out)
    assert m and abs(float(m.group(1)) - x * w) < 0.05 and float(m.group(1)) <= 64, out
    assert re.search(r"\(warm-up 0\); [0-9.]+ s of simulated serving", out), out
