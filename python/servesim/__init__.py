"""servesim: simulate LLM serving clusters and plan GPU capacity against latency SLOs.

Every function returns plain Python data (dicts, lists, floats) — the same data the CLI prints
with ``--format json``. Keyword arguments mirror the CLI's flags with underscores
(``--kv-cache-dtype`` -> ``kv_cache_dtype``). Bad input raises :class:`servesim.Error`.

    import servesim
    servesim.memory("nemotron-3-super", "h200", precision="fp8", tp=2)
    servesim.op_time("gemm", "h200", m=4096, n=4096, k=4096)
    res = servesim.sweep(servesim.scenario(isl=2000, osl=500), concurrency=[1, 8, 64])
    servesim.frame(res)            # pandas.DataFrame, one row per point
"""
from __future__ import annotations

import json as _json

from . import _servesim as _c
from ._servesim import Error, __version__  # noqa: F401

__all__ = ["Error", "gpus", "instances", "models", "model", "memory", "min_gpus", "op_time", "op_kinds", "step",
           "default_scenario", "scenario", "simulate", "sweep", "what_if", "plan", "validate", "search", "recommend", "nccl", "emit",
           "frame", "frontier_frame"]

op_kinds = list(_c.op_kinds)


def gpus():
    """The GPU catalogue (``servesim list gpus``): a list of dicts, datasheet figures in SI units."""
    return _c.gpus()


def instances():
    """The instance catalogue (``servesim list instances``): GPUs per node, EFA, $/hour."""
    return _c.instances()


def models():
    """The model catalogue (``servesim list models``): names and parameter counts."""
    return _c.models()


def _path(p, what="path"):
    """A file path as an absolute string (os.PathLike accepted), None unchanged; anything else is
    one servesim.Error naming `what`."""
    import os
    if p is None:
        return None
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise Error(f"{what}: expected a file name (str or os.PathLike), got {type(p).__name__} {p!r}"[:300])
    return os.path.abspath(os.fsdecode(os.fspath(p)))


def model(name=None, model_file=None):
    """One model's architecture (layer pattern, widths, experts, vision encoder) and parameter counts:
    a catalogue ``name`` or a ``model_file`` (servesim model JSON or Hugging Face config.json, read
    without adding it to the catalogue)."""
    if (name is None) == (model_file is None):
        raise Error("model(): give name or model_file (one of them)")
    return _c.model(name) if model_file is None else _c.model_file(str(model_file))


def _tp(tp):
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise Error(f"tp: must be a whole number >= 1, got {tp!r}")
    return tp


def memory(model=None, gpu=None, precision=None, tp=None, pp=1, context=None, model_file=None, **engine):
    """Per-GPU memory plan of one replica (``servesim memory``): ``model`` or ``model_file``.
    ``engine`` takes ep, kv_cache_dtype, gpu_memory_utilization, max_num_seqs, max_num_batched_tokens,
    block_size, num_speculative_tokens. ``kv_cache`` holds vLLM's block pool: block_size, num_blocks,
    blocks_per_seq and max_concurrent_seqs at ``context`` (with the bound that binds). ``gpu``,
    ``precision`` and ``tp`` left out are resolved as every subcommand resolves them (H200, the
    checkpoint's precision, the smallest TP x PP that serves the model); ``defaults`` lists what was
    chosen."""
    return _c.memory(dict(model=model, model_file=_path(model_file), gpu=gpu, precision=precision, tp=_tp(tp), pp=pp,
                          context=context, **engine))


def min_gpus(model=None, precisions=None, policy="headroom", gpus=None, concurrency=64, context=None,
             model_file=None):
    """The minimum-GPU table (``servesim min-gpus``): one dict per (gpu, precision) with ``min_gpus``;
    ``precisions`` None = the checkpoint's and nvfp4."""
    if precisions is None:
        precisions = []
    if isinstance(precisions, str):
        precisions = [precisions]
    if isinstance(gpus, str):
        gpus = [gpus]
    return _c.min_gpus(dict(model=model, model_file=_path(model_file), precisions=list(precisions), policy=policy, gpus=list(gpus or []),
                            concurrency=concurrency, context=context))


def op_time(op, /, gpu="h200", **shape):
    """Predicted GPU time of one kernel or collective (``servesim op OP``): a dict with ``seconds``,
    ``source`` (measured / interpolated / transferred / roofline), ``bound``, ``flops``, ``bytes``,
    ``cold_weights_seconds`` (the part of ``seconds`` that reads weights or KV a kernel table timed
    resident in L2: hwmodels/README.md, Cold weights).
    ``op`` is one of ``servesim.op_kinds``; ``shape`` the CLI flags, e.g. m=, n=, k=, dtype= for gemm;
    op=, gpus=, bytes=, nodes=, instance= for a collective."""
    return _c.op_time(op, dict(gpu=gpu, **shape))


def step(model=None, gpu=None, tp=None, precision=None, batch=1, context=1024, model_file=None, **kw):
    """One decode step and one prefill step per layer kind (``servesim step``): ``model`` or
    ``model_file``; ``kw``: pp, ep, kv_cache_dtype, chunk, vision_tiles. ``gpu``, ``precision`` and
    ``tp`` left out are resolved as in memory()."""
    return _c.step(dict(model=model, model_file=_path(model_file), gpu=gpu, tp=_tp(tp), precision=precision, batch=batch,
                        context=context, **kw))


def default_scenario():
    """The embedded default scenario (sim/data/default_scenario.json) as a dict."""
    return _c.default_scenario()


_TOP = {"model": "model", "model_file": "model_file", "gpu": "gpu", "gpus": "gpus", "tp": "tensor_parallel_size", "pp": "pipeline_parallel_size",
        "ep": "expert_parallel_size", "dp": "data_parallel_size", "data_parallel_size": "data_parallel_size",
        "tensor_parallel_size": "tensor_parallel_size",
        "pipeline_parallel_size": "pipeline_parallel_size", "expert_parallel_size": "expert_parallel_size",
        "precision": "precision", "kv_cache_dtype": "kv_cache_dtype", "router": "router", "seed": "seed",
        "calibration": "calibration", "engine_profile": "engine_profile"}
_ENGINE = ["max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "block_size", "enable_prefix_caching",
           "enable_chunked_prefill", "long_prefill_token_threshold", "max_model_len", "enforce_eager", "step_overhead_ms",
           "closed_loop_osl_spread_tokens", "closed_loop_osl_spread_load_exponent", "closed_loop_osl_spread_length_exponent"]
_WORKLOAD = ["isl", "osl", "isl_stddev", "osl_stddev", "concurrency", "request_rate", "arrival", "burstiness",
             "requests", "warmup_requests", "dataset_entries", "dataset_sampling", "images", "image_fraction"]


def _as_dict(s):
    if s is None:
        return default_scenario()
    try:
        if isinstance(s, str):
            return _c.parse_json(s)  # servesim's parser: depth-limited, duplicate keys refused
        if not isinstance(s, dict):
            raise Error(f"scenario: expected a dict or JSON text, got {type(s).__name__}")
        return _json.loads(_json.dumps(s))  # a deep copy that is plain JSON data
    except RecursionError:
        raise Error("scenario: nested too deeply") from None
    except (TypeError, ValueError) as e:
        if isinstance(e, Error):
            raise
        raise Error(f"scenario: {e}") from None


def scenario(base=None, **flags):
    """A scenario dict in the file layout: ``base`` (dict, JSON text, or None for the embedded default)
    with the CLI's ``simulate`` flags applied: model, gpu, gpus, tp, pp, ep, dp, precision, kv_cache_dtype,
    router, seed, engine_profile (the CLI's --engine), calibration (a profile file from :func:`calibrate_e2e`, or its dict; without
    engine_profile, on the embedded default, the run takes the build it was fitted on); the vLLM engine knobs by name; isl, osl, isl_stddev, osl_stddev, concurrency,
    request_rate, arrival, burstiness, requests, warmup_requests; images ("1024x1024[:N],...") and image_fraction
    (the share of requests carrying them); dataset_entries and dataset_sampling (aiperf's
    prompt dataset: repeats of an entry hit the prefix cache, see workloads/README.md)."""
    s = _as_dict(base)
    known = sorted(set(_TOP) | set(_ENGINE) | set(_WORKLOAD))
    for k in flags:
        if k not in known:
            raise Error(f"scenario(): {k}: unknown argument; known: {', '.join(known)}")
    f = {k: v for k, v in flags.items() if v is not None}
    short = {"tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "expert_parallel_size": "ep",
             "data_parallel_size": "dp"}
    if "model" in f and "model_file" in f:
        raise Error("scenario(): model_file: give model or model_file, not both")
    if "model_file" in f:
        s.pop("model", None)
        f["model_file"] = _path(f["model_file"])
    if "model" in f:
        s.pop("model_file", None)
    if "calibration" in f and not isinstance(f["calibration"], dict):
        f["calibration"] = _path(f["calibration"], "calibration")   # a profile file (calibrate_e2e's output), or the profile as a dict
    for k, key in _TOP.items():
        if k in f:
            s.pop(short.get(key, key), None)  # the file may use the short alias
            s[key] = f[k]
    eng = s.setdefault("engine", {})
    for k in _ENGINE:
        if k in f:
            eng[k] = f[k]
    w = s.setdefault("workload", {})
    for key, sd in (("isl", "isl_stddev"), ("osl", "osl_stddev")):
        if sd in f and key not in f:
            raise Error(f"scenario(): {sd}: needs {key} for the mean")
        if key in f:
            w[key] = {"kind": "normal", "mean": f[key], "stddev": f[sd]} if f.get(sd) else f[key]
    if "concurrency" in f and "request_rate" in f:
        raise Error("scenario(): concurrency: give concurrency or request_rate, not both")
    if "concurrency" in f:
        for k in ("request_rate", "fixed_schedule", "schedule_file", "arrival", "burstiness"):
            w.pop(k, None)
        w["concurrency"] = f["concurrency"]
    if "request_rate" in f:
        for k in ("concurrency", "fixed_schedule", "schedule_file"):
            w.pop(k, None)
        w["request_rate"] = f["request_rate"]
    for k in ("arrival", "burstiness", "requests", "warmup_requests"):
        if k in f:
            w[k] = f[k]
    if "images" in f:   # "1024x1024[:N],..." or [(w, h[, n]), ...], as the CLI's --images
        ims = f["images"].split(",") if isinstance(f["images"], str) else list(f["images"])
        out = []
        for i in ims:
            if isinstance(i, str):
                dims, _, n = i.strip().partition(":")
                wh = dims.lower().split("x")
                if len(wh) != 2:
                    raise Error(f"scenario(): images: {i!r} is not WIDTHxHEIGHT[:COUNT], e.g. 1024x768 or 1024x768:2")
                i = (wh[0], wh[1], n or 1)
            try:
                out.append({"width": int(i[0]), "height": int(i[1]), "count": int(i[2]) if len(i) > 2 else 1})
            except (TypeError, ValueError, IndexError):
                raise Error(f"scenario(): images: {i!r} is not (width, height[, count])") from None
        w.setdefault("multimodal", {})["images"] = out
    if "image_fraction" in f:   # the share of requests that carry the images
        if "images" not in w.get("multimodal", {}):
            raise Error("scenario(): image_fraction: needs images (the images that share of requests carries)")
        w["multimodal"]["fraction"] = f["image_fraction"]
    if "dataset_entries" in f:
        w.setdefault("dataset", {})["entries"] = f["dataset_entries"]
    if "dataset_sampling" in f:
        if "entries" not in w.get("dataset", {}):
            raise Error("scenario(): dataset_sampling: needs dataset_entries (without a dataset every prompt is distinct)")
        w["dataset"]["sampling"] = f["dataset_sampling"]
    if base is None and f and str(s.get("description", "")).startswith("Default servesim"):
        # The embedded scenario's description names its own model and layout; once flags override
        # them, the run's record (input_config) describes what runs, as the CLI's does.
        load = (f"{w['request_rate']} requests/s open loop" if "request_rate" in w
                else f"{w.get('concurrency', '?')} closed-loop clients")
        def mean(x):
            return x.get("mean", "?") if isinstance(x, dict) else x
        s["description"] = (f"Default servesim scenario with arguments applied: {s.get('model', '?')} on {s.get('gpus', '?')} x "
                            f"{s.get('gpu', '?')}, {load}, ISL {mean(w.get('isl', '?'))}, OSL {mean(w.get('osl', '?'))}")
    return s


_build_scenario = scenario


def simulate(scenario=None, **flags):
    """Simulates one scenario (``servesim simulate --format json``): the aiperf
    profile_export_aiperf.json layout (``records``: metric tag -> unit and statistics) plus
    ``summary`` (the run as one sweep row, per-replica statistics). ``scenario`` is a dict or JSON
    text in the scenario file layout (None: the embedded default); ``flags`` override it as in
    :func:`scenario`. The GIL is released while simulating."""
    s = _build_scenario(scenario, **flags) if flags or scenario is None else scenario
    return _c.simulate(s)


def _axis(concurrency, request_rate):
    if (concurrency is None) == (request_rate is None):
        raise Error("sweep(): concurrency: give concurrency=[...] or request_rate=[...] (one of them)")
    axis, values = ("concurrency", concurrency) if concurrency is not None else ("request_rate", request_rate)
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]   # "1,2,4" as on the command line
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [values]
    # A list of numbers (or one, or "1,2,4"); bytes, a dict or a bool are not (bytes had read as
    # their byte values: b'x' ran at concurrency 120).
    if isinstance(values, (bytes, bytearray, dict, bool)) or not hasattr(values, "__iter__"):
        raise Error(f"sweep(): {axis}: expected a number, a list of numbers or a comma-separated string, "
                    f"got {type(values).__name__}")
    out = []
    for v in values:
        try:
            if isinstance(v, bool):
                raise TypeError
            out.append(float(v))
        except (TypeError, ValueError, OverflowError):
            raise Error(f"sweep(): {axis}: expected numbers, got {v!r}") from None
        x = out[-1]
        if axis == "concurrency" and not (1 <= x <= 1e6 and x == int(x)):
            raise Error(f"sweep(): concurrency: expected whole numbers of clients in 1..1000000, got {v!r}")
        if axis == "request_rate" and not (0 < x < float("inf")):
            raise Error(f"sweep(): request_rate: expected finite request rates above 0 (requests/s), got {v!r}")
    return axis, out


def _sweep_point(scenario_text, axis, value):
    """One sweep point, run where it is scheduled (a Dask worker imports servesim for it)."""
    from . import _servesim
    return _servesim.sweep(scenario_text, axis, [value], 1)


def _join_columns(parts):
    out = {}
    for p in parts:
        for k, v in p.items():
            out.setdefault(k, []).extend(v)
    return out


def _check_threads(fn, threads):
    """Every call's ``threads``: None or 0 for all cores, else a whole number of worker threads."""
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 0):
        raise Error(f"{fn}(): threads: expected a whole number >= 0 (0: all cores), got {threads!r}")


def sweep(scenario=None, concurrency=None, request_rate=None, threads=None, client=None, **flags):
    """Runs the scenario over a list of concurrencies or request rates (``servesim sweep --format
    json``): a dict of columns, one value per point, in the order given. ``threads``: local worker
    threads (default all cores); ``client``: a ``dask.distributed.Client`` to fan the points out
    over its workers instead. Results do not depend on either."""
    s = _build_scenario(scenario, **flags) if flags or scenario is None else _as_dict(scenario)
    axis, values = _axis(concurrency, request_rate)
    _check_threads("sweep", threads)
    if values and isinstance(s.get("workload"), dict):
        # The base's own load (the default's 32 clients) is checked against its requests before each
        # point replaces it; put the first swept value there, as the CLI's sweep does.
        s["workload"].pop("request_rate" if axis == "concurrency" else "concurrency", None)
        s["workload"][axis] = values[0] if axis == "request_rate" else int(values[0])
    if client is None:
        return _c.sweep(s, axis, values, int(threads or 0))
    # Each point is a one-point sweep of the same scenario in a worker process: the same code
    # and the same per-point seed as the local run, so the columns are identical.
    text = _json.dumps(s)
    futures = client.map(_sweep_point, [text] * len(values), [axis] * len(values), values, pure=False)
    return _join_columns(client.gather(futures))


def what_if(scenario=None, variants=(), concurrency=None, request_rate=None, threads=None, client=None, **flags):
    """The what-if (``servesim sweep --vs``): the base scenario (``scenario`` with ``flags`` applied, as
    :func:`sweep` builds it) and each variant, a dict of :func:`scenario` flags applied on top of the
    base (``{"precision": "nvfp4", "gpus": 4, "tp": 4}``), swept over the same list. ``variants`` is a
    list (labelled A, B, ...) or a dict {label: flags}. Returns ``{"labels", "variants", "axis",
    "values", "columns"}``: every scenario's sweep columns one after the other under a ``scenario``
    column (and ``topology``, the label with its flags, so :func:`plot.save_charts` draws a curve
    each), and on every row its change against the base at the same point, in %:
    ``change_ttft_p50_pct``, ``change_itl_p50_pct``, ``change_tok_s_per_gpu_pct`` (None on the base's
    rows). :func:`frame` gives it as a DataFrame."""
    base = _build_scenario(scenario, **flags) if flags or scenario is None else _as_dict(scenario)
    items = list(variants.items()) if isinstance(variants, dict) else \
        [(chr(ord("A") + k) if k < 26 else f"v{k + 1}", v) for k, v in enumerate(variants)]
    if not items:
        raise Error("what_if(): variants: give at least one dict of scenario flags, e.g. [{'precision': 'nvfp4'}]")
    runs = [("base", {}, base)]
    for label, v in items:
        if not isinstance(v, dict):
            raise Error(f"what_if(): variants: {label}: expected a dict of scenario flags, got {type(v).__name__}")
        runs.append((str(label), v, _build_scenario(base, **v)))   # every variant built before any runs
    axis, values = _axis(concurrency, request_rate)
    sweeps = [sweep(s, concurrency=concurrency, request_rate=request_rate, threads=threads, client=client)
              for _, _, s in runs]
    names = []
    for c in sweeps:
        names += [n for n in c if n not in names]
    out = {n: [] for n in ["scenario", "topology"] + names + ["change_ttft_p50_pct", "change_itl_p50_pct",
                                                                "change_tok_s_per_gpu_pct"]}

    def change(c, k, i):
        v, b = c.get(k, [None] * (i + 1))[i], sweeps[0].get(k, [None] * (i + 1))[i]
        return None if v is None or not b else 100 * (v / b - 1)

    for (label, v, _), c in zip(runs, sweeps):
        for i in range(len(c[axis])):
            out["scenario"].append(label)
            out["topology"].append(label if not v else f"{label}: " + ", ".join(f"{k}={x}" for k, x in v.items()))
            for n in names:
                out[n].append(c[n][i] if n in c else None)
            first = label == "base"
            out["change_ttft_p50_pct"].append(None if first else change(c, "time_to_first_token_ms_p50", i))
            out["change_itl_p50_pct"].append(None if first else change(c, "inter_token_latency_ms_p50", i))
            out["change_tok_s_per_gpu_pct"].append(None if first else change(c, "output_token_throughput_per_gpu", i))
    return {"labels": [r[0] for r in runs], "variants": {r[0]: r[1] for r in runs[1:]}, "axis": axis,
            "values": list(values), "columns": out}


def _plan_point(args, index):
    from . import _servesim
    return _servesim.plan_point(args, index)


def plan(model=None, instance=None, nodes=None, precision=None, isl=None, osl=None, ttft_ms=None, itl_ms=None,
         target_tps=None, concurrency=None, client=None, **kw):
    """The SLO capacity plan (``servesim plan --format json``): per topology the rightmost swept
    concurrency under both SLO lines, output tok/s per replica, replicas, GPUs, instances, $/hour
    and the limiting side (``topologies``), with the sweep behind it (``sweep['columns']``).
    No model: the reference study. ``kw``: the other ``servesim plan`` flags (topology, tp,
    prefill_workers, decode_workers, requests, seed, statistic, headroom (0.2: copies for the target x 1.2), engine
    (vllm, sglang, trtllm or a release: the engine the topologies run and emit), ...). ``client``: a Dask client
    to run the sweep points on."""
    for k in ("model_file", "calibration"):   # calibration: a profile file from calibrate_e2e
        if k in kw:
            kw[k] = _path(kw[k])
    args = dict(model=model, instance=instance, nodes=nodes, precision=precision, isl=isl, osl=osl, ttft_ms=ttft_ms,
                itl_ms=itl_ms, target_tps=target_tps, concurrency=concurrency, **kw)
    args = {k: v for k, v in args.items() if v is not None}
    _check_threads("plan", args.get("threads"))
    if isinstance(args.get("concurrency"), (list, tuple)):
        # Whole numbers only: 1.7 clients is an error (from the module), not 1.
        args["concurrency"] = [int(c) if isinstance(c, float) and c.is_integer() else c for c in args["concurrency"]]
    if client is None:
        return _c.plan(args)
    n = _c.plan_points(args)  # validates the arguments here, before anything is sent
    rows = client.gather(client.map(_plan_point, [args] * n, list(range(n)), pure=False))
    return _c.plan_finish(args, rows)


def validate(path, backend=None, mode=None, gpu=None, model=None, **kw):
    """servesim against measured serving runs (``servesim validate --format json``): ``path`` is a
    CSV in the silicon-sample layout, an aiperf artefact folder, or a ``vllm bench serve`` JSON /
    SGLang ``bench_serving`` JSONL with a servesim_run.json beside it (as :func:`calibrate_e2e`
    reads them); ``backend``, ``mode``, ``gpu``,
    ``model`` filter (a string or a list). ``kw``: engine_any, scenario (a dict whose engine,
    router, kv_cache_dtype and seed apply to every CSV point), requests_per_client,
    warmup_per_client, statistic ("avg" or "p50"), threads, seed, model_file, harness ("aic": the
    engine flags AIConfigurator's harness generates, the default; "serve": vllm serve's),
    resent_prompts (True, the default: under "aic", a run set whose measured cycles are shorter
    than prefilling its prompts can take runs vllm serve's defaults with aiperf's 100 re-sent
    prompts; False keeps the generated flags),
    osl_spread_pct (a normal spread of each CSV point's output length, % of its OSL, in place of
    the engine profile's closed-loop spread; 0, the default, keeps the harness's fixed OSL, which
    the profile's spread then varies), seeds (run every point at that many seeds from ``seed``: the
    result's ``across_seeds`` gives each group's median |error| per seed), lock_fraction (also run each
    closed-loop point in the clients' train and spread out: each point's ``lock_fraction``), calibration (a
    profile file from :func:`calibrate_e2e`, applied to every point where it transfers), leave_one_out
    ("model" or "release": refit the fitted engine parameters on every other group and predict each group
    out of fit; the result's ``transfer`` gives in-fit and out-of-fit errors per group). Returns a dict:
    ``points`` (one per measured point: measured, predicted, error_pct, or its ``unmodellable``
    reason), ``groups``, ``by_release`` (per engine release the rows name x model x GPU x mode) and
    ``by_gpu`` (median signed, median and p90 absolute % errors), ``counts``,
    ``csv``; :func:`frame` turns it into one DataFrame row per point. The GIL is released while
    the points run."""
    args = dict(path=str(path), backend=backend, mode=mode, gpu=gpu, model=model, **kw)
    if args.get("calibration") is not None:
        args["calibration"] = _path(args["calibration"], "calibration")
    if isinstance(args.get("model_file"), str):
        args["model_file"] = [args["model_file"]]
    _check_threads("validate", args.get("threads"))
    return _c.validate({k: v for k, v in args.items() if v is not None})


def calibrate_e2e(inputs, output=None, **kw):
    """Fits servesim to your own measured serving runs (``servesim calibrate e2e``): ``inputs`` is a
    path or a list of paths (aiperf artefact folders, ``vllm bench serve --save-result`` JSON, SGLang
    bench_serving JSONL, silicon-sample CSV); ``output`` writes the profile (for ``calibration=`` in
    :func:`simulate`, :func:`sweep`, :func:`validate`, or "calibration" in a scenario). ``kw``: model,
    model_file, gpu, tp, precision, engine (the setup of bench results that do not carry it), parameters
    (comma-separated names), folds, train_fraction, shrink (default True; False is ``--no-shrink``), threads, seed, harness. Returns a dict: the fitted
    ``parameters`` (prior, value, sd), ``cross_validation`` (median |error| before / after), ``held_out``
    (with train_fraction), the ``profile`` itself and its ``text``. The GIL is released while it runs."""
    import os
    if not isinstance(inputs, (str, bytes, os.PathLike, list, tuple)):
        raise Error(f"calibrate_e2e(): inputs: expected a path or a list of paths, got {type(inputs).__name__}")
    paths = [inputs] if isinstance(inputs, (str, bytes, os.PathLike)) else list(inputs)
    if not paths:
        raise Error("calibrate_e2e(): inputs: empty list; give measured runs (aiperf folders, bench JSON/JSONL, CSV)")
    args = dict(inputs=[_path(p, "calibrate_e2e(): inputs") for p in paths], output=_path(output, "calibrate_e2e(): output"), **kw)
    if isinstance(args.get("model_file"), (str, os.PathLike)):
        args["model_file"] = [_path(args["model_file"])]
    _check_threads("calibrate_e2e", args.get("threads"))
    return _c.calibrate_e2e({k: v for k, v in args.items() if v is not None})


_WORKER_SEARCHES = {}   # on a Dask worker: the enumerated search of each argument set, built once per process


def _search_chunk(key, args, indices):
    """Simulates a chunk of one round's candidates where it is scheduled (a Dask worker). The worker
    enumerates the search of these arguments once and keeps it (``key`` is their JSON text), so a
    task costs its simulations alone; the GIL is released while each candidate runs."""
    from . import _servesim
    session = _WORKER_SEARCHES.get(key)
    if session is None:
        if len(_WORKER_SEARCHES) >= 4:
            _WORKER_SEARCHES.clear()
        session = _WORKER_SEARCHES[key] = _servesim.SearchSession(args, False)
    return [session.run(i) for i in indices]


def _chunks(todo, n):
    """``todo`` dealt round-robin into at most ``n`` chunks: neighbouring candidates (similar layouts,
    similar cost) land in different chunks, so the chunks of a round take about as long."""
    n = max(1, min(n, len(todo)))
    return [todo[k::n] for k in range(n)]


def _dask_threads(client):
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:  # noqa: BLE001 - an executor without nthreads(): one chunk per candidate
        return 0


def _search_args(kw):
    _check_threads("search", kw.get("threads"))
    args = {k: v for k, v in kw.items() if v is not None}
    if "calibration" in args:   # a profile file from calibrate_e2e, applied where it was fitted
        args["calibration"] = _path(args["calibration"], "calibration")
    for k in ("gpu", "gpus"):
        if isinstance(args.get(k), (list, tuple)):
            args[k] = [str(x) for x in args[k]]
    for k in ("tp", "pp", "dp", "decode_dp", "ep", "concurrency", "max_num_seqs", "max_num_batched_tokens", "precision", "precisions",
              "kv_cache_dtype", "engine"):
        if isinstance(args.get(k), (list, tuple)):
            args[k] = list(args[k])
    if isinstance(args.get("pd_ratios"), (list, tuple)):
        def ratio(r):
            if isinstance(r, str):
                return r
            if isinstance(r, (list, tuple)) and len(r) == 2:
                return f"{r[0]}:{r[1]}"
            raise Error(f"search(): pd_ratios: {r!r} is not a (prefill, decode) pair or 'P:D', e.g. (1, 2) or '1:2'")
        args["pd_ratios"] = [ratio(r) for r in args["pd_ratios"]]
    if isinstance(args.get("images"), (list, tuple)):
        args["images"] = [i if isinstance(i, str) else "x".join(str(v) for v in i[:2]) + (f":{i[2]}" if len(i) > 2 else "")
                          for i in args["images"]]
    return args


def _run_search(args, per_instance, client, threads):
    if client is None:
        return (_c.recommend if per_instance else _c.search)(args)
    # The same rounds as the local run: the pruning between rounds happens here, in the C++
    # session, so the result is identical to the local one. Each round goes out as about eight
    # chunks per worker thread, dealt round-robin (a candidate alone is tens of milliseconds: one
    # task each would cost more in scheduling than in simulating; two chunks per thread left a
    # worker idle at every round's barrier while the other finished its larger chunk), and every
    # worker keeps the enumerated search.
    session = _c.SearchSession(args, per_instance)
    key = _json.dumps(args, sort_keys=True)
    while True:
        todo = session.next_round()
        if not todo:
            break
        nthreads = _dask_threads(client)
        chunks = _chunks(todo, 8 * nthreads if nthreads else len(todo))
        futures = client.map(_search_chunk, [key] * len(chunks), [args] * len(chunks), chunks, pure=False)
        for chunk, rows in zip(chunks, client.gather(futures)):
            for i, r in zip(chunk, rows):
                session.add(i, r)
    rep = session.report()
    if per_instance:
        rep["recommendations"] = _c.recommend_table(rep)
    return rep


def search(model=None, gpu=None, isl=None, osl=None, ttft_ms=None, itl_ms=None, client=None, model_file=None, **kw):
    """The configuration search (``servesim search --format json``): every candidate (GPU,
    precision, TP/PP/EP, aggregated or xPyD disaggregated, engine knobs) with its analytic bounds,
    status (simulated / does_not_fit / cannot_meet_slo / cannot_win) and score under the SLO
    (``configurations``), the Pareto frontier per topology family (``frontiers``), the best
    configuration (``best``, with its ``deployment`` for :func:`emit`) and every simulated point
    (``sweep['columns']``). ``gpu``: a name or a list (GPU or instance types). ``kw``: the other
    flags with underscores — precision, topology, tp, pp, dp, decode_dp, ep, pd_ratios, max_num_seqs,
    max_num_batched_tokens, kv_cache_dtype (``["auto", "fp8"]``), prefix_caching (``["on", "off"]``), shared_prefix_tokens (a system prompt every request starts with), engine (``["vllm", "sglang", "trtllm"]``: rank across engine profiles), images (``"1024x768:2"``), concurrency, requests, seed, statistic,
    total_gpus | target_tps | target_rps, headroom (0.2: size for the target x 1.2), prune, expert_parallel, mixed_gpus, threads, calibration (a profile
    file from :func:`calibrate_e2e`: applied to the candidates on the GPU and engine build it was fitted on).
    ``client``: a Dask client to simulate the candidates on (same result as the local run).
    :func:`frame` turns the result into a DataFrame of configurations; :func:`frontier_frame`
    into one of frontier points."""
    args = _search_args(dict(model=model, model_file=_path(model_file), gpus=gpu, isl=isl, osl=osl, ttft_ms=ttft_ms,
                             itl_ms=itl_ms, **kw))
    return _run_search(args, False, client, kw.get("threads"))


def recommend(model=None, gpu=None, isl=None, osl=None, ttft_ms=None, itl_ms=None, target_tps=None, target_rps=None,
              client=None, model_file=None, **kw):
    """The pre-purchase table (``servesim recommend --format json``): the search with one winner per
    GPU/instance type for the load target; ``recommendations`` lists, cheapest first, GPUs, nodes,
    $/hour, $ per million output tokens, power (datasheet TDP: an upper bound) and joules per output
    token, and the headroom to each SLO. ``headroom=0.2`` sizes every deployment for the target x 1.2
    (spare capacity; $ per million output tokens stays at the target). ``frame(result)`` gives it as a DataFrame."""
    args = _search_args(dict(model=model, model_file=_path(model_file), gpus=gpu, isl=isl, osl=osl, ttft_ms=ttft_ms,
                             itl_ms=itl_ms, target_tps=target_tps, target_rps=target_rps, **kw))
    return _run_search(args, True, client, kw.get("threads"))


def nccl(instance="p5en.48xlarge", nodes=1):
    """The NCCL all-reduce cluster check (``servesim nccl``): the nccl-tests command and the time,
    algbw and busbw servesim expects at each message size (``rows``)."""
    return _c.nccl(instance, nodes)   # checked there: a whole number in 1..1024 (2.7 is no node count)


def emit(deployment, directory):
    """Writes a deployment's artefacts (vllm serve arguments, Dynamo manifest, aiperf sweep, predicted
    curve, NCCL check) into ``directory``; ``deployment`` is ``result['best']['deployment']`` of a
    search, a recommendation's ``deployment``, or a plan topology's. Returns the paths written."""
    if isinstance(deployment, dict) and isinstance(deployment.get("emit"), dict):
        deployment = deployment["emit"]          # a plan topology
    elif isinstance(deployment, dict) and isinstance(deployment.get("deployment"), dict):
        deployment = deployment["deployment"]    # a search winner or a recommendation
    return _c.emit(deployment, directory)   # checked there: a str or path, never str(None) == "None"


def frontier_frame(result):
    """A pandas.DataFrame of a search's Pareto frontiers: one row per frontier point (family, label,
    concurrency, output_tps_per_user, output_tps_per_gpu, meets_slo)."""
    import pandas as pd

    rows = []
    for f in result.get("frontiers", []):
        for p in f["frontier"]:
            rows.append(dict(family=f["family"], **p))
    return pd.DataFrame(rows)


def frame(result):
    """A pandas.DataFrame of a column result: a sweep (dict of columns), a plan's ``sweep``, or a
    plan (its ``topologies``, one row each); a simulate() result gives its one-row summary."""
    import pandas as pd

    if isinstance(result, dict):
        if "points" in result and "groups" in result:   # validate(): one row per point
            rows = [{k: v for k, v in p.items() if k != "scenario"} for p in result["points"]]
            return pd.json_normalize(rows, sep="_")
        if "labels" in result and "columns" in result:   # what_if(): one row per scenario and point
            return pd.DataFrame(result["columns"])
        if "recommendations" in result:   # spare capacity as two columns: spare_pct_lo, spare_pct_hi (None: unbounded)
            rows = []
            for r in result["recommendations"]:
                row = {k: v for k, v in r.items() if k not in ("deployment", "spare_pct")}
                row.update({f"spare_pct_{e}": r["spare_pct"][e] for e in ("lo", "hi")})
                rows.append(row)
            return pd.DataFrame(rows)
        if "configurations" in result and "frontiers" in result:
            rows = []
            for c in result["configurations"]:
                r = {k: v for k, v in c.items() if k not in ("bound", "score")}
                r.update({f"bound_{k}": v for k, v in c["bound"].items() if k != "tps_ub"})
                r.update(c["score"] or {})
                rows.append(r)
            return pd.DataFrame(rows)
        if "topologies" in result:
            return pd.DataFrame(result["topologies"])
        if "columns" in result:
            return pd.DataFrame(result["columns"])
        if "records" in result and "summary" in result:
            return pd.DataFrame([{k: v for k, v in result["summary"].items() if not isinstance(v, (list, dict))}])
        return pd.DataFrame(result)
    if isinstance(result, list):
        return pd.DataFrame(result)
    raise Error(f"frame(): expected a sweep, plan or simulate result, got {type(result).__name__}")


# ---- The Dynamo layer: sessions, the KV router and offload tiers go through simulate()'s scenario
# ("workload": {"sessions": {...}}, "router": {"kind": "kv", ...}, "kv_offload": {...}; docs/dynamo.md);
# the planner over a day has its own call.

def planner(scenario=None, load_profile="diurnal", peak_rps=None, ttft_ms=None, itl_ms=None, **options):
    """``servesim planner --format json``: a load profile ("diurnal" scaled to ``peak_rps``, or a CSV
    path) through aggregated replicas, or a disaggregated topology's prefill and decode workers,
    scaled by Dynamo's planner rules, as one simulation. ``scenario`` (dict or JSON text) gives one
    replica's shape (or the topology) and the request lengths; ``options``: trough_fraction, hours,
    arrivals ("poisson" | "uniform"), rule ("throughput" | "load"), adjustment_interval,
    metric_interval, kv_scale_up, kv_scale_down, queue_scale_up, queue_scale_down, min_workers,
    max_workers, replica_rps, prefill_rps, decode_rps, storage_gbps, startup_extra_s, fixed_fleet,
    reserved_price or reserved_discount (then ``reserved_split``: the cheapest reserved baseline +
    on-demand peaks).
    Returns gpu_hours, fixed_fleet_gpu_hours, slo_attainment, ``roles`` and the per-interval
    ``timeline`` (workers per role: ``<role>_ready``, ``<role>_held``)."""
    s = scenario if scenario is not None else _build_scenario(None)
    args = dict(options, load_profile=load_profile)
    for k, v in (("peak_rps", peak_rps), ("ttft_ms", ttft_ms), ("itl_ms", itl_ms)):
        if v is not None:
            args[k] = v
    return _c.planner(s, args)


def reserved_split(day, reserved_usd_per_gpu_hour=None, reserved_discount=None):
    """The cheapest reserved baseline + on-demand peaks for a planner result's fleet (its
    ``seconds_at_gpus``), at a reserved price per GPU-hour or a discount off the result's on-demand
    ``usd_per_gpu_hour`` (the catalogue has no reserved prices: give yours). Returns ``options``
    (reserved GPUs, reserved $, on-demand GPU-hours and $, total) and ``best``."""
    if (reserved_usd_per_gpu_hour is None) == (reserved_discount is None):
        raise Error("reserved_split(): give reserved_usd_per_gpu_hour or reserved_discount")
    if not isinstance(day, dict) or "seconds_at_gpus" not in day:
        raise Error(f"reserved_split(): day: expected a planner() result (a dict with seconds_at_gpus), got {type(day).__name__}")
    if "usd_per_gpu_hour" not in day:
        raise Error("reserved_split(): the result has no on-demand price (its instance has none in the catalogue)")
    secs = day["seconds_at_gpus"]
    if not isinstance(secs, (list, tuple)) or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in secs):
        raise Error("reserved_split(): seconds_at_gpus: expected a list of seconds (numbers), one per GPU count")
    od = day["usd_per_gpu_hour"]
    if isinstance(od, bool) or not isinstance(od, (int, float)) or not od > 0 or od == float("inf"):
        raise Error(f"reserved_split(): usd_per_gpu_hour: expected a price > 0 per GPU-hour, got {od!r}")
    if reserved_discount is not None and (isinstance(reserved_discount, bool) or not isinstance(reserved_discount, (int, float))
                                          or not 0 <= reserved_discount < 1):
        raise Error(f"reserved_split(): reserved_discount: expected a fraction of the on-demand price in [0, 1), "
                    f"got {reserved_discount!r}")
    rp = reserved_usd_per_gpu_hour if reserved_usd_per_gpu_hour is not None else od * (1 - reserved_discount)
    return _c.reserved_split(day["seconds_at_gpus"], rp, od)


def timeline_frame(result):
    """The planner's per-interval timeline as a pandas.DataFrame (``hour`` added)."""
    import pandas as pd

    df = pd.DataFrame(result["timeline"])
    df["hour"] = df["start_s"] / 3600.0
    return df


__all__ += ["planner", "reserved_split", "timeline_frame"]
