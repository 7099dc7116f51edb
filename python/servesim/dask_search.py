"""A configuration search fanned out over a Dask cluster: what ``servesim search|recommend --dask
ADDRESS`` runs. The rounds, the pruning and the report are the C++ search's (servesim.search() with
``client=``); this module only connects to the scheduler and moves the arguments and the report.

    python3 -m servesim.dask_search --scheduler tcp://HOST:8786 --args ARGS.json -o REPORT.json [--recommend]

ARGS.json holds servesim.search()'s arguments (the keys of the bindings' search_args); REPORT.json
receives the report, exactly as the local run would give it. A failure is one line on stderr,
``servesim.dask_search: error: <reason>``, and exit status 1.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys


def _fail(msg):
    print(f"servesim.dask_search: error: {msg}", file=sys.stderr)
    return 1


def _finite(x):
    """NaN and infinities as null, as the C++ report prints them (JSON has no such numbers)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m servesim.dask_search", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scheduler", required=True, help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    ap.add_argument("--args", required=True, help="JSON file of servesim.search() arguments")
    ap.add_argument("-o", "--output", required=True, help="JSON file to write the report to")
    ap.add_argument("--recommend", action="store_true", help="one winner per instance type (servesim recommend)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler (default 10)")
    a = ap.parse_args(argv)
    try:
        with open(a.args, encoding="utf-8") as f:
            args = json.load(f)
    except (OSError, ValueError) as e:
        return _fail(f"{a.args}: {e}")
    try:
        import distributed
    except ImportError as e:
        return _fail(f"dask.distributed is not installed for {sys.executable} ({e}); install python3-distributed "
                     "or run without --dask")
    try:
        import servesim
    except ImportError as e:
        return _fail(f"cannot import servesim ({e})")
    if not a.scheduler.strip():
        return _fail("give the Dask scheduler's address (e.g. tcp://10.0.0.5:8786)")
    import time
    start = time.monotonic()
    try:
        client = distributed.Client(a.scheduler, timeout=a.timeout, set_as_default=False)
    except Exception as e:  # noqa: BLE001 - OSError, TimeoutError, ValueError for a malformed address ...
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        took = time.monotonic() - start
        if "handshake" in reason.lower() and took < 0.8 * a.timeout:
            # The peer answered, then broke the handshake well before the timeout: not a Dask scheduler.
            _fail(f"the server at {a.scheduler} does not speak the Dask protocol (the handshake failed after "
                  f"{took:.2f} s); give the address of a Dask scheduler")
        else:
            _fail(f"cannot reach the Dask scheduler at {a.scheduler} within {a.timeout:g} s ({reason})")
        # A client that never connected can hang for its close timeout at interpreter exit: leave now.
        sys.stderr.flush()
        os._exit(1)
    try:
        if not client.nthreads():
            return _fail(f"the Dask scheduler at {a.scheduler} has no workers")
        report = servesim._run_search(args, a.recommend, client, None)
    except servesim.Error as e:
        return _fail(str(e))
    except Exception as e:  # noqa: BLE001 - a worker that died, lost connection, a worker without servesim ...
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return _fail(f"the search failed on the Dask cluster at {a.scheduler}: {type(e).__name__}: {reason}")
    finally:
        client.close()
    tmp = a.output + ".tmp"
    report = _finite(report)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(report, f, allow_nan=False)
        os.replace(tmp, a.output)
    except OSError as e:
        return _fail(f"{a.output}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
