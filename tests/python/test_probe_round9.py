"""Probe round 9 (docs/safety.md, cases Z1-Z12): the run setups the emitted aiperf-sweep.sh writes
(servesim_run.json) edited by hand; validate on a folder of folders holding symbolic-link loops,
links to a sibling, a dangling export, 10^4 empty folders, and the halves of an open-loop check
apart; --emit into a folder holding an earlier set and the measurements of its sweep; --calibration
naming a folder or a profile of another format version. Each case ends in a correct result or one
line naming the file or flag, the field and what would be valid."""
import json
import os
import shutil
import subprocess
import time

from test_probe_round6 import one_line_error   # rc 2 and one "servesim: error: " line holding every word
from test_probe_round7 import PROFILE, SIM8, run

# One H200 serving Llama 3.1 8B FP8 at 4 requests/s: 40 measured requests after 4 warm-up.
OPEN = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "1", "--precision", "fp8", "--isl", "500", "--osl", "20",
        "--request-rate", "4", "--requests", "40", "--warmup-requests", "4", "-q"]


def open_loop_folder(exe, path, **edit):
    """An open-loop aiperf folder as aiperf-sweep.sh leaves it: servesim's export stands in for
    aiperf's (its input_config cut to aiperf's loadgen block), and servesim_run.json holds the run's
    rate, arrivals and request counts over the scenario; `edit` changes the sidecar's fields."""
    out = run(exe, *OPEN, "--export", path)
    assert out.returncode == 0, out.stderr
    doc = json.load(open(path / "profile_export_aiperf.json"))
    scenario = doc["input_config"]
    doc["input_config"] = {"loadgen": {"request_rate": 4.0}}
    json.dump(doc, open(path / "profile_export_aiperf.json", "w"))
    side = {"request_rate": 4.0, "arrival": "poisson", "requests": 40, "warmup_requests": 4, **scenario}
    side.update(edit)
    (path / "servesim_run.json").write_text(json.dumps(side).replace('"__NaN__"', "NaN"))
    return path


def half(exe, path, part, other, rate=4.0):
    """One half of an open-loop check with images on a share of requests (rR-text / rR-images)."""
    return open_loop_folder(exe, path, request_rate=rate,
                            stream={"part": part, "request_rate": rate / 2, "requests": 40, "warmup_requests": 4, "with": other})


def reasons(exe, folder):
    out = run(exe, "validate", folder, "--format", "json", "--threads", 1)
    assert out.returncode == 0, out.stderr
    return {p["id"]: p.get("unmodellable") for p in json.loads(out.stdout)["points"]}


def test_an_open_loop_folder_validates_at_zero(exe, tmp_path):   # Z1 (the base case of the others)
    f = open_loop_folder(exe, tmp_path / "r4")
    j = json.loads(run(exe, "validate", f, "--format", "json", "--threads", 1).stdout)
    (p,) = j["points"]
    assert p["request_rate"] == 4.0 and p["requests"] == 40 and p["warmup_requests"] == 4
    assert all(abs(v) < 0.05 for v in p["error_pct"].values()), p["error_pct"]


def test_a_hand_edited_sidecar_is_named_with_its_field(exe, tmp_path):   # Z2
    # A rate that is not one, negative requests, an unknown arrival process: each was either run
    # under the folder's name as "workload.request_rate" (a not-modellable row, rc 0) or, for
    # requests, silently replaced by the records' count.
    for name, edit, words in (
            ("nan", {"request_rate": "__NaN__"}, ["invalid JSON"]),
            ("nanstr", {"request_rate": "NaN"}, ["servesim_run.json: request_rate", "a number from 1e-6 to 1e9", '"NaN"']),
            ("neg", {"request_rate": -4}, ["request_rate", "got -4"]),
            ("negreq", {"requests": -5}, ["servesim_run.json: requests", "1..1000000000", "got -5"]),
            ("halfreq", {"warmup_requests": 1.5}, ["warmup_requests", "a whole number"]),
            ("arrival", {"arrival": "bursty"}, ["servesim_run.json: arrival", "poisson", '"bursty"']),
            ("part", {"stream": {"part": "audio", "with": "x"}}, ["stream.part", '"text" or "images"']),
            ("with", {"stream": {"part": "text", "with": "../../etc"}}, ["stream.with", "the other half's folder name"])):
        f = open_loop_folder(exe, tmp_path / name, **edit)
        one_line_error(run(exe, "validate", f, "--threads", 1), *words)


def test_rate_and_clients_in_one_sidecar(exe, tmp_path):   # Z3
    # Both set by hand: one line. The emitted case, a closed-loop folder of an open-loop plan (the
    # sidecar's clients over a scenario whose workload has the plan's rate), reads as closed loop:
    # it had failed "give exactly one of concurrency ... or request_rate".
    f = open_loop_folder(exe, tmp_path / "both", concurrency=4)
    one_line_error(run(exe, "validate", f, "--threads", 1), "request_rate: set with concurrency", "not both")
    c = tmp_path / "c2"
    out = run(exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", 1, "--precision", "fp8", "--isl", 500,
              "--osl", 20, "--concurrency", 2, "--requests", 16, "--warmup-requests", 4, "-q", "--export", c)
    assert out.returncode == 0, out.stderr
    doc = json.load(open(c / "profile_export_aiperf.json"))
    scenario = doc.pop("input_config")
    json.dump(doc, open(c / "profile_export_aiperf.json", "w"))
    wl = dict(scenario["workload"])
    wl.pop("concurrency")
    scenario["workload"] = {**wl, "request_rate": 4.0, "arrival": "poisson"}
    (c / "servesim_run.json").write_text(json.dumps({"concurrency": 2, "requests": 16, "warmup_requests": 4, **scenario}))
    j = json.loads(run(exe, "validate", c, "--format", "json", "--threads", 1).stdout)
    (p,) = j["points"]
    assert p["concurrency"] == 2 and "request_rate" not in p["scenario"]["workload"], p
    assert all(abs(v) < 0.05 for v in p["error_pct"].values()), p["error_pct"]


def test_links_in_a_folder_of_folders(exe, tmp_path):   # Z4
    # Symbolic-link loops are not folders (skipped); a link to a sibling run counted it twice; a
    # dangling link in place of the export was skipped as if the folder held no run.
    root = tmp_path / "artifacts"
    root.mkdir()
    open_loop_folder(exe, root / "r4")
    os.symlink("..", root / "up")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.symlink("r4", root / "alias")
    (root / "gone").mkdir()
    os.symlink("/nonexistent/profile_export_aiperf.json", root / "gone" / "profile_export_aiperf.json")
    r = reasons(exe, root)
    assert set(r) == {"r4", "alias", "gone"}, r
    assert r["r4"] is None
    assert "the same folder as r4 (a symbolic link): read once, under r4" in r["alias"]
    assert "a symbolic link to a missing file (/nonexistent/profile_export_aiperf.json)" in r["gone"]


def test_ten_thousand_empty_folders(exe, tmp_path):   # Z5
    root = tmp_path / "many"
    root.mkdir()
    for i in range(10000):
        (root / f"d{i}").mkdir()
    t = time.time()
    one_line_error(run(exe, "validate", root, "--threads", 1), "no profile_export_aiperf.json in the folder or its subfolders")
    (root / "r4").mkdir()
    open_loop_folder(exe, root / "r4")
    assert list(reasons(exe, root)) == ["r4"]
    assert time.time() - t < 30


def test_the_halves_of_an_open_loop_check_apart(exe, tmp_path):   # Z6
    # rR-text without rR-images: half the load, once compared as if it were the whole.
    lone = tmp_path / "lone"
    lone.mkdir()
    half(exe, lone / "r4-text", "text", "r4-images")
    assert "the text half of an open-loop stream without its other half r4-images (no such folder beside it)" in \
        reasons(exe, lone)["r4-text"]
    # Halves that describe different streams, or two "images" halves: listed, never combined.
    mism = tmp_path / "mism"
    mism.mkdir()
    half(exe, mism / "r4-text", "text", "r4-images")
    half(exe, mism / "r4-images", "images", "r4-text", rate=5.0)
    assert "the two halves describe different streams" in list(reasons(exe, mism).values())[0]
    two = tmp_path / "two"
    two.mkdir()
    half(exe, two / "r4-text", "images", "r4-images")
    half(exe, two / "r4-images", "images", "r4-text")
    assert 'one holds "text", the other "images"' in list(reasons(exe, two).values())[0]
    # A good pair read as one point; one half alone refused.
    ok = tmp_path / "ok"
    ok.mkdir()
    half(exe, ok / "r4-text", "text", "r4-images")
    half(exe, ok / "r4-images", "images", "r4-text")
    j = json.loads(run(exe, "validate", ok, "--format", "json", "--threads", 1).stdout)
    assert [(p["id"], p["requests"]) for p in j["points"]] == [("r4", 80)]
    one_line_error(run(exe, "validate", ok / "r4-text", "--threads", 1), "holds the text half of one open-loop stream",
                   "validate the folder holding both")


def test_emit_over_an_earlier_set_holding_measurements(exe, tmp_path):   # Z7
    # recommend --emit E, its sweep's artifacts/ run inside E/recommended, then plan --emit E: the
    # plan removed recommend's other folders and index.json and left E/recommended (holding the
    # measurements) beside its own folder as if part of the new set. Now refused before writing.
    rec = ["recommend", "--model", "llama-3.1-8b", "--gpu", "h200,b200", "--isl", 1000, "--osl", 100, "--precision", "fp8",
           "--tp", 1, "--ttft-ms", 300, "--itl-ms", 15, "--arrival", "poisson", "--topology", "agg", "-q", "--threads", 1,
           "--concurrency", "1,2"]
    e = tmp_path / "E"
    assert run(exe, *rec, "--target-rps", 60, "--emit", e).returncode == 0
    before = sorted(os.listdir(e))
    (e / "recommended" / "artifacts").mkdir()
    open_loop_folder(exe, e / "recommended" / "artifacts" / "r60.000")
    out = run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", 1, "--tp", 1, "--precision", "fp8",
              "--isl", 1000, "--osl", 100, "--ttft-ms", 300, "--itl-ms", 15, "--target-rps", 60, "--arrival", "poisson",
              "--topology", "agg", "-q", "--emit", e)
    one_line_error(out, "--emit", "recommended: an earlier emitted deployment this set does not replace holds 'artifacts'",
                   "move it out or give a new folder")
    assert sorted(os.listdir(e)) == before
    # The same command again over its own set keeps the measurements out of the way too: refused.
    one_line_error(run(exe, *rec, "--target-rps", 40, "--emit", e), "recommended: the folder holds 'artifacts'")
    shutil.rmtree(e / "recommended" / "artifacts")
    assert run(exe, *rec, "--target-rps", 40, "--emit", e).returncode == 0


def test_calibration_a_folder_or_another_format(exe, tmp_path):   # Z8
    # A folder: simulate, sweep and validate said CLI11's "File is actually a directory: cdir";
    # plan, search and recommend "cdir: is a directory", without the flag. One line on each now.
    (tmp_path / "cdir").mkdir()
    words = ["--calibration: ", "cdir: is a directory", "give a profile file (servesim calibrate e2e --output)"]
    one_line_error(run(exe, *SIM8, "--calibration", tmp_path / "cdir"), *words)
    one_line_error(run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", 1, "--tp", 1,
                       "--isl", 500, "--osl", 20, "--ttft-ms", 500, "--itl-ms", 50, "-q", "--calibration", tmp_path / "cdir"), *words)
    one_line_error(run(exe, "recommend", "--model", "llama-3.1-8b", "--gpu", "h200", "--isl", 500, "--osl", 20, "--ttft-ms", 500,
                       "--itl-ms", 50, "-q", "--calibration", tmp_path / "cdir"), *words)
    f = open_loop_folder(exe, tmp_path / "r4")
    one_line_error(run(exe, "validate", f, "--calibration", tmp_path / "cdir"), *words)
    # A profile of another format version is refused; one without the version (or null) was read as
    # version 1.
    p = json.load(open(PROFILE))
    for name, v in (("v2", 2), ("v0", 0), ("vstr", "1"), ("vnull", None), ("none", "drop")):
        q = dict(p)
        if v == "drop":
            q.pop("servesim_calibration")
        else:
            q["servesim_calibration"] = v
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(q))
        one_line_error(run(exe, *SIM8, "--calibration", path), f"{name}.json: servesim_calibration")


def test_a_closed_loop_sweep_of_several_copies_leaves_the_whole_fleet(exe, tmp_path):   # Z12
    # A closed-loop plan of 192 copies (8 TP1 replicas each): the sweep sends 192 and 384 clients to
    # the whole fleet, and its sidecars took scenario.json, ONE copy, under those clients.
    em = tmp_path / "mc"
    out = run(exe, "plan", "--model", "llama-3.1-8b", "--instance", "p5en.48xlarge", "--nodes", 1, "--tp", 1, "--precision", "fp8",
              "--isl", 1000, "--osl", 100, "--ttft-ms", 600, "--itl-ms", 50, "--target-tps", 100000, "--concurrency", "1,2",
              "--topology", "agg", "-q", "--threads", 1, "--emit", em)
    assert out.returncode == 0, out.stderr
    dep = json.load(open(em / "aggregated" / "deployment.json"))
    whole = json.load(open(em / "aggregated" / "scenario-all-copies.json"))
    assert dep["copies"] == 192 and whole["topology"]["replicas"] == 8 * 192 and whole["workload"]["concurrency"] == 2 * 192
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "aiperf").write_text('#!/usr/bin/env bash\nwhile [ $# -gt 0 ]; do [ "$1" = --artifact-dir ] && mkdir -p "$2"; shift; done\n')
    (fake / "aiperf").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    subprocess.run(["bash", em / "aggregated" / "aiperf-sweep.sh"], cwd=tmp_path, env=env, check=True, timeout=60)
    side = json.load(open(tmp_path / "artifacts" / "llama-3.1-8b-aggregated-fp8-192xp5en.48xlarge" / "c192" / "servesim_run.json"))
    assert side["concurrency"] == 192 and side["topology"]["replicas"] == 1536
