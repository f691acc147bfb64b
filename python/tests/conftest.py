"""Shared helpers: channel paths, frame patterns computed from the frame index, a per-test time
limit (CUDAIPC_TEST_TIMEOUT seconds, default 120) and peers in other processes."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from typing import Dict, Iterator, List, Optional

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


def threads_at_once(work, args: list, feed, done, timeout: float = 30.0) -> List[str]:
    """work(stop, *a) on a thread for each `a` in `args`, at once, while this thread calls feed()
    and then waits (up to `timeout`) until done() or a thread failed; then stops and joins them.
    The threads' failures, as text."""
    import threading

    stop, errors = threading.Event(), []

    def run(*a):
        try:
            work(stop, *a)
        except Exception as e:  # noqa: BLE001 - returned to the test
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=a) for a in args]
    for t in threads:
        t.start()
    try:
        feed()
        deadline = time.monotonic() + timeout
        while not done() and not errors and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    return errors


def closed_while_waiting(call, close, settle: float = 0.02):
    """call() on another thread, and close() from this one once it waits: what the call returned
    or raised (it must have ended within 5 s of the close)."""
    import threading

    outcome = []

    def run():
        try:
            outcome.append(call())
        except Exception as e:  # noqa: BLE001 - returned to the test
            outcome.append(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(settle)
    close()
    t.join(5)
    assert not t.is_alive(), "the call still waits after close()"
    return outcome[0]


@contextlib.contextmanager
def held_on_timeout(consumer) -> Iterator[None]:
    """A wait that ends in vain names how many frames the consumer still holds: at the producer's
    lease limit (num_slots - 1) a lease never given back stalls it, which reads like a silent
    producer."""
    try:
        yield
    except TimeoutError as e:
        raise TimeoutError(f"{e} [the consumer holds {consumer.held} frame(s)]") from e


def frames_from(consumer, proc: subprocess.Popen, timeout: float = 30.0,
                what: str = "gst-launch-1.0") -> Iterator:
    """The consumer's frames until the end of stream, like iterating it, while `proc` feeds the
    channel: a feeder that exits with an error fails at once, with its stderr, instead of a
    timeout later. `timeout` limits the wait for each frame."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            f = consumer.next(timeout=0.25)
        except cudaipc.EndOfStream:
            return
        except cudaipc.TimeoutError:
            rc = proc.poll()
            if rc is not None and rc != 0:
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"{what} exited with status {rc} before its stream ended: "
                                     f"{err.strip()}") from None
            if time.monotonic() > deadline:
                state = "still running" if rc is None else f"exited with status {rc}"
                raise TimeoutError(f"no frame from {consumer.path} within {timeout} s ({what} "
                                   f"{state}; the consumer holds {consumer.held} frame(s))") \
                    from None
            continue
        yield f
        deadline = time.monotonic() + timeout


def consumers_joined(producer, proc: subprocess.Popen, timeout: float = 30.0,
                     what: str = "gst-launch-1.0") -> None:
    """Waits for `proc` to connect to the producer; if it exits first, fails at once with its
    stderr."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            producer.wait_for_consumers(timeout=0.25)
            return
        except cudaipc.TimeoutError:
            rc = proc.poll()
            if rc is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"{what} exited with status {rc} before connecting: "
                                     f"{err.strip()}") from None
            if time.monotonic() > deadline:
                raise


# A GStreamer runtime carried to a machine without one (python/tests/build-device-bundle.sh):
# used for the pipelines only, never loaded into this process (its libraries are another
# distribution's; torch here needs the machine's own).
GST_BUNDLE = os.environ.get("CUDAIPC_GST_BUNDLE", "")


def gst_tool(name: str) -> Optional[str]:
    """gst-launch-1.0 or gst-inspect-1.0: the bundle's where one is given, else the machine's."""
    if GST_BUNDLE:
        p = os.path.join(GST_BUNDLE, "bin", name)
        return p if os.access(p, os.X_OK) else None
    return shutil.which(name)


def gst_plugin_dir() -> str:
    """Where this checkout's plugin is: CUDAIPC_GST_PLUGIN_DIR, the bundle's, or build/gst."""
    given = os.environ.get("CUDAIPC_GST_PLUGIN_DIR")
    if given:
        return given
    if GST_BUNDLE:
        return os.path.join(GST_BUNDLE, "plugins")
    return os.path.join(REPO, "build", "gst")


def gst_env(tmp_path, plugin_dir: str) -> Dict[str, str]:
    """The environment for gst-launch-1.0 with this checkout's plugin and a private registry (and
    the bundle's libraries and plugins, where one is used)."""
    env = dict(os.environ)
    if GST_BUNDLE:
        b = GST_BUNDLE
        env["PATH"] = os.path.join(b, "bin") + os.pathsep + env.get("PATH", "")
        # A gst-bundle.sh bundle (plugins/, libexec/gst-plugin-scanner), or a GStreamer prefix
        # such as ../shared/gst-1.28's (lib/gstreamer-1.0, its own libraries in lib/deps).
        prefix = not os.path.isdir(os.path.join(b, "plugins"))
        libs = [os.path.join(b, "lib")] + ([os.path.join(b, "lib", "deps")] if prefix else [])
        if env.get("LD_LIBRARY_PATH"):
            libs.append(env["LD_LIBRARY_PATH"])
        if os.path.isdir("/usr/local/nvidia/lib64"):  # the driver, where the loader may not look
            libs.append("/usr/local/nvidia/lib64")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
        env["GST_PLUGIN_SYSTEM_PATH_1_0"] = os.path.join(
            b, *(("lib", "gstreamer-1.0") if prefix else ("plugins",)))
        env["GST_PLUGIN_SCANNER_1_0"] = os.path.join(
            b, "libexec", *(("gstreamer-1.0", "gst-plugin-scanner") if prefix
                            else ("gst-plugin-scanner",)))
    elif os.environ.get("CUDAIPC_GST_SYSTEM_PLUGINS"):
        # The build's set of the machine's plugins (tests/gst/plugin_set.sh): third-party ones
        # the machine has are not scanned.
        env["GST_PLUGIN_SYSTEM_PATH_1_0"] = os.environ["CUDAIPC_GST_SYSTEM_PLUGINS"]
    env["GST_PLUGIN_PATH_1_0"] = plugin_dir
    env["GST_REGISTRY_1_0"] = str(tmp_path / "registry.bin")
    # A GLib critical in a GStreamer process of a test aborts it, so the test fails.
    env["G_DEBUG"] = "fatal-criticals"
    return env


def require_gst_elements(env: Dict[str, str], *names: str) -> None:
    """Skips, naming them, when elements a pipeline needs are not installed (a minimal GStreamer,
    such as the GPU machine's bundle, lacks most of gst-plugins-good and -bad); a missing
    cudaipc element fails instead, since the plugin is this checkout's."""
    inspect = gst_tool("gst-inspect-1.0") if GST_BUNDLE else \
        shutil.which("gst-inspect-1.0", path=env.get("PATH"))
    if inspect is None:
        return  # nothing to ask; a missing element then fails with gst-launch-1.0's message
    missing: List[str] = []
    for name in names:
        # Not --exists: without --atleast-version it also demands the element's plugin be at
        # least GStreamer's own version, which the cudaipc plugin (0.x) is not.
        r = subprocess.run([inspect, name], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            missing.append(name)
    ours = [m for m in missing if m.startswith("cudaipc")]
    assert not ours, (f"{', '.join(ours)} not found by gst-inspect-1.0 with GST_PLUGIN_PATH_1_0="
                      f"{env.get('GST_PLUGIN_PATH_1_0')}: the plugin did not load")
    if missing:
        pytest.skip(f"GStreamer element(s) {', '.join(missing)} not installed "
                    "(gst-inspect-1.0 does not know them)")


def live_exports() -> int:
    """DLPack exports not deleted yet: the library's (frames, slots) and the package's own (sources
    it wraps for publish). A test that frees every tensor it made must find none left."""
    from cudaipc import _lib
    return _lib.native.dlpack_exports_alive() + _lib.native.dlpack_wrapped_alive()


def have_ml_dtypes() -> bool:
    try:
        import ml_dtypes  # noqa: F401
        return True
    except ImportError:
        return False


# Reached by name from the test modules.
__all__ = ["pattern", "next_frame", "run_python", "wait_until", "have_ml_dtypes", "held_on_timeout",
           "live_exports",
           "frames_from", "consumers_joined", "gst_env", "gst_tool", "gst_plugin_dir",
           "require_gst_elements", "REPO", "cudaipc"]
