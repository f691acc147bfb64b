"""`pip install .` puts the `cudaipc` tool in the environment's bin/ beside python: it must start
there (issue #29: it could not find libcudaipc.so.0) and see the channels the package makes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cudaipc

TOOL = os.path.join(os.path.dirname(sys.executable), "cudaipc")


@pytest.fixture
def tool():
    if not os.path.exists(TOOL):
        pytest.skip(f"no {TOOL}: the package was not installed with pip into this environment")
    return TOOL


def test_installed_tool_starts(tool):
    r = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: cudaipc COMMAND")
    assert "error while loading shared libraries" not in r.stderr


def test_installed_tool_lists_a_channel_of_the_package(tool, tmp_path):
    path = str(tmp_path / "cam0")
    with cudaipc.Producer(path, memory="host",
                          caps="video/x-raw,format=RGBA,width=4,height=2") as p:
        for _ in range(3):
            p.publish(np.zeros((2, 4, 4), np.uint8))
        r = subprocess.run([tool, "ls", "--json", str(tmp_path)], capture_output=True, text=True,
                           timeout=30)
    assert r.returncode == 0, r.stderr
    channels = json.loads(r.stdout)["channels"]
    assert [(c["path"], c["state"], c["memory"], c["published"]) for c in channels] == \
        [(path, "live", "host", 3)]
