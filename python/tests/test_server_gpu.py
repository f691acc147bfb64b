"""Replies from the GPU (Request.reply with torch CUDA detections): the model's thread queues its
results' copies and goes on; the core sends each reply once the model's stream has run them. A
requester in this process plays the filter's part (its request channel and its reply reader), so
every reply's boxes, labels and scores are checked against the frame they answer. Skipped, with
the reason, without torch or a CUDA GPU."""

from __future__ import annotations

import time

import numpy as np
import pytest

import cudaipc

torch = pytest.importorskip("torch", reason="torch is not installed: GPU replies not tested")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA GPU: GPU replies not tested", allow_module_level=True)


def spin_seconds(cycles: int) -> float:
    """How long torch.cuda._sleep(cycles) keeps this GPU busy."""
    torch.cuda.synchronize()
    t0 = time.monotonic()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    return time.monotonic() - t0


def test_detections_on_the_gpu_are_sent_once_computed_without_waiting(tmp_path):
    path = str(tmp_path / "model")
    cycles = 100_000_000
    spin = spin_seconds(cycles)
    n = 12
    with cudaipc.Producer(path, memory="host", num_slots=8, role="requests") as requests, \
            cudaipc.Server(path) as server:
        deadline = time.monotonic() + 10
        while requests.consumers == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        replies = cudaipc.Consumer(path + ".reply", timeout=10)
        base = torch.tensor([[1.0, 2.0, 10.0, 20.0]], device="cuda")
        scores = torch.tensor([0.25], device="cuda")
        label = torch.tensor([1], device="cuda", dtype=torch.int64)
        took = []
        for i in range(1, n + 1):
            requests.publish(np.full(8, i, np.uint8))
            req = server.next(5)
            assert req is not None and int(req.numpy()[0]) == i
            torch.cuda._sleep(cycles)  # the model's work: its results come after it
            boxes = base * i           # queued behind the spin
            t0 = time.monotonic()
            assert req.reply(detections={"boxes": boxes, "scores": scores * i, "labels": label},
                             label_names=["background", "ball"], meta={"frame": i})
            took.append(time.monotonic() - t0)
            f = replies.next(10)
            with f:
                d = f.detections
                np.testing.assert_array_equal(d["boxes"], np.array([[i, 2 * i, 10 * i, 20 * i]],
                                                                   np.float32))
                assert d["labels"] == ["ball"]
                np.testing.assert_allclose(d["scores"], [0.25 * i], rtol=1e-6)
                assert f.meta == {"frame": i}
        replies.close()
    # reply() queued the copies and returned while the GPU still spun for this frame's results.
    assert sorted(took)[n // 2] < spin / 2, (took, spin)


def test_an_unsynchronised_tensor_from_another_stream_is_ordered_on_it(tmp_path):
    """Results on a stream of the model's own (not torch's current one), passed as `stream=`."""
    path = str(tmp_path / "model")
    with cudaipc.Producer(path, memory="host", num_slots=4, role="requests") as requests, \
            cudaipc.Server(path) as server:
        deadline = time.monotonic() + 10
        while requests.consumers == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        replies = cudaipc.Consumer(path + ".reply", timeout=10)
        side = torch.cuda.Stream()
        for i in range(1, 6):
            requests.publish(np.full(8, i, np.uint8))
            req = server.next(5)
            with torch.cuda.stream(side):
                torch.cuda._sleep(20_000_000)
                boxes = torch.full((3, 4), float(i), device="cuda")
                req.reply(detections={"boxes": boxes}, stream=side)
            f = replies.next(10)
            with f:
                np.testing.assert_array_equal(f.detections["boxes"],
                                              np.full((3, 4), i, np.float32))
        replies.close()
