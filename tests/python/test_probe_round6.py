"""Probe round 6 (docs/safety.md, cases U1-U7): the planner's load-profile CSV, --price, the
strings of a calibration profile, and the scenario an emitted deployment re-runs. Each case ends in
a correct result or one line naming the file or flag, the field and what would be valid."""
import json
import os
import subprocess

SRC = os.environ.get("SERVESIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
PROFILE = os.path.join(SRC, "tests", "sim", "data", "h200-slow-kernels.calibration.json")
PLANNER = ["planner", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", "1", "--tp", "1", "--precision", "fp8",
           "--isl", "500", "--osl", "50", "--ttft-ms", "1000", "--itl-ms", "60", "-q", "--format", "json"]
L8 = ["--model", "llama-3.1-8b", "--gpu", "h200", "--isl", "1000", "--osl", "100", "--precision", "fp8", "--topology", "agg",
      "--tp", "1", "--ttft-ms", "600", "--itl-ms", "50", "--concurrency", "1,2", "--requests", "20"]


def run(exe, *args, timeout=300):
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def one_line_error(out, *words):
    assert out.returncode == 2, (out.returncode, out.stdout[-300:], out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servesim: error: "), out.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def day(exe, path):
    out = run(exe, *PLANNER, "--load-profile", path)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert j["requests"] > 1000   # about 1.5 requests/s over 1,200 s
    return {k: v for k, v in j.items() if k != "input_config"}   # input_config names the file


def test_load_profile_times_and_rates_are_bounded(exe, tmp_path):  # U1, U3
    f = tmp_path / "t.csv"
    f.write_text("time_s,rps\n0,1\n1e300,2\n")   # had crashed (SIGSEGV)
    one_line_error(run(exe, *PLANNER, "--load-profile", f), "t.csv: line 3, time_s", "a year in seconds", "'1e300'")
    f.write_text("time_s,rps\n0,1e308\n600,2\n")   # had blamed --replica-rps
    one_line_error(run(exe, *PLANNER, "--load-profile", f), "t.csv: line 2, rps", "10^7 requests/s")
    f.write_text("time_s,rps\n0,0x10\n600,2\n")   # strtod had read hexadecimal 16
    one_line_error(run(exe, *PLANNER, "--load-profile", f), "line 2, rps", "decimal", "'0x10'")
    f.write_text("time_s,rps,rps\n0,1,2\n600,2,3\n")   # the second column had won silently
    one_line_error(run(exe, *PLANNER, "--load-profile", f), "line 1", "rate column given twice", "column 2", "column 3")


def test_load_profile_csv_as_spreadsheets_write_it(exe, tmp_path):  # U2
    plain = tmp_path / "plain.csv"
    plain.write_text("time_s,rps\n0,1\n600,2\n1200,1\n")
    want = day(exe, plain)
    for name, data in {"bom": b"\xef\xbb\xbftime_s,rps\n0,1\n600,2\n1200,1\n",
                       "quoted": b'"time_s","rps"\n"0","1"\n"600","2"\n"1200","1"\n',
                       "crlf": b"time_s,rps\r\n0,1\r\n600,2\r\n1200,1\r\n",
                       "blanks": b"time_s , rps\n0 , 1\n600, 2\n1200 ,1\n"}.items():
        f = tmp_path / f"{name}.csv"
        f.write_bytes(data)
        assert day(exe, f) == want, name   # the same day, request for request


def test_a_day_too_large_to_simulate_is_refused_first(exe, tmp_path):  # U4
    f = tmp_path / "big.csv"
    f.write_text("time_s,rps\n0,1\n600,9000000\n")   # about 2.7e9 requests: had run out of memory
    one_line_error(run(exe, *PLANNER, "--load-profile", f, timeout=30), "load_profile", "requests, more than 10^7")
    one_line_error(run(exe, *PLANNER, "--load-profile", "diurnal", "--peak-rps", "9e6", "--hours", "0.2", timeout=30),
                   "peak_rps", "more than 10^7")


def test_price_overrides_are_checked(exe):  # U5
    one_line_error(run(exe, "list", "instances", "--price", "p5en.48xlarge=5", "--price", "P5EN.48xlarge=7"),
                   "--price: p5en.48xlarge: given twice; keep one")
    for v in ("1e-300", "1e308", "0.001"):
        one_line_error(run(exe, "list", "instances", "--price", f"p5en.48xlarge={v}"), "from 0.01 to 1000000")
    out = run(exe, "list", "instances", "--price", "p5en.48xlarge=84.8")
    assert out.returncode == 0 and " 84.80" in next(l for l in out.stdout.splitlines() if l.startswith("p5en"))


def test_calibration_profile_strings_are_names(exe, tmp_path):  # U6
    base = json.load(open(PROFILE))
    for where, key, value in (("fitted_on", "model", "llama\ntouch PWNED"), ("fitted_on", "gpu", "h200\x1b[2J"),
                              ("parameters", "unit", "x\x07")):
        doc = json.loads(json.dumps(base))
        (doc[where][0] if where == "parameters" else doc[where])[key] = value
        f = tmp_path / f"{key}.json"
        f.write_text(json.dumps(doc))
        field = "parameters[0].unit" if where == "parameters" else f"fitted_on.{key}"
        one_line_error(run(exe, "simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--gpus", "1", "--tp", "1",
                           "--precision", "fp8", "--isl", "100", "--osl", "10", "--concurrency", "2", "--requests", "4",
                           "--calibration", f), field, "control characters")


def test_emitted_scenario_reruns_the_calibrated_prediction(exe, tmp_path):  # U7
    # The emitted scenario.json dropped --calibration: re-run, it predicted p90 TTFT 38.0 ms where
    # the search (with the profile's 1.3x kernels) had predicted 59.5 ms.
    em = tmp_path / "em"
    out = run(exe, "search", *L8[:-4], "--target-rps", "20", "--arrival", "poisson", "--calibration", PROFILE,
              "--emit", em, "-q")
    assert out.returncode == 0, out.stderr
    dep = json.loads((em / "deployment.json").read_text())
    sc = json.loads((em / "scenario.json").read_text())
    assert sc["calibration"] == dep["calibration"] == os.path.abspath(PROFILE)
    i = dep["predicted"]["copies"].index(dep["copies"])
    sim = json.loads(run(exe, "simulate", "--scenario", em / "scenario.json", "--format", "json", "-q").stdout)
    assert sim["records"]["time_to_first_token"]["p90"] == dep["predicted"]["ttft_p90_ms"][i]
    assert sim["records"]["inter_token_latency"]["p90"] == dep["predicted"]["itl_p90_ms"][i]


def test_a_flag_that_is_not_a_number_says_what_it_takes(exe):  # U8
    # CLI11's own message named the flag and the value but not what would be valid.
    one_line_error(run(exe, "recommend", "--image-fraction", "abc"), "--image-fraction = abc: expects a number",
                   "servesim recommend --help")
    one_line_error(run(exe, "simulate", "--requests", "1.5"), "--requests = 1.5: expects a whole number")
