"""Shared helpers: the `servesim` CLI (SERVESIM_BIN, set by ctest) to compare against."""
import json
import os
import subprocess

import pytest

# The source tree's root, for tests that read its data files; ctest sets it, a bare pytest run finds it
# from this file's place (tests/python/).
os.environ.setdefault("SERVESIM_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


@pytest.fixture(scope="session")
def exe():
    """The servesim executable (absolute path), for tests that run it as a subprocess."""
    e = os.environ.get("SERVESIM_BIN")
    if not e or not os.path.exists(e):
        pytest.skip("SERVESIM_BIN is not set to the servesim executable")
    return os.path.abspath(e)


@pytest.fixture(scope="session")
def cli():
    exe = os.environ.get("SERVESIM_BIN")
    if not exe or not os.path.exists(exe):
        pytest.skip("SERVESIM_BIN is not set to the servesim executable")

    def run(*args):
        out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    return run
