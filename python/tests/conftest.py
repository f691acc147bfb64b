"""Shared helpers: channel paths, frame patterns computed from the frame index, a per-test time
limit (CUDAIPC_TEST_TIMEOUT seconds, default 120) and peers in other processes."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import cudaipc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TIMEOUT = float(os.environ.get("CUDAIPC_TEST_TIMEOUT", "120"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    # A hung test fails with its traceback instead of stalling the suite: SIGALRM raises in the
    # test; if the main thread is stuck in C, faulthandler dumps every thread and exits.
    def expire(signum, frame):
        raise TimeoutError(f"test exceeded CUDAIPC_TEST_TIMEOUT={TIMEOUT:g} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    faulthandler.dump_traceback_later(TIMEOUT + 30, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "ch")


def pattern(seq: int, shape, dtype) -> np.ndarray:
    """Frame `seq`'s content: every element differs from its neighbours and from the same element
    of other frames, exactly representable in every dtype (float16 and bfloat16 included)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    if dtype == np.bool_:
        return ((i + seq) % 3 == 0).reshape(shape)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        v = (i * 7 + seq * 13) % 251 - 125  # small integers: exact in 8-bit mantissas
        return v.astype(np.float64).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    v = (i * 7 + seq * 13) % min(int(info.max), 1 << 20)
    if info.min < 0:
        v = v - min(int(info.max), 1 << 19) // 2
    return v.astype(dtype).reshape(shape)


def next_frame(consumer, timeout=10.0):
    return consumer.next(timeout=timeout)


def run_python(code: str, *args: str, **kw) -> subprocess.Popen:
    """Another Python process running `code` with the same cudaipc."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_until(cond, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def have_ml_dtypes() -> bool:
    try:
        import ml_dtypes  # noqa: F401
        return True
    except ImportError:
        return False


# Reached by name from the test modules.
__all__ = ["pattern", "next_frame", "run_python", "wait_until", "have_ml_dtypes", "REPO", "cudaipc"]
