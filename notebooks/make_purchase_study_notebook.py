"""Writes purchase_study.ipynb (run with /usr/bin/python3; the test suite executes it).

    /usr/bin/python3 notebooks/make_purchase_study_notebook.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_notebooks import code, md, write  # noqa: E402  (the notebooks' shared cell helpers)


cells = [
    md("""
# Which GPUs to buy: Nemotron 3.5 Super VL for an agentic coding and document product

The question, as a buyer asks it: serve **Nemotron 3.5 Super VL** at **40 requests/s at peak**
(diurnal), prompts of about **6,000 tokens**, **30 % of requests with one 1024×1024 image**,
answers of about **600 tokens**, under **p90 TTFT < 1 s and p90 ITL < 60 ms**, on p5en (H200),
p6-b200 (B200), p5 (H100), B300 or GB200. Which GPU, how many, which layout, what $/hour and
$/M output tokens, the charts for a manager, the files to deploy, and how to check after.

Everything below uses the README's workflow: `recommend` open loop at the peak rate, a check of
the winner with an open-loop rate sweep, `emit`, then the checks after deploying. Every figure is
simulated (not measured) and carries its prediction band. Run length: the open-loop rule
(a warm-up of max(100, 10 s × rate) requests, then max(1000, 60 s × rate) measured per copy) is
past the start-up transient and keeps this notebook well under a minute on 2 cores.
"""),
    code("""
import os, time
import pandas as pd
import servesim
from servesim import plot

PLOT_DIR = os.environ.get('SERVESIM_PLOT_DIR', '.')
os.makedirs(PLOT_DIR, exist_ok=True)
pd.set_option('display.width', 200)
pd.set_option('display.max_columns', 20)

TRAFFIC = dict(isl=6000, osl=600, images='1024x1024', image_fraction=0.3)
SLO = dict(ttft_ms=1000, itl_ms=60, statistic='p90')
PEAK_RPS = 40
INSTANCES = ['p5en.48xlarge', 'p6-b200.48xlarge', 'p5.48xlarge', 'b300', 'gb200']
"""),
    md("""
## 1. The model and its checkpoints

`servesim model` says what is simulated. The checkpoint formats decide which precisions are real
options: a precision marked as not published would need a quantisation of our own.
"""),
    code("""
m = servesim.model('nemotron-3.5-super-vl')
print(m['display_name'], '| architecture estimate:', m['estimate'])
print(f"{m['total_params']/1e9:.1f} B parameters, {m['active_params']/1e9:.1f} B active per token")
cat = next(x for x in servesim.models() if x['name'] == 'nemotron-3.5-super-vl')
print('published checkpoint:', cat['checkpoint_precision'], '| other published formats:', cat['checkpoint_precisions'] or 'none')
# NVFP4 / FP8 below are quantisations of that checkpoint (ModelOpt): the plan assumes we make one.
"""),
    md("""
## 2. The answer: open-loop `recommend` at the peak rate

Production traffic arrives at a rate, not from a fixed number of clients, so the deployment is
sized **open loop**: every candidate layout gets the fewest copies that meet both SLOs when
40 requests/s arrive (Poisson) split over them. One row per GPU type. Prefill on one GPU type and
decode on another (`recommend`'s default, `mixed_gpus=False` here to keep the notebook short) adds
pairs; on this question the cheapest pair (B200 prefill + H200 decode, $216/hour) does not beat
the single-type answer.
"""),
    code("""
t0 = time.perf_counter()
rec = servesim.recommend(model='nemotron-3.5-super-vl', gpu=INSTANCES, target_rps=PEAK_RPS, arrival='poisson',
                         mixed_gpus=False, threads=2, **TRAFFIC, **SLO)
print(f'recommend: {time.perf_counter() - t0:.1f} s; {rec["counts"]}')
print(rec['method'])
cols = ['gpu', 'instance', 'label', 'copies', 'gpus', 'nodes', 'usd_per_hour', 'usd_per_million_output_tokens',
        'rate_per_copy', 'ttft_ms', 'itl_ms', 'limited_by']
table = pd.DataFrame(rec['recommendations'])[cols]
table.round(2)
"""),
    code("""
best = rec['recommendations'][0]
band = best['band']
print(f"ANSWER: {best['gpus']} x {best['gpu']} on {best['nodes']} x {best['instance']} as {best['label']} "
      f"({best['copies']} copies), {best['usd_per_hour']:.2f} USD/hour, {best['usd_per_million_output_tokens']:.2f} USD per "
      f"million output tokens at the peak")
print(f"  at {best['rate_per_copy']:.2f} req/s per copy: TTFT p90 {best['ttft_ms']:.0f} ms "
      f"(band {band['ttft_ms']['lo']:.0f}-{band['ttft_ms']['hi']:.0f}), ITL p90 {best['itl_ms']:.1f} ms "
      f"(band {band['itl_ms']['lo']:.1f}-{band['itl_ms']['hi']:.1f}); one copy fewer breaks {best['limited_by']}")
runner_up = next(r for r in rec['recommendations'][1:] if r['gpu'] != best['gpu'] and '+' not in r['gpu'])
print(f"runner-up: {runner_up['gpu']} {runner_up['label']}, {runner_up['nodes']} nodes, {runner_up['usd_per_hour']:.2f} USD/hour")
print(best['what_ran']['calibration'][:200], '...')
# $/M output tokens assumes the peak around the clock; section 4 prices the day.
"""),
    md("""
## 3. Check the winner: an open-loop rate sweep

The same layout offered 20 … 60 requests/s: where do p90 TTFT and ITL cross their SLO lines?
That rate is the deployment's capacity, and its distance from the peak is the headroom. Each
point sends 800 warm-up requests (20 s at the peak, past the ~18 s it takes a 600-token answer to
fill the engines) and measures 4,800. A rate marked **overloaded** is one the deployment falls
behind at (served < offered, its queue grows over the run), whatever its percentiles say: sweep
prints an `OVERLOADED` line for it and the column says 1.
"""),
    code("""
shape = best['deployment']['workers'][0]
sw = servesim.sweep(model='nemotron-3.5-super-vl', gpu=best['gpu'].lower(), gpus=best['gpus'], tp=shape['tp'],
                    precision=best['precision'], isl=6000, osl=600, images='1024x1024', image_fraction=0.3,
                    warmup_requests=800, requests=4800, request_rate=[20, 30, 40, 50, 60], threads=2)
pd.DataFrame({'offered req/s': sw['request_rate'], 'served req/s (later half of the sends)': sw['served_requests_per_s'],
              'TTFT p90 ms': sw['time_to_first_token_ms_p90'], 'ITL p90 ms': sw['inter_token_latency_ms_p90'],
              'in flight at the last send': sw['in_flight_at_last_send'], 'overloaded': sw['overloaded']}).round(1)
"""),
    md("""
## 4. Over a day: the planner

The peak is 40 requests/s, but the day is not. Dynamo's planner scales the winner's replicas to the
load (a diurnal curve from a trough of 20 % at 04:00 to the peak at 16:00), each one's capacity
profiled by simulation with the same traffic (30 % of the prompts with an image). Its peak fleet is
the open-loop answer's GPU count (one question, one answer); its GPU-hours are what a day costs on
demand, and its bounds are what `servesim planner ... --emit DIR` writes into the Dynamo manifest's
Planner service. GPUs come in whole nodes, so the day's cost of owning them is the nodes' price
around the clock.
"""),
    code("""
t0 = time.perf_counter()
one = servesim.scenario(model='nemotron-3.5-super-vl', gpu=best['gpu'].lower(), gpus=shape['tp'], tp=shape['tp'],
                        precision=best['precision'], isl=6000, osl=600, images='1024x1024', image_fraction=0.3)
day = servesim.planner(one, load_profile='diurnal', peak_rps=PEAK_RPS, ttft_ms=1000, itl_ms=60, fixed_fleet=False)
role = day['roles'][0]
peak_gpus = max(g for g, t in enumerate(day['seconds_at_gpus']) if t > 0)
inst = next(i for i in servesim.instances() if i['name'] == best['instance'])
nodes = -(-peak_gpus // inst['gpus'])
tokens = day['requests'] * 600
print(f"planner: {time.perf_counter() - t0:.1f} s; one {best['gpu']} worker serves {role['capacity_rps']:.2f} req/s within the SLO")
print(f"fleet {min(iv['replica_held'] for iv in day['timeline'])}..{peak_gpus} GPUs over the day "
      f"(the open-loop answer: {best['gpus']}); SLO met by {100 * day['slo_attainment']:.2f} % of {day['requests']:,} requests")
print(f"{day['gpu_hours']:.1f} GPU-hours, {day['gpu_hours'] * day['usd_per_gpu_hour']:.0f} USD at the on-demand price per GPU-hour; "
      f"{nodes} whole node(s) all day: {nodes * inst['usd_per_hour'] * 24:.0f} USD")
print(f"USD per million output tokens over the day: {nodes * inst['usd_per_hour'] * 24 / (tokens / 1e6):.2f} on owned nodes, "
      f"{day['gpu_hours'] * day['usd_per_gpu_hour'] / (tokens / 1e6):.2f} scaled per GPU-hour "
      f"(at the peak around the clock: {best['usd_per_million_output_tokens']:.2f})")
"""),
    md("""
An agentic product's prompts share a system prompt and tool definitions, which prefix caching could
skip. Not on this model: Nemotron 3.5 Super VL is a Mamba hybrid whose KV block is 8,320 tokens
(an attention page sized to hold a Mamba state page), and a hit is a whole block, so a shared
prefix shorter than that never hits. The search says so rather than printing 0 %:
"""),
    code("""
pc = servesim.recommend(model='nemotron-3.5-super-vl', gpu=[best['instance']], precision=best['precision'], tp=shape['tp'],
                        topology='agg', target_rps=PEAK_RPS, arrival='poisson', prefix_caching=['on'], shared_prefix_tokens=2000,
                        threads=2, **TRAFFIC, **SLO)
r = pc['recommendations'][0]
print(f"prefix caching {'on' if r['prefix_caching'] else 'off'}: hit rate {100 * r['prefix_cache_hit_rate']:.1f} %, "
      f"block {r['prefix_block_tokens']} tokens > the 2,000-token shared prefix; {r['gpus']} GPUs as without it")
"""),
    md("""
## 5. Charts for a manager

The cost of each option (cheapest first; the winner outlined) and the headroom of the winner
(latency against offered load, with the SLO lines and the peak).
"""),
    code("""
fig = plot.cost_figure(rec)
fig.savefig(os.path.join(PLOT_DIR, 'purchase_cost.png'), dpi=100, bbox_inches='tight')
fig2 = plot.load_figure(sw, ttft_ms=1000, itl_ms=60, statistic='p90', peak_rps=PEAK_RPS,
                        title=f"{best['gpus']} x {best['gpu']} ({best['label']}), 30 % of requests with an image")
fig2.savefig(os.path.join(PLOT_DIR, 'purchase_headroom.png'), dpi=100, bbox_inches='tight')
# The same sweep with the median beside the p90 the SLO is on (and any overloaded rate marked).
fig3 = plot.latency_figure(sw, ttft_ms=1000, itl_ms=60, title=f"{best['gpus']} x {best['gpu']}: p50 and p90 against offered load")
fig3.savefig(os.path.join(PLOT_DIR, 'purchase_latency.png'), dpi=100, bbox_inches='tight')
"""),
    md("""
## 6. The files to deploy

`emit` writes the `vllm serve` arguments, the Dynamo manifest, the aiperf check, the NCCL check
and the deployment as chosen (`servesim recommend ... --emit DIR` writes it to `DIR/recommended/`,
the best of each other GPU type beside it, and `DIR/index.json`). The plan was sized open loop, so
`aiperf-sweep.sh` sends at the planned rates (`--request-rate`), and `scenario-all-copies.json` is
the whole fleet at the target for `servesim sweep --scenario`.
"""),
    code("""
import tempfile
out = tempfile.mkdtemp(prefix='deploy-')
files = servesim.emit(best['deployment'], os.path.join(out, 'recommended'))
for f in sorted(files):
    print(os.path.relpath(f, out))
script = open(os.path.join(out, 'recommended', 'aiperf-sweep.sh')).read()
print('aiperf sends at (requests/s):', next(l for l in script.splitlines() if l.startswith('for R in'))[9:-4])
"""),
    md("""
## 7. After deploying: check the prediction

1. **Memory**: vLLM's start-up log (KV cache, maximum concurrency) against `servesim memory`.
2. **One client**: TTFT and ITL of a single request against `simulate --concurrency 1`; far off
   here means the kernels, not the queueing.
3. **Open loop at the peak and around it**: `aiperf-sweep.sh` (the rates above, each with its row
   in `predicted.csv`, `request_rate_on_deployed_copies`); the knee should sit where section 3 put it.
4. Measured points go into `servesim calibrate e2e`, and the plan is re-run with `--calibration`.
"""),
    code("""
mem = servesim.memory(model='nemotron-3.5-super-vl', gpu=best['gpu'].lower(), precision=best['precision'], tp=shape['tp'],
                      context=6000 + 1280 + 600)
print(f"weights {mem['weight_bytes']/2**30:.2f} GiB ({mem['weight_note']}), KV cache {mem['cache_bytes']/2**30:.2f} GiB: "
      f"{mem['num_kv_blocks']} blocks of {mem['block_size']} tokens, {mem['max_concurrent_seqs']} sequences of "
      f"{mem['context_tokens']} tokens; compare with vLLM's start-up log")
one = servesim.simulate(model='nemotron-3.5-super-vl', gpu=best['gpu'].lower(), gpus=1, tp=shape['tp'],
                        precision=best['precision'], isl=6000, osl=600, concurrency=1, requests=20)
s = one['summary']
print(f"one client, text: TTFT {s['time_to_first_token_ms_avg']:.0f} ms, ITL {s['inter_token_latency_ms_avg']:.2f} ms")
"""),
]

if __name__ == "__main__":
    write("purchase_study.ipynb", cells)
