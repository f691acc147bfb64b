"""cudaipc.Server without GStreamer: a requester in this process plays the filters' part (a
request channel each, a reply reader each). Paths and add(), pipelines' counters, batch() taking
turns with each pipeline's order kept, replies back to their own pipeline, timeouts, interrupt(),
the reply channels' permissions, the arguments refused, and what is not a filter's channel (a
regular file, a directory, a cudaipcsink's channel) refused with the path and the cause."""

from __future__ import annotations

import logging
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import cudaipc
from conftest import REPO, closed_while_waiting, threads_at_once


def requester(path: str) -> cudaipc.Producer:
    return cudaipc.Producer(path, memory="host", num_slots=16, role="requests")


def served(p: cudaipc.Producer) -> None:
    p.wait_for_consumers(1, timeout=10)


def test_batches_take_turns_and_replies_reach_their_own_pipeline(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with requester(a) as ra, requester(b) as rb, cudaipc.Server(a) as server:
        assert server.add(b) == 2
        served(ra)
        served(rb)
        replies = {p: cudaipc.Consumer(p + ".reply", timeout=10) for p in (a, b)}
        for i in range(1, 7):
            ra.publish(np.full(4, i, np.uint8))
        for i in range(1, 3):
            rb.publish(np.full(4, 100 + i, np.uint8))
        deadline = time.monotonic() + 5
        while sum(p["queued"] for p in server.pipelines) < 8 and time.monotonic() < deadline:
            time.sleep(0.005)
        first = server.batch(4)
        got = [(r.pipeline, int(r.numpy()[0])) for r in first]
        # Turns: b's two requests beside a's, each pipeline in its own order.
        assert got == [(1, 1), (2, 101), (1, 2), (2, 102)] or \
            got == [(2, 101), (1, 1), (2, 102), (1, 2)], got
        rest = server.batch(8, timeout=1)
        assert [int(r.numpy()[0]) for r in rest] == [3, 4, 5, 6]
        for r in first + rest:
            assert r.path == (a if r.pipeline == 1 else b)
            assert r.reply(meta={"value": int(r.numpy()[0])})
        for path, want in ((a, [1, 2, 3, 4, 5, 6]), (b, [101, 102])):
            seen = []
            for _ in want:
                with replies[path].next(5) as f:
                    seen.append(f.meta["value"])
            assert seen == want, path
        info = {p["path"]: p for p in server.pipelines}
        assert info[a]["requests"] == 6 and info[a]["replies"] == 6
        assert info[b]["replies"] == 2 and info[b]["replies_lost"] == 0
        assert info[a]["connected"] and info[b]["connected"]
        for c in replies.values():
            c.close()


def test_nothing_comes_and_interrupt_wakes(tmp_path):
    with cudaipc.Server(str(tmp_path / "a")) as server:
        t0 = time.monotonic()
        assert server.next(0.05) is None
        assert server.batch(4, timeout=0.05) == []
        assert time.monotonic() - t0 < 2
        threading.Timer(0.1, server.interrupt).start()
        with pytest.raises(cudaipc.InterruptedError):
            server.batch(4, timeout=10)


def test_the_server_is_its_own_iterator_until_interrupted_or_closed(tmp_path):
    a = str(tmp_path / "a")
    with requester(a) as ra, cudaipc.Server(a) as server:
        served(ra)
        assert iter(server) is server
        replies = cudaipc.Consumer(a + ".reply", timeout=10)
        for i in range(1, 4):
            ra.publish(np.full(4, i, np.uint8))
        r = next(server)  # the builtin: the next request, waiting for ever
        assert r.numpy().tolist() == [1] * 4 and r.reply(meta={"value": 1})
        seen = []
        threading.Timer(0.3, server.interrupt).start()
        for r in server:  # the rest, then a wait that interrupt() ends without an exception
            seen.append(int(r.numpy()[0]))
            assert r.reply(meta={"value": seen[-1]})
        assert seen == [2, 3]
        assert [replies.next(5).meta["value"] for _ in range(3)] == [1, 2, 3]
        replies.close()
        ra.publish(np.full(4, 9, np.uint8))
        threading.Timer(0.3, server.close).start()
        got = [int(r.numpy()[0]) for r in server]  # closing ends the loop too
        assert got == [9]
        assert list(server) == []  # closed: nothing, at once


def test_next_waits_in_slices_hears_ctrl_c_and_refuses_bad_timeouts(tmp_path):
    a = str(tmp_path / "a")
    with requester(a) as ra, cudaipc.Server(a) as server:
        served(ra)
        for bad in (-1, -0.5, float("nan")):
            with pytest.raises(cudaipc.InvalidArgumentError):
                server.next(bad)
        with pytest.raises(TypeError):
            server.next("soon")
        with pytest.raises(TypeError):
            server.next(1, 2)
        assert server.next(timeout=0) is None
        # A request that comes after several of next()'s slices (0.1 s each) is the one returned.
        threading.Timer(0.25, lambda: ra.publish(np.full(4, 7, np.uint8))).start()
        t0 = time.monotonic()
        r = server.next(timeout=5)
        assert 0.2 < time.monotonic() - t0 < 4
        assert int(r.numpy()[0]) == 7 and r.reply()
        # Ctrl-C reaches a next() that waits for ever, within a slice. (Python's own handler: a
        # process started in the background inherits SIGINT ignored.)
        handler = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                server.next()
            assert time.monotonic() - t0 < 2
        finally:
            signal.signal(signal.SIGINT, handler)
        threading.Timer(0.1, server.interrupt).start()
        with pytest.raises(cudaipc.InterruptedError):
            server.next()


def test_a_pipeline_that_leaves_leaves_no_slot_views_behind(tmp_path):
    """req.torch() views its slots; once the pipeline has gone the server keeps none of them (its
    description of the pipeline's frames goes with it), while the server lives on."""
    import gc

    torch = pytest.importorskip("torch")
    native = cudaipc._lib.native
    a = str(tmp_path / "a")
    before = native.dlpack_views_alive()
    with cudaipc.Server(a) as server:
        with requester(a) as ra:
            served(ra)
            for i in range(1, 4):
                ra.publish(np.full(4, i, np.uint8))
                r = server.next(5)
                assert torch.equal(r.torch(), torch.full((4,), i, dtype=torch.uint8))
                assert r.reply()
            assert native.dlpack_views_alive() > before
            del r
        deadline = time.monotonic() + 10
        while server._shared and time.monotonic() < deadline:
            server.next(0.05)  # the pipeline's departure is heard here
        assert not server._shared
        gc.collect()
        assert native.dlpack_views_alive() == before


def test_threads_taking_requests_at_once_each_get_their_own(tmp_path):
    """A model's threads may each call batch()/next() on one server: every request goes to one of
    them, once, with its own frame (they shared the buffer the requests were read into)."""
    a, n, seen = str(tmp_path / "a"), 1500, []
    lock = threading.Lock()
    with cudaipc.Producer(a, memory="host", num_slots=32, role="requests") as ra, \
            cudaipc.Server(a, queue_depth=32) as server:
        served(ra)

        def take(stop, size):
            while not stop.is_set():
                got = server.batch(size, timeout=0.05) if size > 1 else [server.next(0.05)]
                for r in got:
                    if r is None:
                        continue
                    v = r.numpy()
                    with lock:
                        seen.append(int(v[0]) | int(v[1]) << 8)
                    assert r.reply()

        def feed():
            for i in range(n):
                ra.publish(np.array([i & 0xff, i >> 8, 0, 0], np.uint8))

        errors = threads_at_once(take, [(8,), (8,), (1,), (1,)], feed, lambda: len(seen) >= n)
    assert not errors, errors[:3]
    assert sorted(seen) == list(range(n))


def test_threads_replying_at_once_each_send_their_own_results(tmp_path):
    """Results the Python path encodes (tensors=) go through one writer per server: threads that
    reply at once take turns, so every reply carries its own frame's results."""
    a, n, inflight = str(tmp_path / "a"), 600, 8
    errors, bad = [], []
    with requester(a) as ra, cudaipc.Server(a, queue_depth=32) as server:
        served(ra)
        replies = cudaipc.Consumer(a + ".reply", timeout=10)
        stop = threading.Event()

        def answer():
            try:
                while not stop.is_set():
                    for r in server.batch(2, timeout=0.05):
                        v = int(r.numpy()[0]) | int(r.numpy()[1]) << 8
                        assert r.reply(tensors={"t": np.full(4096, v, np.int32)})
            except Exception as e:  # noqa: BLE001 - said by the test below
                errors.append(repr(e))

        threads = [threading.Thread(target=answer) for _ in range(3)]
        for t in threads:
            t.start()
        read = 0
        for i in range(n + inflight):
            if i < n:
                ra.publish(np.array([i & 0xff, i >> 8, 0, 0], np.uint8), pts=i)
            if i >= inflight or i >= n:
                with replies.next(10) as f:  # the filter's window: a few requests out at once
                    if not (np.asarray(f.tensors["t"]) == f.pts).all():
                        bad.append(f.pts)
                    read += 1
        stop.set()
        for t in threads:
            t.join(10)
        replies.close()
    assert not errors, errors[:3]
    assert read == n and not bad, bad[:5]


def test_close_from_another_thread_ends_a_waiting_next(tmp_path):
    """close() while another thread waits in next(): that call ends with ClosedError, close()
    returns at once, and the server's handle is never freed under a call still in it."""
    server = cudaipc.Server(str(tmp_path / "a"))
    t0 = time.monotonic()
    got = closed_while_waiting(server.next, server.close, settle=0.2)
    assert time.monotonic() - t0 < 3
    assert isinstance(got, cudaipc.ClosedError), got
    with pytest.raises(cudaipc.ClosedError):
        server.next(0)


def test_a_request_is_answered_once(tmp_path):
    a = str(tmp_path / "a")
    with requester(a) as ra, cudaipc.Server(a) as server:
        served(ra)
        ra.publish(np.zeros(4, np.uint8))
        r = server.next(5)
        assert r.reply()
        with pytest.raises(cudaipc.ClosedError):
            r.reply()


def test_reply_channels_take_the_mode_and_group_given(tmp_path):
    a = str(tmp_path / "a")
    with cudaipc.Server(a, socket_mode=0o660, allowed_gid=os.getgid()):
        assert stat.S_IMODE(os.stat(a + ".reply").st_mode) == 0o660
    with cudaipc.Server(a):
        assert stat.S_IMODE(os.stat(a + ".reply").st_mode) == 0o600


@pytest.mark.parametrize("kw, why", [
    ({}, "socket path or a directory"),
    ({"paths": [""]}, "non-empty"),
    ({"paths": "x", "reply_slots": 0}, "reply_slots"),
    ({"paths": "x", "queue_depth": 65}, "queue_depth"),
    ({"paths": "x", "socket_mode": 0o4777}, "socket_mode"),
    ({"paths": "x", "allowed_gid": -5}, "allowed_gid"),
    ({"directory": ""}, "directory"),
])
def test_arguments_refused_say_why(tmp_path, kw, why):
    if kw.get("paths") == "x":
        kw = dict(kw, paths=str(tmp_path / "x"))
    with pytest.raises(cudaipc.InvalidArgumentError, match=why):
        cudaipc.Server(**kw)


def test_a_second_server_on_a_path_is_busy(tmp_path):
    a = str(tmp_path / "a")
    with cudaipc.Server(a):
        with pytest.raises(cudaipc.BusyError):
            cudaipc.Server(a)


def test_reply_batch_answers_each_request_with_its_own_host_results(tmp_path):
    """reply_batch with host arrays (the path that is not the GPU's): one dict per request, then
    one batched dict split by counts; every reply's boxes and labels checked, every request
    released."""
    a = str(tmp_path / "a")
    with requester(a) as ra, cudaipc.Server(a) as server:
        served(ra)
        replies = cudaipc.Consumer(a + ".reply", timeout=10)
        for i in range(6):
            ra.publish(np.full(4, i, np.uint8))
        reqs = []
        deadline = time.monotonic() + 5
        while len(reqs) < 6 and time.monotonic() < deadline:
            reqs += server.batch(6 - len(reqs), timeout=1)
        assert [int(r.numpy()[0]) for r in reqs] == list(range(6))
        first, second = reqs[:3], reqs[3:]
        server.reply_batch(first, [{"boxes": np.array([[k, k, k + 10, k + 20]], np.float32),
                                    "labels": np.array([k % 2])} for k in range(3)],
                           label_names=["a", "b"])
        counts = [1, 0, 2]
        boxes = np.arange(12, dtype=np.float32).reshape(3, 4)
        server.reply_batch(second, {"boxes": boxes, "labels": np.array([0, 1, 0])},
                           counts=counts, label_names=["a", "b"])
        assert all(r.frame.released for r in reqs)
        for k in range(3):
            with replies.next(5) as f:
                d = f.detections
                np.testing.assert_array_equal(d["boxes"], [[k, k, k + 10, k + 20]])
                assert d["labels"] == [["a", "b"][k % 2]]
        start = 0
        for c in counts:
            with replies.next(5) as f:
                d = f.detections
                np.testing.assert_array_equal(d["boxes"].reshape(-1, 4), boxes[start:start + c])
                assert d["labels"] == [["a", "b", "a"][j] for j in range(start, start + c)]
            start += c
        with pytest.raises(cudaipc.InvalidArgumentError, match="2 counts for 3 requests"):
            server.reply_batch(first, {"boxes": boxes}, counts=[1, 2])
        replies.close()


def test_a_path_that_is_no_filter_socket_is_refused_naming_it(tmp_path):
    regular = tmp_path / "detector"
    regular.write_text("not a socket")
    with pytest.raises(cudaipc.InvalidArgumentError,
                       match=re.escape(f"'{regular}' is a regular file, not a socket: give the "
                                       "server a cudaipcfilter's socket-path")):
        cudaipc.Server(str(regular))
    assert not os.path.exists(f"{regular}.reply")
    with pytest.raises(cudaipc.InvalidArgumentError,
                       match=re.escape(f"'{tmp_path}' is a directory, not a socket") +
                       ".*serve every filter channel in it with the directory option"):
        cudaipc.Server(str(tmp_path))
    missing = tmp_path / "nowhere"
    with pytest.raises(cudaipc.InvalidArgumentError,
                       match=re.escape(f"the directory '{missing}' of '{missing}/detector' does "
                                       "not exist")):
        cudaipc.Server(str(missing / "detector"))


def test_a_directory_missing_or_a_file_is_refused_naming_it(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(cudaipc.InvalidArgumentError,
                       match=re.escape(f"the directory '{missing}' does not exist: create it")):
        cudaipc.Server(directory=str(missing))
    regular = tmp_path / "file"
    regular.write_text("x")
    with pytest.raises(cudaipc.InvalidArgumentError,
                       match=re.escape(f"'{regular}' is a regular file, not a directory")):
        cudaipc.Server(directory=str(regular))


def test_a_sinks_channel_is_refused_at_once(tmp_path):
    path = str(tmp_path / "cam0")
    with cudaipc.Producer(path, memory="host") as sink:
        with pytest.raises(cudaipc.InvalidArgumentError,
                           match=re.escape(f"'{path}' is a cudaipcsink's channel (or a "
                                           "Producer's), not a cudaipcfilter's: point the server "
                                           "at the filter's socket-path")):
            cudaipc.Server(path)
        assert sink.consumers == 0
    assert not os.path.exists(path + ".reply")


def test_a_sink_taking_the_path_later_is_never_served(tmp_path, caplog):
    """Its frames never become requests, the sink has no reader holding it back, it is said, and
    the filter that comes next on the path is served."""
    caplog.set_level(logging.INFO, logger="cudaipc.server")
    path = str(tmp_path / "cam0")
    with cudaipc.Server(path) as server:
        with cudaipc.Producer(path, memory="host", policy="drop") as sink:
            for i in range(3):
                sink.publish(np.full(4, i, np.uint8))
            said = f"'{path}' is a cudaipcsink's channel"
            deadline = time.monotonic() + 10
            while said not in caplog.text and time.monotonic() < deadline:
                assert server.batch(4, timeout=0.2) == [], "a sink's frame was handed out"
            assert said in caplog.text
            assert server.batch(4, timeout=0.3) == []
            assert sink.consumers == 0
            assert not server.pipelines[0]["connected"]
        with requester(path) as filt:
            served(filt)
            filt.publish(np.full(4, 9, np.uint8))
            r = server.next(5)
            assert r is not None and r.numpy().tolist() == [9, 9, 9, 9]
            assert r.reply()


def test_waiting_for_a_pipeline_is_said(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="cudaipc.server")
    path = str(tmp_path / "detector")
    with cudaipc.Server(path):
        assert f"waiting for a pipeline on {path}" in caplog.text
    caplog.clear()
    with cudaipc.Server(directory=str(tmp_path)):
        assert f"waiting for pipelines in {tmp_path}" in caplog.text
    caplog.clear()
    with requester(path), cudaipc.Server(path) as server:
        assert server.pipelines[0]["connected"]
        assert "waiting" not in caplog.text


def run_serve_detector(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.join(REPO, "examples", "python",
                                                          "serve_detector.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_serve_detector_says_it_waits_for_a_pipeline(tmp_path):
    path = str(tmp_path / "detector")
    proc = run_serve_detector(path)
    try:
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if f"waiting for a pipeline on {path}" in line:
                break
        assert any(f"waiting for a pipeline on {path}" in l for l in seen), "".join(seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out


def test_serve_detector_on_a_regular_file_says_why_and_exits(tmp_path):
    regular = tmp_path / "detector"
    regular.write_text("not a socket")
    proc = run_serve_detector(str(regular))
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, out
    assert f"'{regular}' is a regular file, not a socket" in out
    assert "Traceback" not in out
