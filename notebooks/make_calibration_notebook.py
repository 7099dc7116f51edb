"""Writes calibrate_to_my_cluster.ipynb (run with /usr/bin/python3; the test suite executes it).

    /usr/bin/python3 notebooks/make_calibration_notebook.py
"""
from make_notebooks import SETUP, code, md, write

cells = [
    md("""
# Calibrate servesim to my cluster, then re-plan

A team has one node and wants to know whether servesim matches *its* setup before buying more.
The loop: measure a few points on that node, `calibrate_e2e` them, and let every later prediction
on that GPU and engine build carry the calibration.

The "measurements" here are fixtures: 15 measured serving points of MiniMax-M2.5 (FP8) on H200
with vLLM 0.16, TP4, from the calibration split servesim is validated on
(`notebooks/data/README.md`). Five of them play the points the team measured on its node; the
other ten are what the calibration must then predict. Uncalibrated, servesim predicts these runs
too fast (vLLM 0.16 on this node is slower than the tables).
"""),
    code(SETUP),
    code("""
import numpy as np
HERE = os.path.abspath('.')
DATA = os.path.join(HERE, 'data', 'minimax-m2.5_h200_vllm-0.16.csv')
if not os.path.exists(DATA):   # executed from the repository root
    DATA = os.path.join(HERE, 'notebooks', 'data', 'minimax-m2.5_h200_vllm-0.16.csv')
points = pd.read_csv(DATA)
# "Measured on my node": one light and one heavier load of each prompt shape (5 points).
mine_ids = ['mm25_h200_v016_1024x1024_c4_tp4', 'mm25_h200_v016_1024x1024_c32_tp4', 'mm25_h200_v016_1024x8192_c16_tp4',
            'mm25_h200_v016_8192x1024_c8_tp4', 'mm25_h200_v016_8192x1024_c32_tp4']
mine, rest = points[points.id.isin(mine_ids)], points[~points.id.isin(mine_ids)]
MINE, REST = os.path.join(PLOT_DIR, 'my_runs.csv'), os.path.join(PLOT_DIR, 'held_out.csv')
mine.to_csv(MINE, index=False)
rest.to_csv(REST, index=False)
mine[['id', 'silicon_ttft_ms', 'silicon_tpot_ms']]
"""),
    md("""
## Calibrate on the five points

Every parameter the points inform, as `servesim calibrate e2e` fits by default: the kernel-family
time factors of this GPU and build against the tables, the engine's host and GPU time per step, the
shortest forward this build runs (its light-load TPOT is well over the priors'), the first-token
floor, the closed loop's spread. Each starts at its prior and moves only as far as five points
justify; nested 5-fold cross-validation measures the calibrated error on points the fit did not see,
and keeps the priors of what does not lower it.
"""),
    code("""
PROFILE = os.path.abspath(os.path.join(PLOT_DIR, 'my-h200.json'))
t0 = time.time()
cal = servesim.calibrate_e2e(MINE, output=PROFILE, folds=5, threads=2)
print(cal['text'])
print(f'{time.time() - t0:.1f} s')
params = pd.DataFrame(cal['parameters'])[['name', 'prior', 'value', 'sd']]
params
"""),
    md("""
## Predict the ten points it did not see, before and after
"""),
    code("""
before_run = servesim.validate(REST, threads=2)
after_run = servesim.validate(REST, threads=2, calibration=PROFILE)
before, after = servesim.frame(before_run), servesim.frame(after_run)
cmp = pd.DataFrame({'id': before['id'],
                    'measured TTFT': before['measured_ttft_ms'], 'TTFT before': before['predicted_ttft_ms'],
                    'TTFT after': after['predicted_ttft_ms'],
                    'measured TPOT': before['measured_tpot_ms'], 'TPOT before': before['predicted_itl_ms'],
                    'TPOT after': after['predicted_itl_ms']})
summary = pd.DataFrame({
    'median |error| before': [before['error_pct_ttft'].abs().median(), before['error_pct_itl'].abs().median()],
    'median |error| after': [after['error_pct_ttft'].abs().median(), after['error_pct_itl'].abs().median()]},
    index=['TTFT %', 'TPOT %'])
assert summary.loc['TPOT %', 'median |error| after'] < summary.loc['TPOT %', 'median |error| before']
summary
"""),
    md("""
Each prediction carries a band, the range 80 % of runs of its kind fall into: uncalibrated, the
shipped one (the spread of models the fit never saw); calibrated, the profile's own, the 80 %
prediction interval of its five cross-validated residuals pooled with the shipped spread (five
residuals alone say little of a spread). How many of the ten held-out points' measured TTFT, TPOT
and tok/s fell inside the band they carry (`validate`'s `band_cover`):
"""),
    code("""
held = pd.DataFrame({'figures': [before_run['band_cover']['checks'], after_run['band_cover']['checks']],
                     'inside their band': [before_run['band_cover']['inside'], after_run['band_cover']['inside']],
                     "of them under the profile's bands": [0, after_run['band_cover']['profile_inside']]},
                    index=['uncalibrated (shipped bands)', "calibrated (the profile's bands)"])
held['share %'] = 100 * held['inside their band'] / held['figures']
assert after_run['band_cover']['profile_checks'] == after_run['band_cover']['checks']   # every held-out point takes the profile's
held
"""),
    code("""
import matplotlib.ticker
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for ax, (m, b, a, name) in zip(axes, [('measured TTFT', 'TTFT before', 'TTFT after', 'TTFT (ms)'),
                                      ('measured TPOT', 'TPOT before', 'TPOT after', 'TPOT (ms)')]):
    lo, hi = cmp[[m, b, a]].min().min() * 0.8, cmp[[m, b, a]].max().max() * 1.2
    ax.plot([lo, hi], [lo, hi], color='grey', lw=1)
    ax.scatter(cmp[m], cmp[b], label='servesim, uncalibrated', marker='o', facecolors='none', edgecolors='tab:red')
    ax.scatter(cmp[m], cmp[a], label='calibrated on 5 other points', marker='o', color='tab:blue')
    ax.set_xscale('log'); ax.set_yscale('log')
    for axis in (ax.xaxis, ax.yaxis):   # plain milliseconds at 1-2-5 steps, not powers of ten
        axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f'{v:g}'))
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel('measured ' + name); ax.set_ylabel('predicted ' + name)
    ax.set_title(name + ': ten held-out points')
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(PLOT_DIR, 'calibration_before_after.png'), dpi=110)
"""),
    md("""
## Re-plan the two-node study with the calibration

The deployment the team would buy: two p5en.48xlarge (16 × H200), four TP4 replicas of the same
build (`vllm-0.16`: the calibration's engine build, which a calibrated scenario takes by default),
1k/1k traffic. The calibrated curve is what the plan now reads, and its band is the profile's own:
the 80 % prediction interval of its cross-validated residuals, pooled with the shipped band's
spread (which weighs as four residuals). Five residuals say little of a spread, so the first
profile's bands are as wide as the shipped ones or wider; they are centred where this node runs,
which is why they held the held-out points above where the shipped ones did not. A second round of
five measurements (ten points in all) narrows them.
"""),
    code("""
TEN = os.path.join(PLOT_DIR, 'my_runs_10.csv')
pd.concat([mine, rest.iloc[::2]]).to_csv(TEN, index=False)   # five more of the held-out runs measured
PROFILE_10 = os.path.abspath(os.path.join(PLOT_DIR, 'my-h200-10.json'))
cal_10 = servesim.calibrate_e2e(TEN, output=PROFILE_10, folds=5, threads=2)

base = servesim.scenario(model='minimax-m2.5', gpu='h200', gpus=16, tp=4, precision='fp8_block', isl=1024, osl=1024,
                         requests=400, seed=1)
base['engine_profile'] = cal['profile']['fitted_on']['engine_profile']   # the same build, calibrated or not
conc = [8, 16, 32, 64, 128]
def width(cols, metric):   # the band's width, % of the prediction
    return 100 * (np.array(cols[metric + '_band_hi']) - np.array(cols[metric + '_band_lo'])) / np.array(cols[metric])
plain = servesim.sweep(base, concurrency=conc)
calibrated = servesim.sweep(dict(base, calibration=PROFILE), concurrency=conc)
calibrated_10 = servesim.sweep(dict(base, calibration=PROFILE_10), concurrency=conc)
plan = pd.DataFrame({'clients': conc,
                     'ITL p50 uncalibrated': plain['inter_token_latency_ms_p50'],
                     'ITL p50 calibrated (5)': calibrated['inter_token_latency_ms_p50'],
                     'ITL p50 calibrated (10)': calibrated_10['inter_token_latency_ms_p50'],
                     'ITL band %: shipped': width(plain, 'inter_token_latency_ms_p50'),
                     '5 points': width(calibrated, 'inter_token_latency_ms_p50'),
                     '10 points': width(calibrated_10, 'inter_token_latency_ms_p50'),
                     'TTFT band %: shipped': width(plain, 'time_to_first_token_ms_p50'),
                     '5 points ': width(calibrated, 'time_to_first_token_ms_p50'),
                     '10 points ': width(calibrated_10, 'time_to_first_token_ms_p50')})
# More measured points, narrower bands of the profile's own.
assert (plan['10 points'] < plan['5 points']).all() and (plan['10 points '] < plan['5 points ']).all()
plan.round(1)
"""),
    code("""
fig, ax = plt.subplots(figsize=(7, 4.2))
for cols, name, color in [(plain, 'uncalibrated (shipped band)', 'tab:red'), (calibrated, 'calibrated on 5 points', 'tab:blue'),
                          (calibrated_10, 'calibrated on 10 points', 'tab:green')]:
    ax.plot(conc, cols['inter_token_latency_ms_p50'], marker='o', color=color, label=name)
    ax.fill_between(conc, cols['inter_token_latency_ms_p50_band_lo'], cols['inter_token_latency_ms_p50_band_hi'], color=color, alpha=0.12)
ax.axhline(50, color='grey', ls='--', lw=1); ax.text(conc[0], 51, 'ITL SLO 50 ms', fontsize=8); ax.set_ylim(top=56)
ax.set_xscale('log', base=2); ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f'{v:g}')); ax.set_xlabel('closed-loop clients (2 x p5en.48xlarge, 4 x TP4)')
ax.set_ylabel('ITL p50 (ms), 80 % band shaded'); ax.set_title('MiniMax-M2.5 FP8, vLLM 0.16: the plan before and after calibrating')
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(PLOT_DIR, 'calibration_replan.png'), dpi=110)
"""),
]

if __name__ == "__main__":
    write("calibrate_to_my_cluster.ipynb", cells)
