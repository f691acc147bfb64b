"""Metas across processes: a producer process publishes every record kind (metas_peer.py), values
computed from the frame index, and this process checks every field of every frame; 100
detections a frame; metas larger than the area; malformed areas skipped and counted while the
frames flow; a seeded fuzz through the channel; leases held by tensor views."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

import cudaipc
from cudaipc import metas as M
from conftest import pattern

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import metas_peer  # noqa: E402


def consume(path: str, frames: int, what: str, check) -> dict:
    """Runs metas_peer.py as the producer of `frames` frames and `check`s each one here; the
    consumer's stats."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "metas_peer.py"), path,
                             str(frames), what], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        with cudaipc.Consumer(path, timeout=30) as c:
            seqs = []
            for f in c:
                with f:
                    check(f)
                seqs.append(f.seq)
            stats = c.stats
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert seqs == list(range(1, frames + 1))
    return stats


def packed4(a: np.ndarray) -> np.ndarray:
    flat = a.reshape(-1).view(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return flat[0::2] | (flat[1::2] << 4)


def check_detections(f, want: dict, n: int) -> None:
    d = f.detections
    boxes = want["boxes"]
    np.testing.assert_array_equal(d["boxes"], boxes)
    np.testing.assert_array_equal(d["xywh"], np.concatenate([boxes[:, :2], boxes[:, 2:] -
                                                             boxes[:, :2]], 1))
    assert d["labels"] == [metas_peer.NAMES[v] for v in want["labels"]]
    np.testing.assert_array_equal(d["scores"], want["scores"])
    rot = want.get("rotation")
    np.testing.assert_array_equal(d["rotation"], np.zeros(n) if rot is None else rot)
    assert d["oriented"].tolist() == [rot is not None] * n
    np.testing.assert_array_equal(d["ids"], np.arange(n))
    np.testing.assert_array_equal(d["track_ids"], want["track_ids"])


def check_frame(f) -> None:
    seq = f.seq
    want = metas_peer.publish_kwargs(seq)
    assert f.meta_errors == []
    n = seq % 5 + 1
    check_detections(f, want["detections"], n)
    classes = f.classifications
    assert [c["detection"] for c in classes] == list(range(0, n, 2))
    for c in classes:
        assert c["labels"] == [f"c{seq}", "other"]
        np.testing.assert_array_equal(c["scores"], [0.75, 0.25])
    tracks = f.tracks
    tracked = [i for i in range(n) if i % 2 == 0]
    np.testing.assert_array_equal(tracks["ids"], [i * seq for i in tracked])
    np.testing.assert_array_equal(tracks["detection"], tracked)
    assert not tracks["lost"].any()
    # Tensors: ids, types, dims and bytes.
    got = f.tensors
    assert sorted(got) == sorted(want["tensors"])
    (rec,) = [r for r in f.metas if isinstance(r, M.TensorsRecord)] or [None]
    for j, (tid, w) in enumerate(want["tensors"].items()):
        info = rec.tensors[j]
        assert info.id == tid and info.dims == w.shape and info.order == "row-major"
        a = got[tid]
        assert not a.flags.writeable
        if w.dtype.name in ("int4", "uint4"):
            assert info.dtype == w.dtype.name
            np.testing.assert_array_equal(a, packed4(w))  # packed, low nibble first
        else:
            assert a.dtype == w.dtype and a.shape == w.shape
            assert a.tobytes() == w.tobytes()
    # Custom records and the rest.
    assert f.meta == want["meta"]
    assert f.custom["other-meta"] == {"x": seq, "v": M.GstValue("GstFraction", f"{seq}/1")}
    kinds = [(r.kind, r.name) for r in f.metas]
    assert kinds == [(2, "GstAnalyticsRelationMetaAPI")] + \
        ([(3, "GstTensorMetaAPI")] if want["tensors"] else []) + \
        [(4, "cudaipc-meta"), (5, "GstReferenceTimestampMetaAPI"), (1, "GstFooMetaAPI"),
         (99, "future-kind"), (4, "other-meta")]
    ts = [r for r in f.metas if r.kind == 5][0]
    want_ts = ("timestamp/x-test", seq * 1000, 33 if seq % 2 else None)
    assert (ts.caps, ts.timestamp, ts.duration) == want_ts
    raw = [r for r in f.metas if isinstance(r, M.RawRecord)]
    assert raw[0].data[:len(b"serialized %d" % seq)] == b"serialized %d" % seq
    assert raw[1].data[:seq % 9] == bytes([seq % 256]) * (seq % 9)


def test_every_kind_round_trips_across_processes(path):
    frames = 40  # 0..16 tensors, twice over; every third frame written in place

    def check(f) -> None:
        check_frame(f)
        np.testing.assert_array_equal(f.numpy(), pattern(f.seq, (8, 6), np.uint8))

    stats = consume(path, frames, "all", check)
    # Each frame: analytics, (tensors), 2 custom, timestamp, serialized, one unknown kind.
    with_tensors = sum(1 for s in range(1, frames + 1) if s % 17)
    assert stats == {"metas-received": 6 * frames + with_tensors, "metas-unknown": frames,
                     "metas-bad": 0}


def test_hundred_detections_a_frame(path):
    def check(f) -> None:
        check_detections(f, metas_peer.detections(f.seq, 100), 100)
        assert len(f.tracks["ids"]) == 50

    assert consume(path, 30, "detections", check)["metas-bad"] == 0


def test_metas_larger_than_the_area(path):
    det = metas_peer.detections(1, 100)
    with cudaipc.Producer(path, memory="host", meta_size=2048) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        assert p.meta_size == 2048
        with pytest.raises(cudaipc.InvalidArgumentError) as e:
            p.publish(np.zeros(4, np.uint8), detections=det)
        assert re.search(r"need \d+ bytes, more than .* 2048 bytes per slot", str(e.value))
        with pytest.raises(cudaipc.InvalidArgumentError, match="2048 bytes"):
            with p.frame((4,), np.uint8, detections=det) as slot:
                slot.numpy()[...] = 1
        with pytest.raises(cudaipc.InvalidArgumentError, match="of 4096 bytes is more than"):
            p.publish(np.zeros(4, np.uint8), metas=bytes(4096))
        # Neither was published; the channel goes on.
        p.publish(np.full(4, 7, np.uint8), meta={"ok": True})
        with c.next() as f:
            assert f.seq == 1 and f.meta == {"ok": True}
            np.testing.assert_array_equal(f.numpy(), 7)


def test_no_meta_area(path):
    with cudaipc.Producer(path, memory="host", meta_size=0) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        with pytest.raises(cudaipc.InvalidArgumentError, match="no meta area"):
            p.publish(np.zeros(4, np.uint8), meta={"a": 1})
        with pytest.raises(cudaipc.InvalidArgumentError, match="no meta area"):
            with p.frame((4,), np.uint8, meta={"a": 1}):
                pass
        p.publish(np.zeros(4, np.uint8))
        with c.next() as f:
            assert f.metas == [] and f.detections["boxes"].shape == (0, 4)
            assert f.tensors == {} and f.meta == {} and f.classifications == []


def test_malformed_areas_skipped_and_counted(path):
    good = M.encode(meta={"k": 1})
    bad_record = struct.pack("<IHH", 16, 4, 1) + b"n" + bytes(7)  # custom body of 0 bytes
    mixed = bytearray(good + bad_record + good[16:])
    struct.pack_into("<HI", mixed, 6, 3, len(mixed))
    areas = [bytes(mixed), b"garbage!" * 4, good, b"", bytes(16)]
    with cudaipc.Producer(path, memory="host", num_slots=len(areas) + 1) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for a in areas:
            p.publish(np.zeros(4, np.uint8), metas=a)
        with c.next() as f:
            assert [r.fields for r in f.metas] == [{"k": 1}, {"k": 1}]
            assert len(f.meta_errors) == 1 and "shorter than its 8-byte header" in \
                f.meta_errors[0]
            assert bytes(f.metas_area) == bytes(mixed)
        with c.next() as f:
            assert f.metas == [] and "magic" in f.meta_errors[0]
            assert f.detections["labels"] == []
        with c.next() as f:
            assert f.meta == {"k": 1}
        with c.next() as f:  # no metas at all
            assert f.metas == [] and f.meta_errors == [] and len(f.metas_area) == 0
        with c.next() as f:  # 16 zero bytes: a bad magic
            assert f.metas == [] and len(f.meta_errors) == 1
        assert c.stats == {"metas-received": 3, "metas-unknown": 0, "metas-bad": 3}


def test_fuzz_through_the_channel(path):
    sys.path.insert(0, HERE)
    import test_metas
    base = test_metas.fuzz_base()
    rng = np.random.default_rng(11)
    with cudaipc.Producer(path, memory="host", num_slots=3) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for _ in range(300):
            a = bytearray(base)
            for _ in range(int(rng.integers(1, 4))):
                at = int(rng.integers(0, len(a) - 4)) & ~3
                struct.pack_into("<I", a, at, int(rng.integers(0, 1 << 32)))
            p.publish(np.zeros(4, np.uint8), metas=bytes(a))
            with c.next() as f:
                f.metas, f.detections, f.classifications, f.tracks, f.tensors, f.custom
                for r in f.metas:
                    if isinstance(r, M.AnalyticsRecord):
                        r.mtds
        s = c.stats
        assert s["metas-bad"] > 0 and s["metas-received"] > 0


def test_tensor_views_keep_the_lease(path):
    with cudaipc.Producer(path, memory="host", num_slots=3) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        p.publish(np.zeros(4, np.uint8), tensors={"t": np.arange(5, dtype=np.int32)})
        f = c.next()
        t = f.tensors["t"]
        f.release()
        assert c.held == 1  # the view holds the slot
        np.testing.assert_array_equal(t, np.arange(5))
        with pytest.raises(cudaipc.ClosedError):
            f.tensors
        del t
        assert c.held == 0


def test_set_metas_in_place_and_forwarding(path, tmp_path):
    out = str(tmp_path / "out")
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c, \
            cudaipc.Producer(out, memory="host") as p2, \
            cudaipc.Consumer(out, timeout=10) as c2:
        p.wait_for_consumers()
        p2.wait_for_consumers()
        with p.frame((2, 2), np.uint8, meta={"a": 1}) as slot:
            slot.numpy()[...] = 3
            slot.set_metas(detections=np.array([[0, 0, 2, 2]]), tensors={"x": np.ones(2)})
        with c.next() as f:
            assert f.meta == {"a": 1}
            assert f.detections["boxes"].tolist() == [[0, 0, 2, 2]]
            np.testing.assert_array_equal(f.tensors["x"], [1, 1])
            p2.publish(f.numpy(), metas=f.metas)  # forwarded as they came
            area = bytes(f.metas_area)
        with c2.next() as g:
            assert bytes(g.metas_area) == area
            assert g.meta == {"a": 1} and g.detections["labels"] == [""]
        with pytest.raises(TypeError, match="unknown meta keyword"):
            with p.frame((2, 2), np.uint8) as slot:
                slot.set_metas(detection=[])


def test_cuda_detections_one_copy(path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    det = {"boxes": torch.tensor([[1.0, 2.0, 11.0, 22.0]], device="cuda"),
           "labels": torch.tensor([2], device="cuda"),
           "scores": torch.tensor([0.5], device="cuda")}
    got = M.decode(M.encode(detections=det, label_names=metas_peer.NAMES,
                            tensors={"t": torch.arange(3, device="cuda")})).records
    assert got[0].mtds[0][2:] == (1, 2, 10, 20, 0.0, 0.5, False, "dog")
    np.testing.assert_array_equal(got[1].arrays["t"], [0, 1, 2])
