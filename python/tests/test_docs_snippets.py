"""docs/python.md's host-memory NumPy reading snippet, run as written against a host channel:
every frame's view holds its content and both views share the slot."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np

import cudaipc
from conftest import REPO, consumers_joined


def numpy_snippet() -> str:
    text = open(os.path.join(REPO, "docs", "python.md"), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    found = [b for b in blocks if "frame.numpy()" in b and "np.from_dlpack(frame)" in b]
    assert len(found) == 1, "docs/python.md has no (or more than one) NumPy reading snippet"
    return found[0]


def test_numpy_reading_snippet(path):
    frames, shape = 5, (48, 64, 4)
    code = f"path = {path!r}\n" + numpy_snippet()
    with cudaipc.Producer(path, memory="host", num_slots=4, block_timeout=10,
                          caps="video/x-raw,format=RGBA,width=64,height=48,framerate=30/1") as p:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            consumers_joined(p, proc, what="the snippet")
            for seq in range(1, frames + 1):
                assert p.publish(np.full(shape, seq, np.uint8))
            p.end_of_stream()
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    # One line a frame: seq, the view's shape, its first byte (the frame's fill), shared memory.
    assert out.splitlines() == [f"{seq} {shape} {seq} True" for seq in range(1, frames + 1)], err


def test_pygobject_application_is_the_example():
    """docs/python.md's PyGObject application is examples/python/appsink_detections.py's code (its
    docstring aside), which python/tests/test_gst_detections.py runs: the two cannot drift."""
    text = open(os.path.join(REPO, "docs", "python.md"), encoding="utf-8").read()
    found = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
             if "cudaipc.gst_detections(buf)" in b]
    assert len(found) == 1, "docs/python.md has no (or more than one) PyGObject application"
    example = open(os.path.join(REPO, "examples", "python", "appsink_detections.py"),
                   encoding="utf-8").read()
    assert found[0] == example[example.index("import sys\n"):]
