"""Errors raise the documented exceptions, with messages that name the cause."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import cudaipc
from conftest import pattern


def test_no_producer_without_reconnect(path):
    with pytest.raises(cudaipc.ConnectionError) as e:
        cudaipc.Consumer(path, reconnect=False)
    assert isinstance(e.value, ConnectionError)  # the builtin too
    assert path in str(e.value)


def test_no_producer_with_reconnect_times_out(path):
    with cudaipc.Consumer(path) as c:
        with pytest.raises(cudaipc.TimeoutError, match="no frame from .* within 0.3 s") as e:
            c.next(timeout=0.3)
        assert isinstance(e.value, TimeoutError)


def test_bad_path(tmp_path):
    missing = str(tmp_path / "no" / "such" / "dir" / "ch")
    with pytest.raises(cudaipc.Error) as e:
        cudaipc.Consumer(missing, reconnect=False)
    assert "no" in str(e.value)
    with pytest.raises(cudaipc.InvalidArgumentError, match="non-empty str"):
        cudaipc.Consumer("")
    with pytest.raises(cudaipc.InvalidArgumentError, match="non-empty str"):
        cudaipc.Producer(None, memory="host")  # type: ignore[arg-type]
    regular = tmp_path / "file"
    regular.write_text("not a socket")
    with pytest.raises(cudaipc.Error) as e:
        cudaipc.Consumer(str(regular), reconnect=False)
    assert str(regular) in str(e.value)


def _paths_no_producer_can_serve(tmp_path):
    regular = tmp_path / "file"
    regular.write_text("not a socket")
    directory = tmp_path / "dir"
    directory.mkdir()
    return [(str(regular), "is a regular file, not a socket"),
            (str(directory), "is a directory, not a socket"),
            (str(regular / "ch"), "is not a directory")]


@pytest.mark.parametrize("kwargs", [{}, {"timeout": 1.0}, {"reconnect": False}])
def test_consumer_on_a_path_no_producer_can_serve(tmp_path, kwargs):
    # A regular file or a directory can never become a channel: the consumer says so at once,
    # naming the path, instead of waiting for ever (or timing out, or "Connection refused").
    for where, says in _paths_no_producer_can_serve(tmp_path):
        start = time.monotonic()
        with pytest.raises(cudaipc.InvalidArgumentError) as e:
            c = cudaipc.Consumer(where, **kwargs)
            # What hung before, reached only if the constructor let it pass: bounded, so that a
            # regression fails here (TimeoutError) instead of hanging the suite.
            c.next(timeout=3.0)
        assert time.monotonic() - start < 2.0
        assert where in str(e.value) and says in str(e.value)


def _listen(path, kind, answer=b""):
    """A program other than a cudaipc producer listening on `path`."""
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(path)
    s.listen(8)
    if not answer:
        return s, None  # never accepts: connections wait in its backlog
    stop = threading.Event()
    taken = []

    def serve():
        s.settimeout(0.02)
        while not stop.is_set():
            try:
                c, _ = s.accept()
            except socket.timeout:
                continue
            taken.append(c)
            c.send(answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return s, (stop, t, taken)


def test_consumer_on_a_foreign_listener(tmp_path):
    # Something listens there but does not speak cudaipc (a socket of another type, a listener
    # that never answers, one that answers garbage): a protocol error naming the path, with or
    # without reconnect, not a wait.
    listeners = [("stream", socket.SOCK_STREAM, b"hi", "socket of another type"),
                 ("silent", socket.SOCK_SEQPACKET, b"", "not a cudaipc producer"),
                 ("garbage", socket.SOCK_SEQPACKET, b"HTTP/1.1 400 Bad Request\r\n\r\n",
                  "not a cudaipc endpoint")]
    for name, kind, answer, says in listeners:
        where = str(tmp_path / name)
        s, server = _listen(where, kind, answer)
        try:
            for kwargs in ({}, {"reconnect": False}):
                with pytest.raises(cudaipc.ProtocolError) as e:
                    cudaipc.Consumer(where, timeout=1.0, **kwargs).next()
                assert where in str(e.value) and says in str(e.value), name
        finally:
            if server:
                server[0].set()
                server[1].join()
                for c in server[2]:
                    c.close()
            s.close()


def test_producer_on_a_regular_file(tmp_path):
    regular = tmp_path / "file"
    regular.write_text("precious")
    with pytest.raises(cudaipc.InvalidArgumentError, match="not a socket .*regular file") as e:
        cudaipc.Producer(str(regular), memory="host")
    assert str(regular) in str(e.value)
    assert regular.read_text() == "precious"


def test_bad_options(path):
    with pytest.raises(cudaipc.InvalidArgumentError, match="mode 'every'"):
        cudaipc.Consumer(path, mode="every")
    with pytest.raises(cudaipc.InvalidArgumentError, match="memory 'gpu'"):
        cudaipc.Producer(path, memory="gpu")
    with pytest.raises(cudaipc.InvalidArgumentError, match="policy"):
        cudaipc.Producer(path, memory="host", policy="wait")


def test_wrong_dtype(path):
    with cudaipc.Producer(path, memory="host") as p:
        with pytest.raises(cudaipc.InvalidArgumentError, match="complex64 is not one cudaipc"):
            p.publish(np.zeros(4, dtype=np.complex64))
        with pytest.raises(cudaipc.InvalidArgumentError, match="float32"):
            p.publish(np.zeros(4, dtype=">f4"))
        with pytest.raises(cudaipc.InvalidArgumentError, match="dtype 'float128x'"):
            p.set_format((4,), "float128x")
        with pytest.raises(cudaipc.InvalidArgumentError, match="rank 1 to 8"):
            p.publish(np.zeros((1,) * 9, dtype=np.uint8))


def test_closed_consumer(path):
    with cudaipc.Producer(path, memory="host"):
        c = cudaipc.Consumer(path)
        c.close()
        with pytest.raises(cudaipc.ClosedError, match=f"consumer of {path} is closed"):
            c.next(timeout=1)
        c.close()  # twice is fine


def test_closed_producer(path):
    p = cudaipc.Producer(path, memory="host")
    p.close()
    with pytest.raises(cudaipc.ClosedError, match="is closed"):
        p.publish(np.zeros(3, np.uint8))


def test_released_frame(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, (4,), np.uint8))
        f = c.next()
        assert f.written  # host frames are written before they are published
        f.release()
        f.release()
        with pytest.raises(cudaipc.ClosedError, match="frame 1 was released"):
            f.numpy()
        with pytest.raises(cudaipc.ClosedError):
            f.written
        with pytest.raises(cudaipc.ClosedError):
            f.__dlpack__()
        assert f.shape == (4,)  # the description stays readable


def test_release_after_takes_only_a_cuda_event(path):
    """release(after=...) names what it takes, and releases the frame anyway; a host frame has no
    GPU reads to order, so an event handle is taken and nothing else done."""
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for i, (after, error, match) in enumerate([
                ("stream", TypeError, "after= takes a CUDA event"),
                (object(), TypeError, "not object"),
                (0, ValueError, "no CUDA event yet"),
                (-1, ValueError, "no CUDA event handle"),
                (True, TypeError, "not bool"),
                (0x1000, None, None)]):
            p.publish(pattern(i, (4,), np.uint8))
            f = c.next()
            np.testing.assert_array_equal(f.numpy(), pattern(i, (4,), np.uint8))
            if error is None:
                f.release(after=after)
            else:
                with pytest.raises(error, match=match):
                    f.release(after=after)
            assert f.released, after
        # An event whose handle is read by Python that releases the frame meanwhile: released
        # once, not twice.
        p.publish(pattern(8, (4,), np.uint8))
        f = c.next()

        class Event:
            @property
            def cuda_event(self):
                f.release()
                return 0x1000

        f.release(after=Event())
        assert f.released
        p.publish(pattern(9, (4,), np.uint8))  # the producer still has every slot
        np.testing.assert_array_equal(c.next().numpy(), pattern(9, (4,), np.uint8))


def test_busy_path(path):
    with cudaipc.Producer(path, memory="host"):
        with pytest.raises(cudaipc.BusyError):
            cudaipc.Producer(path, memory="host")


def test_lost_producer_without_reconnect(path):
    p = cudaipc.Producer(path, memory="host")
    c = cudaipc.Consumer(path, reconnect=False, timeout=10)
    p.wait_for_consumers()
    p.close(eos=False)
    with pytest.raises(cudaipc.ConnectionError, match="went away"):
        c.next()
    c.close()


def test_drop_policy(path):
    with cudaipc.Producer(path, memory="host", num_slots=2, policy="drop") as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        results = [p.publish(pattern(i, (4,), np.uint8)) for i in range(1, 6)]
        assert results[:2] == [True, True] and False in results
        with pytest.raises(cudaipc.FrameDropped):
            with p.frame((4,), np.uint8):
                pass
        assert p.counters()[1] >= 1
        assert c.next().seq == 1


def test_block_policy_times_out(path):
    with cudaipc.Producer(path, memory="host", num_slots=2, block_timeout=0.2) as p, \
            cudaipc.Consumer(path, timeout=10):
        p.wait_for_consumers()
        p.publish(pattern(1, (4,), np.uint8))
        p.publish(pattern(2, (4,), np.uint8))
        with pytest.raises(cudaipc.TimeoutError, match="no free slot"):
            p.publish(pattern(3, (4,), np.uint8))


def test_gpu_publish_to_host_channel_needs_cuda(path):
    with cudaipc.Producer(path, memory="host") as p:
        class FakeCuda:  # a CUDA-array-interface object
            __cuda_array_interface__ = {"shape": (4,), "typestr": "|u1", "data": (0, False),
                                        "version": 3}
        with pytest.raises(cudaipc.InvalidArgumentError, match="host-memory channel"):
            p.publish(FakeCuda())


def test_cuda_channel_without_gpu(path):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present: the no-GPU error is not reachable")
    with pytest.raises((cudaipc.NoCudaError, cudaipc.CudaError)) as e:
        cudaipc.Producer(path, memory="cuda")
    assert str(e.value)
    if isinstance(e.value, cudaipc.NoCudaError):
        # What to use instead, as the elements say "Use ipc-mode=host".
        assert 'Use memory="host"' in str(e.value)


def test_default_memory_without_gpu_says_use_host(tmp_path):
    """Producer() defaults to memory="cuda": without a GPU the error names the way out, even for
    a path in a directory that does not exist."""
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present: the no-GPU error is not reachable")
    with pytest.raises(cudaipc.NoCudaError, match='Use memory="host"'):
        cudaipc.Producer(str(tmp_path / "missing" / "ch"))


@pytest.mark.parametrize("caps", ["garbage,,,", "garbage", "video/x-raw,,width=4",
                                  "video/x-raw,width", "", "video/x-raw,format=RGBA,=3",
                                  'video/x-raw,format=RGBA,a="open', "video/x-raw,a={ 1, 2"])
def test_caps_that_are_not_caps_are_refused_at_once(path, caps):
    with pytest.raises(cudaipc.InvalidArgumentError, match="caps"):
        cudaipc.Producer(path, memory="host", caps=caps)
    assert not os.path.exists(path)  # refused before the channel was made


@pytest.mark.parametrize("caps", ["video/x-raw,format=RGBA,width=4,height=2",
                                  "video/x-raw, format=(string)RGBA, width=(int)4, height=(int)2",
                                  'other/tensors,format=static,num_tensors=1,types=uint8,'
                                  'dimensions=4:4:2,tensor_name="a,b"',
                                  # lists, arrays and nested structures hold commas of their own
                                  # (1.28's tensors field: a structure of caps in a list)
                                  'video/x-raw,format=RGBA,width=4,height=2,ids=< 1, 2 >,'
                                  'tensors=(structure)[tg, a=(/uniquelist){ (caps)"t/s\\,\\ '
                                  'x\\=\\(int\\)1", (caps)"t/s\\,\\ y\\=2" };]'])
def test_well_formed_caps_are_taken(path, caps):
    with cudaipc.Producer(path, memory="host", caps=caps) as p:
        p.publish(np.zeros((2, 4, 4), np.uint8))


@pytest.mark.parametrize("device", ["cuda:1", "cuda", " cuda:0 "])
def test_device_is_taken_as_torch_names_it(tmp_path, device):
    # A host channel is read anywhere; `device` names where CUDA channels would be read.
    path = str(tmp_path / "ch")
    with cudaipc.Producer(path, memory="host", device=device) as p, \
            cudaipc.Consumer(path, device=device, timeout=5) as c:
        p.wait_for_consumers(1)
        p.publish(pattern(1, (8,), np.uint8))
        with c.next() as f:
            assert np.array_equal(f.numpy(), pattern(1, (8,), np.uint8))
    with cudaipc.Server(str(tmp_path / "model"), device=device):
        pass


def test_torch_devices_are_taken(tmp_path):
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "ch")
    with cudaipc.Producer(path, memory="host", device=torch.device("cuda", 1)), \
            cudaipc.Consumer(path, device=torch.device("cuda:0"), timeout=5):
        pass
    with pytest.raises(cudaipc.InvalidArgumentError, match="device.*cpu.* is not a CUDA device"):
        cudaipc.Consumer(path, device=torch.device("cpu"))


@pytest.mark.parametrize("device", ["cpu", "cuda:x", "cuda:-1", "gpu0", "", -1, 1.5, True])
def test_a_device_that_names_no_cuda_device_is_refused(tmp_path, device):
    path = str(tmp_path / "ch")
    for make in (lambda: cudaipc.Consumer(path, device=device),
                 lambda: cudaipc.Producer(path, memory="host", device=device),
                 lambda: cudaipc.Server(path, device=device)):
        with pytest.raises(cudaipc.InvalidArgumentError,
                           match=r"device .* (is not|is negative).*'cuda', 'cuda:N' or a "
                                 r"torch.device"):
            make()
    assert os.listdir(tmp_path) == []


def test_num_slots_range_is_the_cores(path):
    """1 and 32 (CUDAIPC_MAX_SLOTS) work, every slot used and the ring wrapped, each frame read
    back whole; beyond them the package names the range the core has."""
    for slots in (1, 32):
        with cudaipc.Producer(path, memory="host", num_slots=slots) as p, \
                cudaipc.Consumer(path, timeout=5) as c:
            p.wait_for_consumers(1)
            for seq in range(1, slots + 3):
                p.publish(pattern(seq, (16,), np.uint16))
                with c.next() as f:
                    assert np.array_equal(f.numpy(), pattern(seq, (16,), np.uint16)), seq
    for slots in (0, 33, 64):
        with pytest.raises(cudaipc.InvalidArgumentError,
                           match=f"num_slots {slots} is not between 1 and 32"):
            cudaipc.Producer(path, memory="host", num_slots=slots)
        assert not os.path.exists(path)


def test_role_is_frames_or_requests(path):
    with pytest.raises(cudaipc.InvalidArgumentError, match="role 'replies' is not"):
        cudaipc.Producer(path, memory="host", role="replies")


def test_gst_detections_without_gstreamer_in_the_process_says_so():
    """The binding looks GStreamer's calls up only in libraries the process has loaded: in one
    without GStreamer (this test's, a fresh interpreter), a buffer-looking object is refused with
    the cause, and nothing is loaded or followed."""
    code = textwrap.dedent("""
        import cudaipc, sys
        class GType: name = "GstBuffer"
        class Buffer: __gtype__ = GType()
        try:
            cudaipc.gst_detections(Buffer())
        except cudaipc.InvalidArgumentError as e:
            print(e)
        print(any("libgstreamer" in line for line in open("/proc/self/maps")))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "GStreamer is not loaded in this process: gst_detections reads buffers of a PyGObject "
        "application (gi.repository.Gst)", "False"], r.stdout
