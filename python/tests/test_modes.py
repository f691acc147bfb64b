"""every-frame and latest, end of stream, format changes."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import cudaipc
from conftest import closed_while_waiting, pattern, threads_at_once


def test_every_frame_gets_every_frame_in_order(path):
    n = 100
    with cudaipc.Producer(path, memory="host", num_slots=4, block_timeout=10) as p:
        c = cudaipc.Consumer(path, mode="every-frame", timeout=10)
        p.wait_for_consumers()

        def produce():
            for seq in range(1, n + 1):
                assert p.publish(pattern(seq, (32, 3), np.int16))
            p.end_of_stream()

        t = threading.Thread(target=produce)
        t.start()
        seqs = []
        with c:
            for f in c:  # ends at the end of stream
                with f:
                    np.testing.assert_array_equal(f.numpy(), pattern(f.seq, (32, 3), np.int16))
                    seqs.append(f.seq)
        t.join()
    assert seqs == list(range(1, n + 1))


def test_latest_skips_to_the_newest(path):
    with cudaipc.Producer(path, memory="host", num_slots=4, policy="drop") as p, \
            cudaipc.Consumer(path, mode="latest", timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 11):
            p.publish(pattern(seq, (16,), np.float32))
        with c.next() as f:
            assert f.seq == 10
            np.testing.assert_array_equal(f.numpy(), pattern(10, (16,), np.float32))
        p.publish(pattern(11, (16,), np.float32))
        with c.next() as f:
            assert f.seq == 11
            np.testing.assert_array_equal(f.numpy(), pattern(11, (16,), np.float32))


def test_end_of_stream_ends_iteration_and_next_raises(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 4):
            p.publish(pattern(seq, (8,), np.uint8))
        p.end_of_stream()
        assert [f.seq for f in c] == [1, 2, 3]
        # After the end, next() waits for a new stream: the producer publishing again.
        with pytest.raises(cudaipc.TimeoutError):
            c.next(timeout=0.1)
        p.publish(pattern(4, (8,), np.uint8))
        p.end_of_stream()
        assert c.next().seq == 4
        with pytest.raises(cudaipc.EndOfStream, match="ended the stream"):
            c.next()


def test_the_consumer_is_its_own_iterator(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        assert iter(c) is c
        for seq in range(1, 4):
            p.publish(pattern(seq, (8,), np.uint8))
        p.end_of_stream()
        with next(c) as f:  # the builtin: the next frame
            assert f.seq == 1 and np.array_equal(f.numpy(), pattern(1, (8,), np.uint8))
        got = []
        for f in c:  # the rest; the end of stream ends the loop
            with f:
                got.append((f.seq, np.array_equal(f.numpy(), pattern(f.seq, (8,), np.uint8))))
        assert got == [(2, True), (3, True)]
        # next() of the builtin says the end as the loop does: StopIteration, not EndOfStream.
        p.publish(pattern(4, (8,), np.uint8))
        p.end_of_stream()
        assert next(c).seq == 4
        assert next(c, None) is None
        c.timeout = 0.1
        with pytest.raises(cudaipc.TimeoutError):  # a timeout still raises from a loop
            for f in c:
                pass
        # close() from another thread ends a loop that waits, as the end of stream does.
        c.timeout = None
        p.publish(pattern(5, (8,), np.uint8))
        threading.Timer(0.3, c.close).start()
        assert [f.seq for f in c] == [5]
        assert list(c) == []  # closed: nothing, at once
        with pytest.raises(cudaipc.ClosedError):
            c.next()  # next() itself still says so


def test_closing_the_producer_ends_the_stream(path):
    with cudaipc.Producer(path, memory="host") as p:
        c = cudaipc.Consumer(path, timeout=10)
        p.wait_for_consumers()
        p.publish(pattern(1, (8,), np.uint8))
    with c:
        assert [f.seq for f in c] == [1]


def test_format_changes_are_visible(path):
    seen = []
    with cudaipc.Producer(path, memory="host") as p, \
            cudaipc.Consumer(path, timeout=10, on_format=seen.append) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, (4, 4), np.uint8))
        with c.next() as f:
            first_caps = f.caps
            assert c.format.shape == (4, 4) and c.format.dtype == "uint8"
        p.publish(pattern(2, (2, 3, 5), np.float64))
        with c.next() as f:
            assert f.shape == (2, 3, 5) and f.dtype == np.float64
            assert f.caps != first_caps and "types=(string)float64" in f.caps
            assert f.generation == c.format.generation
            np.testing.assert_array_equal(f.numpy(), pattern(2, (2, 3, 5), np.float64))
        assert c.format.shape == (2, 3, 5) and c.format.dtype == "float64"
    assert [(fm.shape, fm.dtype) for fm in seen] == [((4, 4), "uint8"), ((2, 3, 5), "float64")]
    assert seen[0].generation < seen[1].generation


def test_interrupt_wakes_a_blocked_next(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path) as c:
        p.wait_for_consumers()
        threading.Timer(0.2, c.interrupt).start()
        with pytest.raises(cudaipc.InterruptedError):
            c.next(timeout=30)


def test_threads_reading_one_consumer_take_turns(path):
    """The core's consumer is read by one thread at a time; threads of an application that call
    next() on one Consumer at once take turns: every frame reaches exactly one of them, whole."""
    n, seen = 1500, []
    lock = threading.Lock()
    with cudaipc.Producer(path, memory="host", num_slots=16, block_timeout=10) as p:
        c = cudaipc.Consumer(path, mode="every-frame", timeout=10)
        p.wait_for_consumers()

        def read(stop):
            while not stop.is_set():
                try:
                    f = c.next(0.05)
                except cudaipc.TimeoutError:
                    continue
                with f:
                    np.testing.assert_array_equal(f.numpy(), pattern(f.seq, (32, 3), np.int16))
                    with lock:
                        seen.append(f.seq)

        def feed():
            for seq in range(1, n + 1):
                assert p.publish(pattern(seq, (32, 3), np.int16))

        errors = threads_at_once(read, [()] * 3, feed, lambda: len(seen) >= n)
        c.close()
    assert not errors, errors[:3]
    assert sorted(seen) == list(range(1, n + 1))


def test_a_thread_reading_in_a_loop_lets_a_waiting_thread_have_its_turn(path):
    """A thread that gives the reading turn back and calls next() again at once (its loop body
    holding the GIL) queues behind a thread already waiting for the turn, as behind a lock: both
    read, neither is shut out until its timeout."""
    n, got = 200, {0: [], 1: []}
    with cudaipc.Producer(path, memory="host", num_slots=8, block_timeout=10) as p:
        c = cudaipc.Consumer(path, mode="every-frame", timeout=10)
        p.wait_for_consumers()

        def read(stop, who):
            while not stop.is_set():
                try:
                    f = c.next(0.5)
                except cudaipc.TimeoutError:
                    continue
                with f:
                    np.testing.assert_array_equal(f.numpy(), pattern(f.seq, (32, 3), np.int16))
                    got[who].append(f.seq)
                    busy = time.perf_counter() + 0.0002
                    while time.perf_counter() < busy:  # work on the frame, holding the GIL
                        pass

        def feed():  # paced: the reader holding the turn waits for each frame, the GIL let go
            for seq in range(1, n + 1):
                assert p.publish(pattern(seq, (32, 3), np.int16))
                time.sleep(0.0005)

        errors = threads_at_once(read, [(0,), (1,)], feed,
                                 lambda: len(got[0]) + len(got[1]) >= n)
        c.close()
    assert not errors, errors[:3]
    assert sorted(got[0] + got[1]) == list(range(1, n + 1))
    # Taking turns, each reads about half; shut out, one would read nearly none.
    assert min(len(got[0]), len(got[1])) >= n // 10, (len(got[0]), len(got[1]))


def test_close_from_another_thread_ends_a_waiting_next(path):
    """close() while another thread waits in next(): the wait ends with ClosedError, and the
    core's consumer is not taken from under it (it was, now and then: a crash)."""
    for _ in range(20):
        with cudaipc.Producer(path, memory="host", num_slots=4) as p:
            c = cudaipc.Consumer(path, timeout=None)
            p.wait_for_consumers(1, timeout=10)
            got = closed_while_waiting(c.next, c.close)
            assert isinstance(got, cudaipc.ClosedError), got
            with pytest.raises(cudaipc.ClosedError):
                c.next(0)


def test_producer_close_from_another_thread_ends_a_waiting_publish(path):
    """close() while another thread's publish() waits for a slot (a consumer holds the only one it
    may, the other carries a frame not read yet): the wait ends with ClosedError, and the core's producer is not freed under it (it was,
    about once in 60 rounds: a crash). A publish after the close raises ClosedError too, and a
    second close() does nothing."""
    for i in range(20):
        p = cudaipc.Producer(path, memory="host", num_slots=2, block_timeout=10)
        with cudaipc.Consumer(path, timeout=10) as c:
            p.wait_for_consumers(1, timeout=10)
            assert p.publish(pattern(i, (16,), np.uint8))
            held = c.next()
            np.testing.assert_array_equal(held.numpy(), pattern(i, (16,), np.uint8))
            assert p.publish(pattern(i + 1, (16,), np.uint8))  # the other slot, not read yet
            got = closed_while_waiting(lambda: p.publish(pattern(i + 2, (16,), np.uint8)),
                                       p.close)
            assert isinstance(got, cudaipc.ClosedError), got
            assert "closed" in str(got)
            with pytest.raises(cudaipc.ClosedError):
                p.publish(pattern(i + 3, (16,), np.uint8))
            p.close()
            p.interrupt()  # on a closed producer: nothing to wake, no error
            held.release()


def test_producer_close_waits_for_a_frame_written_on_another_thread(path):
    """close() while another thread writes into a borrowed slot (producer.frame()): the slot is
    not freed under the writes; the close waits for the `with` to end, whose commit raises
    ClosedError (the frame is not published after the end of stream), and the consumer reads
    every frame published before, then the end of stream. A close inside one's own `with` aborts
    that frame at once."""
    p = cudaipc.Producer(path, memory="host", num_slots=4, block_timeout=10)
    with cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers(1, timeout=10)
        assert p.publish(pattern(1, (64,), np.uint8))
        inside, closing, outcome = threading.Event(), threading.Event(), []

        def write():
            try:
                with p.frame((64,), "uint8") as f:
                    inside.set()
                    closing.wait(10)
                    time.sleep(0.2)  # the close is waiting now
                    f.numpy()[:] = pattern(2, (64,), np.uint8)  # the slot is still there
            except Exception as e:  # noqa: BLE001 - checked below
                outcome.append(e)

        t = threading.Thread(target=write)
        t.start()
        assert inside.wait(10)
        closing.set()
        t0 = time.monotonic()
        p.close()
        assert time.monotonic() - t0 >= 0.15, "close() did not wait for the frame being written"
        t.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], cudaipc.ClosedError), outcome
        with c.next(10) as f:
            np.testing.assert_array_equal(f.numpy(), pattern(1, (64,), np.uint8))
        with pytest.raises(cudaipc.EndOfStream):
            c.next(10)

    p = cudaipc.Producer(path, memory="host", num_slots=4)
    with pytest.raises(cudaipc.ClosedError):
        with p.frame((8,), "uint8") as f:
            f.numpy()[:] = 1
            p.close()  # this thread's own frame: aborted, the producer freed at once
    assert p.closed


def test_counters_say_what_a_consumer_read(path):
    """Consumer.counters(): frames delivered and passed over since it connected, its producer's
    published count, and no GPU waits or releases on a host channel."""
    with cudaipc.Producer(path, memory="host", num_slots=4) as p:
        every = cudaipc.Consumer(path, timeout=10)
        latest = cudaipc.Consumer(path, mode="latest", timeout=10)
        p.wait_for_consumers(2, timeout=10)
        for i in range(3):
            assert p.publish(pattern(i, (8,), np.uint8))
            with every.next(10) as f:
                np.testing.assert_array_equal(f.numpy(), pattern(i, (8,), np.uint8))
        with latest.next(10) as f:  # the newest; the two before it passed over
            np.testing.assert_array_equal(f.numpy(), pattern(2, (8,), np.uint8))
        assert every.counters() == {"delivered": 3, "skipped": 0, "producer_published": 3,
                                    "producer_dropped": 0, "gpu_waits": 0, "gpu_releases": 0}
        k = latest.counters()
        assert (k["delivered"], k["skipped"], k["producer_published"]) == (1, 2, 3), k
        every.close()
        with pytest.raises(cudaipc.ClosedError):
            every.counters()
        latest.close()


def test_next_refuses_a_timeout_that_is_not_a_duration(path):
    """next()'s fast path is the binding's (C): it refuses what the Python one did, naming it."""
    with cudaipc.Producer(path, memory="host"), cudaipc.Consumer(path, timeout=5) as c:
        for bad in (-1, -0.5, float("nan")):
            with pytest.raises(cudaipc.InvalidArgumentError, match="negative or not a number"):
                c.next(bad)
        with pytest.raises(TypeError):
            c.next("1")
        c.timeout = -2  # the default, read at each call
        with pytest.raises(cudaipc.InvalidArgumentError, match="timeout -2 is negative"):
            c.next()
        c.timeout = 0.05
        t0 = time.monotonic()
        with pytest.raises(cudaipc.TimeoutError, match="within 0.05 s"):
            c.next()
        assert time.monotonic() - t0 < 2


def test_a_thread_kept_from_reading_times_out_saying_why(path):
    """A thread that waits its turn to read past its timeout is told another thread was reading;
    the reading thread's frame still comes, whole."""
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path) as c:
        p.wait_for_consumers()
        got = []
        reader = threading.Thread(target=lambda: got.append(c.next(timeout=10)))
        reader.start()
        time.sleep(0.2)  # the reader waits in the core, holding the turn
        with pytest.raises(cudaipc.TimeoutError, match="another thread was reading"):
            c.next(timeout=0.1)
        p.publish(pattern(7, (5, 4), np.float32))
        reader.join(10)
        with got[0] as f:
            np.testing.assert_array_equal(f.numpy(), pattern(7, (5, 4), np.float32))


def test_on_format_may_close_its_consumer(path):
    """A callback of next() that closes the consumer takes the reading turn next() holds (it is
    re-entrant): next() ends with ClosedError instead of a deadlock, and the consumer stays
    closed."""
    with cudaipc.Producer(path, memory="host") as p:
        c = cudaipc.Consumer(path, timeout=10)
        c.on_format = lambda fmt: c.close()
        p.wait_for_consumers()
        p.publish(pattern(1, (3, 3), np.uint8))
        with pytest.raises(cudaipc.ClosedError):
            c.next()
        assert c.closed
        with pytest.raises(cudaipc.ClosedError):
            c.next(0)


def test_a_signal_ends_a_wait_for_the_reading_turn(path):
    """Ctrl-C (here SIGALRM's handler raising KeyboardInterrupt) reaches a thread waiting for the
    reading turn another thread holds; the turn stays usable afterwards."""
    import signal

    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path) as c:
        p.wait_for_consumers()

        def hold():
            with pytest.raises(cudaipc.TimeoutError):
                c.next(timeout=1)

        holder = threading.Thread(target=hold)
        holder.start()
        time.sleep(0.1)  # the holder waits in the core, holding the turn

        def interrupt(*_):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            with pytest.raises(KeyboardInterrupt):
                c.next(timeout=10)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        holder.join(10)
        p.publish(pattern(3, (4, 4), np.uint16))
        with c.next(timeout=10) as f:
            np.testing.assert_array_equal(f.numpy(), pattern(3, (4, 4), np.uint16))
