#!/usr/bin/env python3
"""The documentation, executed: every shell command in README.md and docs/*.md is either run here
as written (host memory, no GPU) and its exit status and output checked, or listed with the reason
it cannot run here (GPU-only, a camera, another host, an hour of building, a system install).

    documented_commands.py SOURCE_ROOT BUILD_DIR            run (meson: suite 'docs')
    documented_commands.py SOURCE_ROOT BUILD_DIR --list     every command and what is done with it
    documented_commands.py SOURCE_ROOT BUILD_DIR --gpu-script
                         the GPU-only commands as a script to run by hand on a GPU machine

A command found in the docs that this file does not know fails the test, and so does an entry
here that the docs no longer contain: the two stay in step. Commands run in a directory that looks
like the checkout (links to its examples/, scripts/, python/ and docs, and build/ -> BUILD_DIR), so
`$PWD/build/gst` means the build under test, with XDG_RUNTIME_DIR a fresh private directory.

They run in the order a reader meets them (README.md top to bottom, then docs/*.md), in the shell a
user has after `scripts/dev.sh demo` and nothing else: no GST_PLUGIN_PATH, no build directory on
PATH. What the docs' own setup lines (`source build/env.sh`) export is carried to every later
command, as in one terminal, so a command that needs a step the docs give only later (or never)
fails here. This runs on whichever GStreamer the build is for: on 1.22 (Debian 12) the lines that
need 1.24+ elements (objectdetectionoverlay) are skipped, naming them, and the rest run in the same
order; on 1.24+ (Ubuntu 24.04, CI's 1.28 build) they run too. Long-running commands (live
pipelines, `cudaipc pub`) run in the background and are ended the way a user ends them (Ctrl-C,
i.e. SIGINT, with `gst-launch-1.0 -e` sending EOS); the checks then look at what each printed and
at the channels through `cudaipc ls --json`. CUDAIPC_DOCS_PATH (directories, colon-separated) goes
at the front of the commands' PATH: scripts/dev.sh test names its virtualenv there, so `python3`
has the package as pip installed it (`pip install .`, which the README names before its first
python3 line; without it the checkout's python/ and the build's library stand in). Exit status:
0 passed (with SKIP lines for what could not run, and why), 1 failed, 77 when nothing could run at
all.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

# -- the commands the docs contain ------------------------------------------------------------

# Fenced blocks marked sh/bash are shell; unmarked blocks are shell when their first line starts
# like a command (docs/benchmarks.md, docs/fuzzing.md), not when they show output or a layout.
COMMAND_START = re.compile(r"^(scripts/|build[-\w]*/|bash |BENCH_|python3? |gst-|cudaipc |meson |"
                           r"ninja |pip |mkdir |source |export |echo |nvidia-)")


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (outside quotes)."""
    quoted = None
    for i, ch in enumerate(line):
        if ch in "\"'" and (quoted is None or quoted == ch):
            quoted = None if quoted else ch
        elif ch == "#" and quoted is None and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def extract(root: str) -> List[Tuple[str, int, str]]:
    """(file, line, command) for every command line of every shell block, continuations joined."""
    out = []
    files = ["README.md"] + sorted(os.path.relpath(p, root)
                                   for p in glob.glob(os.path.join(root, "docs", "*.md")))
    for rel in files:
        lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^\s*```(\w*)\s*$", lines[i])
            if not m:
                i += 1
                continue
            lang, start = m.group(1), i + 1
            j = start
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            block = lines[start:j]
            i = j + 1
            first = next((b.strip() for b in block if b.strip()), "")
            if lang not in ("sh", "bash") and not (lang == "" and COMMAND_START.match(first)):
                continue
            cur, cur_line = "", 0
            for k, raw in enumerate(block):
                text = strip_comment(raw).rstrip()
                if not cur and not text.strip():
                    continue
                if not cur:
                    cur_line = start + k + 1
                if text.endswith("\\"):
                    cur += text[:-1] + " "
                    continue
                cur += text
                if cur.strip():
                    out.append((rel, cur_line, normalise(cur)))
                cur = ""
    return out


# What is done with each command. kind: "run" (a scenario below runs it), "gpu" (needs an NVIDIA
# GPU: listed for a GPU machine), "skip" (cannot run here or in CI, with the reason), "covered"
# (another suite runs exactly this, named in the reason).
Entry = Tuple[str, str, str]  # kind, scenario or reason, file


def E(kind: str, why: str, file: str = "README.md") -> Entry:
    return (kind, why, file)


MPS = "MPS: needs an NVIDIA GPU and its driver's nvidia-cuda-mps-control"
# README, cudaipcfilter on GStreamer 1.22: the application that prints every frame's boxes.
APPSINK_DETECTIONS = ('build/examples/cudaipc-appsink-detections --frames 60 "videotestsrc '
                      'pattern=ball is-live=true ! video/x-raw,format=RGBA,width=640,height=480 ! '
                      'cudaipcfilter socket-path=$XDG_RUNTIME_DIR/cudaipc/detector ipc-mode=host"')
CAMERA_GPU = "a camera (v4l2src) and an NVIDIA GPU with nvcodec (cudaupload)"
TABLE: Dict[str, Entry] = {
    # README: the two commands, and the one line that makes the demo's build usable in a shell
    "scripts/dev.sh demo": E("run", "setup"),
    "source build/env.sh": E("run", "setup"),
    "scripts/dev.sh test": E("covered", "CI runs it (.ci/run); this test is one of its suites"),
    # README: the cudaipc tool
    "cudaipc ls": E("run", "tool"),
    "cudaipc ls --json /run/cams": E("run", "tool"),
    "cudaipc top": E("run", "tool"),
    "cudaipc probe PATH --seconds 5": E("run", "tool"),
    "cudaipc cat PATH --frames 3 --out /tmp/f": E("run", "tool"),
    "cudaipc pub PATH --caps video/x-raw,format=RGBA,width=640,height=480,framerate=30/1 "
    "[--memory cuda]": E("run", "tool"),
    # README: GStreamer elements
    "gst-launch-1.0 -e v4l2src ! videoconvert ! video/x-raw,format=NV12 ! cudaupload ! "
    "cudaipcringsink socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0": E("gpu", CAMERA_GPU),
    "gst-launch-1.0 cudaipcringsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0 mode=every-frame ! "
    "cudadownload ! videoconvert ! autovideosink": E("gpu", CAMERA_GPU),
    "gst-launch-1.0 -e videotestsrc is-live=true ! video/x-raw,format=RGBA,width=640,height=480 "
    "! cudaipcsink ipc-mode=host socket-path=$XDG_RUNTIME_DIR/cudaipc/test0": E("run", "host-pair"),
    "gst-launch-1.0 cudaipcsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/test0 ! videoconvert ! "
    "autovideosink": E("run", "host-pair"),
    # README: metas
    "gst-launch-1.0 -e videotestsrc is-live=true pattern=ball ! video/x-raw,format=RGBA,"
    "width=640,height=480 ! cudaipcsink ipc-mode=host socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0":
        E("run", "metas"),
    "python3 examples/python/detect.py $XDG_RUNTIME_DIR/cudaipc/cam0 "
    "$XDG_RUNTIME_DIR/cudaipc/detections": E("run", "metas"),
    "gst-launch-1.0 cudaipcsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/detections ! videoconvert ! "
    "objectdetectionoverlay ! videoconvert ! autovideosink": E("run", "metas"),
    # README: cudaipcfilter
    "python3 examples/python/serve_detector.py $XDG_RUNTIME_DIR/cudaipc/detector &":
        E("run", "filter"),
    "gst-launch-1.0 videotestsrc pattern=ball is-live=true ! video/x-raw,format=RGBA,width=640,"
    "height=480 ! cudaipcfilter socket-path=$XDG_RUNTIME_DIR/cudaipc/detector ipc-mode=host ! "
    "videoconvert ! objectdetectionoverlay ! videoconvert ! autovideosink": E("run", "filter"),
    APPSINK_DETECTIONS: E("run", "filter"),
    # README: MPS
    "export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)": E("gpu", MPS),
    "nvidia-cuda-mps-control -d": E("gpu", MPS),
    "echo get_server_list | nvidia-cuda-mps-control": E("gpu", MPS),
    "echo quit | nvidia-cuda-mps-control": E("gpu", MPS),
    # README: Python
    "pip install .": E("covered", "scripts/dev.sh test installs the package so into "
                       "build/python-venv; python/tests/test_cli_installed.py runs the cudaipc "
                       "tool it installs"),
    # docs/benchmarks.md
    "build-bench/tests/bench/cudaipc-bench": E("skip", "the benchmark: a build of its own "
                                               "(build-bench) and minutes of run time",
                                               "docs/benchmarks.md"),
    "build-bench/tests/bench/cudaipc-bench --gpu-only": E("gpu", "GPU benchmark rows",
                                                          "docs/benchmarks.md"),
    "bash tests/gpu/collect.sh build .gpu": E("gpu", "gathers the GPU suites for the GPU machine",
                                              "docs/benchmarks.md"),
    "bash tests/bench/gpu/run-mps.sh LOGDIR .gpu": E("gpu", MPS, "docs/benchmarks.md"),
    "build/tests/bench/cudaipc-bench-gpu-pipeline --help": E("run", "bench-help",
                                                             "docs/benchmarks.md"),
    "build/tests/gst/bench/cudaipc-gst-streams [--host] [--streams=N --width=W --height=H] "
    "[--seconds=S]": E("covered", "the bench-smoke suite runs it with --host, 3 streams, 1 s "
                       "(GPU rows: the GPU machine)", "docs/benchmarks.md"),
    'BENCH_WHAT=streams BENCH_MPS=off BENCH_VERSIONS="122 128" bash tests/gst/gpu/device-bench.sh '
    "GSTDIR": E("gpu", "the GStreamer benchmark on the GPU machine", "docs/benchmarks.md"),
    "build-bench/tests/bench/cudaipc-bench-admission [--sizes=4K,8294400] [--idle=500] "
    "[--samples=N]": E("skip", "a benchmark of its own build (build-bench), minutes long",
                       "docs/benchmarks.md"),
    # docs/deployment.md
    "install -d -m 0770 -o 1000 -g 2000 /srv/cudaipc": E("skip", "containers: needs docker, "
                                                          "root and two images", "docs/deployment.md"),
    "docker run -d --name cam --gpus device=GPU-... -v /srv/cudaipc:/run/cudaipc --user 1000:2000 "
    "cam-image gst-launch-1.0 -e v4l2src ! ... ! cudaupload ! cudaipcringsink "
    "socket-path=/run/cudaipc/cam0 socket-mode=0660 allowed-group=2000":
        E("gpu", "docker with a GPU, a camera and an image of one's own", "docs/deployment.md"),
    "docker run -d --name infer --gpus device=GPU-... -v /srv/cudaipc:/run/cudaipc --user "
    "1001:2000 infer-image python3 infer.py /run/cudaipc/cam0":
        E("gpu", "docker with a GPU and an image of one's own", "docs/deployment.md"),
    "gst-launch-1.0 tcpserversrc host=0.0.0.0 port=5000 ! gdpdepay ! cudaupload ! cudaipcringsink "
    "socket-path=/run/cudaipc/cam0-remote": E("gpu", "two hosts with GPUs (examples/bridge.sh "
                                              "cuda plays both on one: test example-bridge)",
                                              "docs/deployment.md"),
    "gst-launch-1.0 cudaipcringsrc socket-path=/run/cudaipc/cam0 mode=every-frame ! cudadownload "
    "! gdppay ! tcpclientsink host=far.example port=5000": E("gpu", "two hosts with GPUs",
                                                             "docs/deployment.md"),
    "gst-launch-1.0 cudaipcsrc socket-path=/run/cudaipc/cam0-remote ! ...":
        E("skip", "a fragment (`! ...`): the far host's consumers", "docs/deployment.md"),
    "gst-launch-1.0 cudaipcringsrc socket-path=/run/cudaipc/cam0 io-mode=copy ! nvh264enc ! "
    "h264parse config-interval=-1 ! rtph264pay config-interval=-1 ! udpsink host=far.example "
    "port=5004": E("gpu", "NVENC and two hosts (examples/bridge.sh encoded plays one)",
                   "docs/deployment.md"),
    "gst-launch-1.0 cudaipcringsrc socket-path=/run/cudaipc/cam0 io-mode=copy ! nvh265enc ! "
    "h265parse config-interval=-1 ! mpegtsmux ! srtsink uri=srt://:7001 latency=80":
        E("gpu", "NVENC, SRT and two hosts", "docs/deployment.md"),
    'gst-launch-1.0 udpsrc port=5004 caps="application/x-rtp,media=video,encoding-name=H264,'
    'clock-rate=90000" ! rtpjitterbuffer ! rtph264depay ! h264parse ! nvh264dec ! cudaipcringsink '
    "socket-path=/run/cudaipc/cam0-remote": E("gpu", "NVDEC and two hosts", "docs/deployment.md"),
    "gst-launch-1.0 srtsrc uri=srt://near.example:7001 latency=80 ! tsdemux ! h265parse ! "
    "nvh265dec ! cudaipcringsink socket-path=/run/cudaipc/cam0-remote":
        E("gpu", "NVDEC, SRT and two hosts", "docs/deployment.md"),
    # docs/elements.md
    "gst-launch-1.0 -e videotestsrc is-live=true ! video/x-raw,format=NV12,width=1280,height=720 "
    "! cudaupload ! cudaipcringsink socket-path=/run/user/1000/cudaipc/cam0":
        E("gpu", "nvcodec's cudaupload (GPU memory)", "docs/elements.md"),
    "gst-launch-1.0 cudaipcringsrc socket-path=/run/user/1000/cudaipc/cam0 ! cudadownload ! "
    "videoconvert ! autovideosink": E("gpu", "nvcodec's cudadownload (GPU memory)",
                                      "docs/elements.md"),
    "python3 examples/python/serve_detector.py $XDG_RUNTIME_DIR/cudaipc/detector &":
        E("run", "filter"),
    "gst-launch-1.0 filesrc location=cars.mp4 ! parsebin ! nvh264dec ! cudaipcfilter "
    "socket-path=$XDG_RUNTIME_DIR/cudaipc/detector ! cudadownload ! videoconvert ! "
    "objectdetectionoverlay ! videoconvert ! autovideosink":
        E("gpu", "NVDEC, cudadownload and a clip of one's own (cars.mp4)", "docs/elements.md"),
    # docs/fuzzing.md
    "scripts/dev.sh fuzz": E("skip", "libFuzzer: clang, an instrumented build of its own and "
                             "300 s a target", "docs/fuzzing.md"),
    "scripts/dev.sh fuzz 3600 protocol": E("skip", "libFuzzer for an hour", "docs/fuzzing.md"),
    "CUDAIPC_FUZZ_BUILD=build-fuzz-gst128 scripts/dev.sh fuzz 600 gst_metas":
        E("skip", "libFuzzer for ten minutes, against a GStreamer 1.28 prefix", "docs/fuzzing.md"),
    "build-fuzz/tests/fuzz/fuzz-protocol -max_len=70000 -jobs=2 build-fuzz/fuzz-corpus/protocol":
        E("skip", "libFuzzer (build-fuzz, clang), until stopped", "docs/fuzzing.md"),
    # docs/python.md
    "python3 examples/python/appsink_detections.py \"videotestsrc pattern=ball ! video/x-raw,"
    "format=RGBA,width=640,height=480 ! cudaipcfilter ipc-mode=host "
    "socket-path=$XDG_RUNTIME_DIR/cudaipc/detector\"":
        E("covered", "python/tests/test_gst_detections.py runs this application under "
          "serve_detector.py and checks every frame's box (the docs' python3 has no PyGObject)",
          "docs/python.md"),
    "python/tests/build-device-bundle.sh": E("skip", "downloads pytest's wheels (a package "
                                             "registry) and rebuilds bench programs in build/: "
                                             "by hand, before a GPU run", "docs/python.md"),
    # docs/versions.md
    "scripts/gst-prefix.sh 1.28.6": E("skip", "builds GStreamer from source (most of an hour); CI "
                                      "uses a cached prefix of the same build",
                                      "docs/versions.md"),
    "source build-gst/gst-1.28/env.sh": E("covered", "CI's GStreamer 1.28 build (.ci/run) "
                                          "sources the cached prefix's env.sh",
                                          "docs/versions.md"),
    "pkg-config --modversion gstreamer-cuda-1.0": E("covered", ".ci/run prints it",
                                                    "docs/versions.md"),
    "meson setup build-gst128 -Dgst=enabled": E("covered", ".ci/run", "docs/versions.md"),
    "ninja -C build-gst128": E("covered", ".ci/run", "docs/versions.md"),
    "GST_PLUGIN_PATH_1_0=$PWD/build-gst128/gst gst-inspect-1.0 cudaipcringsink":
        E("covered", ".ci/run's 1.28 suites (gst-inspect-cudaipcringsink)", "docs/versions.md"),
}
# The same command documented in two files: (file, command) pairs whose file differs from the
# table's. Kept explicit, so a copy that drifts is noticed.
ALSO_IN = {("docs/elements.md", "python3 examples/python/serve_detector.py "
            "$XDG_RUNTIME_DIR/cudaipc/detector &"),
           ("docs/fuzzing.md", "source build-gst/gst-1.28/env.sh"),
           ("docs/python.md", "pip install .")}

# Commands given inline in the prose (`...`), run too; each must still be in its file.
INLINE: Dict[str, Entry] = {
    "GST_PLUGIN_PATH=$PWD/build/gst gst-inspect-1.0 cudaipc": E("run", "inspect"),
    "examples/pipelines.sh host|cuda|decoder|tensors": E("run", "pipelines"),
    "examples/python/detect.sh [host|cuda]": E("run", "detect-sh", "docs/python.md"),
    "examples/bridge.sh host|cuda|tensors|encoded": E("covered", "tests example-bridge-host, "
                                                      "-tensors and -encoded",
                                                      "docs/deployment.md"),
    "scripts/dev.sh test --sanitize": E("covered", "CI (.ci/run)"),
    "scripts/dev.sh install": E("skip", "installs into /usr (root, and it reconfigures "
                                "build/): by hand"),
    "ninja -C build uninstall": E("skip", "removes an install from /usr (root): by hand, after "
                                  "scripts/dev.sh install"),
    "meson configure build --prefix=/usr && meson install -C build":
        E("skip", "installs into /usr (root, and it reconfigures build/): by hand"),
    "pip install '.[metas]'": E("skip", "pip from the network into an environment of one's "
                                "own; scripts/dev.sh test installs ml_dtypes the same way",
                                "docs/python.md"),
}


# -- running ----------------------------------------------------------------------------------

class Failed(Exception):
    pass


class Skip(Exception):
    pass


class Env:
    """A directory that looks like the checkout, with the build under test as build/."""

    def __init__(self, root: str, build: str, shell: Optional[Dict[str, str]] = None) -> None:
        self.root, self.build = root, build
        self.tmp = tempfile.mkdtemp(prefix="cudaipc-docs-")
        self.cwd = os.path.join(self.tmp, "checkout")
        os.mkdir(self.cwd)
        for name in ("examples", "scripts", "python", "docs", "README.md", "core", "gst", "tests",
                     "meson.build", "meson_options.txt", "pyproject.toml"):
            if os.path.exists(os.path.join(root, name)):
                os.symlink(os.path.join(root, name), os.path.join(self.cwd, name))
        os.symlink(build, os.path.join(self.cwd, "build"))
        self.xdg = os.path.join(self.tmp, "run")
        os.mkdir(self.xdg, 0o700)
        env = dict(os.environ)
        env["XDG_RUNTIME_DIR"] = self.xdg
        env["PWD"] = self.cwd
        # A user's shell after the demo: neither the build's plugin nor its tool is found until a
        # documented line says how (GST_PLUGIN_PATH_1_0, when set, would hide GST_PLUGIN_PATH).
        for var in ("GST_PLUGIN_PATH", "GST_PLUGIN_PATH_1_0"):
            env.pop(var, None)
        # CUDAIPC_DOCS_PATH: directories for the front of PATH (scripts/dev.sh test: the virtualenv
        # it installed the package into, so `python3` is the Python that has it).
        front = [d for d in os.environ.get("CUDAIPC_DOCS_PATH", "").split(":") if d]
        env["PATH"] = ":".join(front + [env.get("PATH", "")])
        # What the docs' setup lines exported in the commands before (one terminal, carried on).
        self.shell: Dict[str, str] = dict(shell or {})
        env.update(self.shell)
        env["GST_REGISTRY_1_0"] = os.path.join(self.tmp, "registry.bin")
        env.pop("DISPLAY", None)
        env.pop("WAYLAND_DISPLAY", None)
        # No display here: autovideosink tries each display sink and takes the first that opens,
        # else its fake sink. On a headless Debian 12 the probe of dfbvideosink (DirectFB, from
        # gst-plugins-bad) crashes the process instead of failing, so the display sinks are
        # ranked out and autovideosink goes straight to its fake sink, as it would on a machine
        # without them. The commands themselves stay as written.
        env["GST_PLUGIN_FEATURE_RANK"] = ",".join(
            f"{s}:0" for s in ("dfbvideosink", "xvimagesink", "ximagesink", "glimagesink",
                               "kmssink", "waylandsink", "fbdevsink", "vulkansink"))
        env["TMPDIR"] = self.tmp
        # The package as pip installed it where python3 has it, else this checkout's sources
        # with the build's compiled binding.
        if subprocess.run(["python3", "-c", "import cudaipc"], env=env, capture_output=True,
                          cwd=self.tmp).returncode != 0:
            env["PYTHONPATH"] = os.path.join(root, "python") + (
                ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            native = glob.glob(os.path.join(build, "python", "native", "_native*.so"))
            if native:
                env["CUDAIPC_NATIVE"] = native[0]
        self.env = env
        self.procs: List[subprocess.Popen] = []

    def stand_in(self, cmd: str) -> str:
        """The command as it can run here: a display sink this GStreamer lacks (CI's 1.28 prefix
        has no gst-plugins-good) becomes the fake sink it would end in without a display anyway,
        so the rest of a 1.24+ line (objectdetectionoverlay) still runs. Said when it happens."""
        for name, other in STAND_INS.items():
            if re.search(rf"\b{name}\b", cmd) and not have_element(self, name):
                cmd = re.sub(rf"\b{name}\b", other, cmd)
                print(f"  ({name} is not in this GStreamer: {other} stands in)", flush=True)
        return cmd

    def sh(self, cmd: str, timeout: float = 60, env: Optional[dict] = None) -> Tuple[int, str]:
        """Runs one documented command line with bash, as a user would type it."""
        cmd = self.stand_in(cmd)
        print(f"$ {cmd}", flush=True)
        r = subprocess.run(["bash", "-c", cmd], cwd=self.cwd, env=env or self.env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        show(r.stdout)
        return r.returncode, r.stdout

    def source(self, cmd: str) -> Tuple[int, str]:
        """Runs a documented setup line (`source ...`, `export ...`) and keeps what it exported for
        this and every later command, as the user's shell would."""
        print(f"$ {cmd}", flush=True)
        r = subprocess.run(["bash", "-c", cmd + ' && printf "\\0ENV\\0" && env -0'], cwd=self.cwd,
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30)
        out, _, dump = r.stdout.partition(b"\0ENV\0")
        text = out.decode(errors="replace")
        show(text)
        if r.returncode == 0:
            after = dict(v.split("=", 1) for v in dump.decode().split("\0") if "=" in v)
            for k, v in after.items():
                if k not in ("_", "SHLVL", "PWD", "OLDPWD") and self.env.get(k) != v:
                    self.shell[k] = v
            self.env.update(self.shell)
        return r.returncode, text

    def start(self, cmd: str) -> subprocess.Popen:
        """A long-running documented command, in the background (its own process group, so a
        Ctrl-C reaches what it started too)."""
        cmd = self.stand_in(cmd.rstrip("& "))
        print(f"$ {cmd} &", flush=True)
        p = subprocess.Popen(["bash", "-c", "exec " + cmd], cwd=self.cwd,
                             env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 15) -> \
            Tuple[int, str]:
        """Ends a background command as a user would (Ctrl-C: SIGINT to its process group)."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        return self.finish(p, timeout)

    def finish(self, p: subprocess.Popen, timeout: float = 15) -> Tuple[int, str]:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            raise Failed(f"{p.args[-1]!r} did not end within {timeout:g} s:\n{out}")
        return p.returncode, out

    def channels(self, where: Optional[str] = None) -> Dict[str, dict]:
        """The channels `cudaipc ls --json` sees, by file name (the build's tool, found without
        the user's PATH: the test's own look, not a documented command)."""
        tool = os.path.join(self.build, "core", "cli", "cudaipc")
        r = subprocess.run([tool, "ls", "--json", where or os.path.join(self.xdg, "cudaipc")],
                           cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return {}
        return {os.path.basename(c["path"]): c for c in json.loads(r.stdout)["channels"]}

    def wait_for(self, what: str, ok: Callable[[], bool], timeout: float = 30,
                 procs: Tuple[subprocess.Popen, ...] = ()) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ok():
                return
            for p in procs:
                if p.poll() is not None:
                    out = p.stdout.read() if p.stdout else ""
                    raise Failed(f"{p.args[-1]!r} ended (exit {p.returncode}) before {what}:\n{out}")
            time.sleep(0.1)
        raise Failed(f"no {what} within {timeout:g} s")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.communicate()
        shutil.rmtree(self.tmp, ignore_errors=True)


def show(out: str) -> None:
    lines = out.rstrip("\n").split("\n") if out.strip() else []
    for line in lines[:40]:
        print(f"    {line}")
    if len(lines) > 40:
        print(f"    ... ({len(lines) - 40} more lines)")


def expect(cond: bool, what: str, out: str = "") -> None:
    if not cond:
        raise Failed(what + (f"\n--- output:\n{out}" if out else ""))


def one_box_per_frame(out: str, frames: int, what: str) -> None:
    """`what` printed (cudaipc-appsink-detections' form) `frames` frames of one box each."""
    found = re.findall(r"^frame (\d+) pts \S+: (\d+) object", out, re.M)
    boxes = re.findall(r"^  \S.* x=\d+ y=\d+ w=\d+ h=\d+ score=", out, re.M)
    expect(len(found) == frames and all(n == "1" for _, n in found) and len(boxes) == frames,
           f"{what} did not print one box on each of {frames} frames ({len(found)} frames, "
           f"{len(boxes)} boxes)", out)


def have_element(env: Env, name: str) -> bool:
    return subprocess.run(["gst-inspect-1.0", "--exists", "--atleast-version=0.0", name],
                          env=env.env, capture_output=True).returncode == 0


OURS = ("cudaipcsink", "cudaipcsrc", "cudaipcringsink", "cudaipcringsrc", "cudaipcfilter")
# Elements a line may lack here and still run, with what stands in (Env.stand_in).
STAND_INS = {"autovideosink": "fakesink"}


def missing(env: Env, cmd: str) -> List[str]:
    """The elements of a gst-launch-1.0 command line that this GStreamer does not have. One of the
    plugin's own missing is a failure, not a skip: the plugin was built (main checks), so the
    docs ran this line before the step that lets GStreamer find it."""
    if not cmd.startswith("gst-launch-1.0"):
        return []
    names = []
    for i, seg in enumerate(cmd.split("!")):
        words = [w for w in seg.split() if not w.startswith("-")]
        if i == 0:
            words = words[1:]  # gst-launch-1.0
        if words and "/" not in words[0] and "=" not in words[0]:
            names.append(words[0])
    lacking = [n for n in names if not have_element(env, n) and
               not (n in STAND_INS and have_element(env, STAND_INS[n]))]
    ours = [n for n in lacking if n in OURS]
    if ours:
        raise Failed(f"no element {ours[0]!r} for `{cmd[:70]}...`: the build's plugin is not found "
                     "in the shell the docs have set up by this line (a step they give later, or "
                     "never: GST_PLUGIN_PATH, `source build/env.sh`)")
    return lacking


def start_if_possible(env: Env, cmd: str) -> subprocess.Popen:
    """Starts a documented pipeline, or skips the scenario naming the elements it lacks here."""
    lacking = missing(env, doc(cmd))
    if lacking:
        raise Skip(f"this GStreamer has no {', '.join(lacking)}, which `{cmd[:60]}...` needs")
    return env.start(cmd)


def have_gpu() -> bool:
    return subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0


def python_ready(env: Env) -> Optional[str]:
    r = subprocess.run(["python3", "-c", "import numpy, cudaipc"], env=env.env, cwd=env.tmp,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return ("python3 cannot import numpy and cudaipc (pip install . into the Python you run; "
                "scripts/dev.sh test runs this suite again inside its build/python-venv): "
                + r.stderr.strip().splitlines()[-1])
    return None


def live(channel: dict) -> bool:
    return channel.get("state") == "live"


# -- scenarios: each runs its commands as written and checks what they print ------------------

def scenario_tool(env: Env) -> None:
    """README, "The cudaipc tool": every command against a channel `cudaipc pub` makes, with the
    README's PATH placeholder as a channel in $XDG_RUNTIME_DIR/cudaipc."""
    rc, out = env.sh("cudaipc ls")
    expect(rc == 0, f"cudaipc ls with no channel exited {rc}", out)
    path = "$XDG_RUNTIME_DIR/cudaipc/cam0"
    pub = env.start(f"cudaipc pub {path} --caps "
                    "video/x-raw,format=RGBA,width=640,height=480,framerate=30/1")
    env.wait_for("channel cam0 in `cudaipc ls --json`",
                 lambda: live(env.channels().get("cam0", {})) and
                 env.channels()["cam0"]["published"] >= 10, procs=(pub,))
    rc, out = env.sh("cudaipc ls")
    expect(rc == 0 and "cam0" in out and "video/x-raw,format=RGBA,width=640,height=480" in out,
           "`cudaipc ls` (the default directory) does not list the README's channel", out)
    # The README's /run/cams stands for any directory of channels: this one.
    rc, out = env.sh("cudaipc ls --json $XDG_RUNTIME_DIR/cudaipc")
    chans = json.loads(out)["channels"] if rc == 0 else []
    expect([os.path.basename(c["path"]) for c in chans] == ["cam0"] and chans[0]["memory"] == "host"
           and chans[0]["caps"].startswith("video/x-raw,format=RGBA,width=640,height=480"),
           "`cudaipc ls --json DIR` does not describe the channel", out)
    rc, out = env.sh("cudaipc top --count 2 | cat")
    expect(rc == 0 and re.search(r"cam0 live [0-9.]+ frames/s published \d+", out) is not None,
           "`cudaipc top` (piped: plain lines) shows no live line for the channel", out)
    rc, out = env.sh(f"cudaipc probe {path} --seconds 5", timeout=30)
    m = re.search(r"([0-9.]+) frames/s", out)
    expect(rc == 0 and m is not None and 20 <= float(m.group(1)) <= 40,
           "`cudaipc probe` does not report the producer's 30 frames/s", out)
    outdir = os.path.join(env.tmp, "f")
    rc, out = env.sh(f"cudaipc cat {path} --frames 3 --out {outdir}", timeout=30)
    npys = sorted(glob.glob(os.path.join(outdir, "frame-*.npy")))
    expect(rc == 0 and len(npys) == 3 and os.path.exists(os.path.join(outdir, "format.json")),
           "`cudaipc cat --frames 3` did not write three frames and the format", out)
    for npy in npys:  # the test pattern: the frame's seq in its first 8 bytes (cudaipc pub --help)
        seq = int(re.search(r"frame-(\d+)\.npy", npy).group(1))
        data = open(npy, "rb").read()
        header_len = int.from_bytes(data[8:10], "little") + 10
        pixels = data[header_len:]
        expect(len(pixels) == 640 * 480 * 4 and int.from_bytes(pixels[:8], "little") == seq and
               pixels[8] == (seq + 8) % 256 and pixels[-1] == (seq + len(pixels) - 1) % 256,
               f"{npy}: not frame {seq} of cudaipc pub's pattern")
    rc, out = env.stop(pub, signal.SIGINT)
    expect(rc == 0 and out.startswith("publishing ") and "published " in out,
           f"`cudaipc pub` ended with {rc} on Ctrl-C", out)
    # [--memory cuda]: GPU-only; without a GPU the error says what to use instead.
    if not have_gpu():
        rc, out = env.sh(f"cudaipc pub {path}-cuda --caps "
                         "video/x-raw,format=RGBA,width=640,height=480,framerate=30/1 "
                         "--memory cuda", timeout=30)
        expect(rc == 1 and "Use --memory host" in out,
               "`cudaipc pub --memory cuda` without a GPU does not say to use --memory host", out)


def scenario_setup(env: Env) -> None:
    """README: the demo, then the line its closing words give, `source build/env.sh` (written by
    meson into the build), after which the shell finds the build's plugin and tool."""
    if os.path.realpath(env.build) == os.path.realpath(os.path.join(env.root, "build")):
        # Only in the demo's own build (1.28's has no demo programs), where after scripts/dev.sh
        # test it has nothing to build or install (CUDAIPC_SKIP_DEPS: no apt from a test). In the
        # user's own shell: not CUDAIPC_DOCS_PATH's virtualenv, whose meson did not configure build/.
        plain = dict(env.env, PATH=os.environ.get("PATH", ""), CUDAIPC_SKIP_DEPS="1")
        rc, out = env.sh(doc("scripts/dev.sh demo"), timeout=300, env=plain)
        said = re.findall(r"^\s+(source \S+)\s*$", out, re.M)
        expect(rc == 0 and said == ["source build/env.sh"], f"scripts/dev.sh demo exited {rc} or "
               f"its closing lines do not say `source build/env.sh` (they say {said})", out)
    rc, out = env.source("source build/env.sh")
    expect(rc == 0, f"`source build/env.sh` exited {rc}", out)
    tool = os.path.join(env.build, "core", "cli", "cudaipc")
    rc, out = env.sh("command -v cudaipc")
    expect(rc == 0 and os.path.realpath(out.strip()) == os.path.realpath(tool),
           "after `source build/env.sh` the shell's cudaipc is not the build's", out)
    rc, out = env.sh("gst-inspect-1.0 cudaipcsink")
    m = re.search(r"Filename\s+(\S+)", out)
    expect(rc == 0 and m is not None and os.path.realpath(m.group(1)) ==
           os.path.realpath(os.path.join(env.build, "gst", "libgstcudaipc.so")),
           "after `source build/env.sh` gst-inspect-1.0 does not find the build's cudaipcsink", out)


def scenario_host_pair(env: Env) -> None:
    """README, GStreamer elements: the host-memory producer and consumer in two processes,
    ended with Ctrl-C on the producer (-e: EOS, which travels to the consumer)."""
    consumer = ("gst-launch-1.0 cudaipcsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/test0 ! "
                "videoconvert ! autovideosink")
    lacking = missing(env, doc(consumer))
    if lacking:
        raise Skip(f"this GStreamer has no {', '.join(lacking)} (the consumer's line)")
    prod = start_if_possible(env, "gst-launch-1.0 -e videotestsrc is-live=true ! video/x-raw,"
                             "format=RGBA,width=640,height=480 ! cudaipcsink ipc-mode=host "
                             "socket-path=$XDG_RUNTIME_DIR/cudaipc/test0")
    cons = env.start(consumer)
    env.wait_for("a consumer on test0 and 30 frames published",
                 lambda: len(env.channels().get("test0", {}).get("consumers", [])) == 1 and
                 env.channels()["test0"]["published"] >= 30, procs=(prod, cons))
    delivered = env.channels()["test0"]["consumers"][0]
    rc, out = env.stop(prod)
    expect(rc == 0 and "Got EOS" in out, f"the producer exited {rc} on Ctrl-C (-e)", out)
    rc, out = env.finish(cons)
    expect(rc == 0 and 'Got EOS from element "pipeline0"' in out,
           f"the consumer did not end at the producer's EOS (exit {rc})", out)
    expect("ERROR" not in out, "the consumer printed an error", out)
    print(f"    (consumer while playing: {json.dumps(delivered)})")


def overlay_holds_eos(env: Env) -> bool:
    """GStreamer 1.24's objectdetectionoverlay does not pass end-of-stream on (1.28's does): a
    pipeline through it never ends by itself, with or without cudaipc. Found by trying it alone."""
    try:
        r = subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "num-buffers=2", "!",
                            "video/x-raw,format=RGBA", "!", "objectdetectionoverlay", "!",
                            "fakesink"], env=env.env, capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return True
    expect(r.returncode == 0, f"objectdetectionoverlay alone failed (exit {r.returncode})",
           r.stdout + r.stderr)
    return False


def scenario_metas(env: Env) -> None:
    """README, Metas: frames to examples/python/detect.py, its detections on a second channel,
    drawn by objectdetectionoverlay (GStreamer 1.24+)."""
    why = python_ready(env)
    if why:
        raise Skip(why)
    prod = start_if_possible(env, "gst-launch-1.0 -e videotestsrc is-live=true pattern=ball ! "
                             "video/x-raw,format=RGBA,width=640,height=480 ! cudaipcsink "
                             "ipc-mode=host socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0")
    det = env.start(doc("python3 examples/python/detect.py $XDG_RUNTIME_DIR/cudaipc/cam0 "
                        "$XDG_RUNTIME_DIR/cudaipc/detections"))
    overlay = None
    skipped = ""
    overlay_line = doc("gst-launch-1.0 cudaipcsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/detections "
                       "! videoconvert ! objectdetectionoverlay ! videoconvert ! autovideosink")
    lacking = missing(env, overlay_line)
    if not lacking:
        overlay = env.start(overlay_line)
    else:
        skipped = (f"this GStreamer has no {', '.join(lacking)} (objectdetectionoverlay: 1.24+, "
                   "gst-plugins-bad analyticsoverlay; autovideosink: gst-plugins-good)")
    env.wait_for("30 frames on the detections channel",
                 lambda: env.channels().get("detections", {}).get("published", 0) >= 30,
                 procs=tuple(p for p in (prod, det, overlay) if p))
    # What detect.py published: each frame with one box, the ball's.
    rc, out = env.sh("cudaipc cat $XDG_RUNTIME_DIR/cudaipc/detections --frames 1 --out "
                     + os.path.join(env.tmp, "det"), timeout=30)
    expect(rc == 0, "cudaipc cat could not read the detections channel", out)
    rc, out = env.stop(prod)
    expect(rc == 0, f"the camera pipeline exited {rc} on Ctrl-C (-e)", out)
    rc, out = env.finish(det, timeout=40)
    expect(rc == 0 and re.search(r"^done frames=\d+", out, re.M) is not None,
           f"detect.py did not end cleanly at the camera's EOS (exit {rc})", out)
    if overlay and overlay_holds_eos(env):
        # As README.md says for GStreamer 1.24: Ctrl-C ends it.
        rc, out = env.stop(overlay)
        expect(rc == 0 and "ERROR" not in out,
               f"the overlay pipeline exited {rc} on Ctrl-C (GStreamer 1.24's overlay)", out)
    elif overlay:
        rc, out = env.finish(overlay)
        expect(rc == 0 and "Got EOS" in out, f"the overlay pipeline exited {rc}", out)
    if skipped:
        raise Skip("the camera pipeline and detect.py ran and were checked; the overlay line: "
                   + skipped)


def scenario_filter(env: Env) -> None:
    """README and docs/elements.md, cudaipcfilter: the model process, the README's reader of its
    boxes (any version), and the pipeline through it (objectdetectionoverlay: GStreamer 1.24+)."""
    why = python_ready(env)
    if why:
        raise Skip(why)
    serve = env.start(doc("python3 examples/python/serve_detector.py "
                          "$XDG_RUNTIME_DIR/cudaipc/detector &"))
    pipe_line = doc("gst-launch-1.0 videotestsrc pattern=ball is-live=true ! video/x-raw,"
                    "format=RGBA,width=640,height=480 ! cudaipcfilter "
                    "socket-path=$XDG_RUNTIME_DIR/cudaipc/detector ipc-mode=host ! "
                    "videoconvert ! objectdetectionoverlay ! videoconvert ! autovideosink")
    lacking = missing(env, pipe_line)
    # As the README has it, the model serves before a pipeline starts ("still serving"); a
    # pipeline that came first would pass its first frames without results (on-missing=pass).
    env.wait_for("the model's reply channel (serve_detector.py serving)",
                 lambda: os.path.exists(os.path.join(env.xdg, "cudaipc", "detector.reply")),
                 procs=(serve,))
    # The README's reader, on every version: 1.22's custom meta, or 1.24+'s relation meta.
    app = os.path.join(env.build, "examples", "cudaipc-appsink-detections")
    before_124 = "objectdetectionoverlay" in lacking
    unread = ""
    if os.path.exists(app):
        rc, out = env.sh(doc(APPSINK_DETECTIONS), timeout=120)
        expect(rc == 0, f"cudaipc-appsink-detections exited {rc}", out)
        one_box_per_frame(out, 60, "cudaipc-appsink-detections")
        if before_124:
            expect("CudaipcAnalyticsMeta" in out, "the filter did not say (once) that it "
                   "attaches the boxes as the CudaipcAnalyticsMeta custom meta", out)
        else:
            expect("note:" not in out, "cudaipc-appsink-detections says it cannot read this "
                   "GStreamer's analytics metas", out)
    elif before_124:
        # The README says the demo built it: its absence is a failure, not a skip.
        expect(False, f"{app} is missing: scripts/dev.sh demo builds it", "")
    else:
        unread = f"; the README's reader is not built in {env.build} (-Dexamples=false)"
    if lacking:
        rc, out = env.stop(serve, signal.SIGTERM)
        expect(rc == 0 and "serving " in out and re.search(r"done requests=\d+", out) is not None,
               f"serve_detector.py did not serve and end cleanly (exit {rc})", out)
        raise Skip("serve_detector.py and the README's reader ran and were checked; the overlay "
                   f"pipeline needs {', '.join(lacking)}, which this GStreamer lacks "
                   "(objectdetectionoverlay: 1.24+; autovideosink: gst-plugins-good)" + unread)
    pipe = env.start(pipe_line)
    env.wait_for("30 frames through the filter's channel",
                 lambda: env.channels().get("detector", {}).get("published", 0) >= 30,
                 procs=(serve, pipe))
    rc, out = env.stop(pipe)
    expect("ERROR" not in out, "the filter pipeline printed an error", out)
    rc, out = env.stop(serve, signal.SIGTERM)
    m = re.search(r"done requests=(\d+)", out)
    expect(rc == 0 and m is not None and int(m.group(1)) >= 30,
           f"serve_detector.py answered too few frames (exit {rc})", out)
    if unread:
        raise Skip("the model and the overlay pipeline ran and were checked" + unread)


def scenario_inspect(env: Env) -> None:
    rc, out = env.sh("GST_PLUGIN_PATH=$PWD/build/gst gst-inspect-1.0 cudaipc")
    m = re.search(r"Filename\s+(\S+)", out)
    expect(rc == 0 and m is not None and os.path.realpath(m.group(1)) ==
           os.path.realpath(os.path.join(env.build, "gst", "libgstcudaipc.so")),
           "gst-inspect-1.0 cudaipc does not find the build's plugin", out)
    for name in ("cudaipcsink", "cudaipcsrc", "cudaipcringsink", "cudaipcringsrc", "cudaipcfilter"):
        expect(re.search(rf"^\s*{name}:", out, re.M) is not None, f"no element {name}", out)
    expect("cudaipcfilter" in re.search(r"Description\s+(.*)", out).group(1),
           "the plugin's description does not name cudaipcfilter", out)


def scenario_pipelines(env: Env) -> None:
    skipped = []
    for mode in ("host", "tensors", "decoder", "cuda"):
        rc, out = env.sh(f"examples/pipelines.sh {mode} build 30", timeout=120)
        if rc == 77:
            skipped.append(f"{mode}: {out.strip().splitlines()[-1]}")
            continue
        expect(rc == 0, f"examples/pipelines.sh {mode} exited {rc}", out)
        expect(re.search(r"(\d+) of \1 (frames|tensors)|every-frame consumer \d+ of", out)
               is not None, f"examples/pipelines.sh {mode} did not report its checked frames",
               out)
    if skipped:
        raise Skip("; ".join(skipped))


def scenario_detect_sh(env: Env) -> None:
    """docs/python.md: examples/python/detect.sh host runs the three processes without a GPU; it
    exits 0 only when all three succeeded. Without objectdetectionoverlay (1.22) its third process
    prints every frame's boxes (cudaipc-appsink-detections, on PATH through build/env.sh)."""
    why = python_ready(env)
    if why:
        raise Skip(why)
    rc, out = env.sh("examples/python/detect.sh host 60", timeout=90)
    expect(rc == 0 and "done frames=60" in out, f"detect.sh host exited {rc}", out)
    if not have_element(env, "objectdetectionoverlay"):
        # Every frame (detect.py waits for its reader), each with the ball detect.py found in it.
        one_box_per_frame(out, 60, "detect.sh without objectdetectionoverlay")


def scenario_bench_help(env: Env) -> None:
    exe = os.path.join(env.build, "tests", "bench", "cudaipc-bench-gpu-pipeline")
    if not os.path.exists(exe):
        raise Skip("cudaipc-bench-gpu-pipeline is built only with the CUDA backend")
    rc, out = env.sh("build/tests/bench/cudaipc-bench-gpu-pipeline --help")
    expect(rc == 0 and "--scenario" in out, "the benchmark's --help does not list --scenario", out)


SCENARIOS: Dict[str, Callable[[Env], None]] = {
    "setup": scenario_setup, "tool": scenario_tool, "host-pair": scenario_host_pair,
    "metas": scenario_metas, "filter": scenario_filter, "inspect": scenario_inspect,
    "pipelines": scenario_pipelines, "detect-sh": scenario_detect_sh,
    "bench-help": scenario_bench_help,
}


def doc(cmd: str) -> str:
    """A command the scenarios run verbatim: it must be a documented one."""
    if normalise(cmd) not in TABLE:
        raise Failed(f"the scenario runs a command the docs do not contain: {cmd}")
    return cmd


# -- main -------------------------------------------------------------------------------------

def check_in_step(root: str) -> List[str]:
    """Problems: documented commands this file does not know, and entries the docs lost."""
    problems = []
    found = extract(root)
    seen = set()
    for rel, line, cmd in found:
        seen.add(cmd)
        if cmd not in TABLE:
            problems.append(f"{rel}:{line}: a documented command this test does not know (add it "
                            f"to TABLE in tests/docs/documented_commands.py): {cmd}")
        elif TABLE[cmd][2] != rel and (rel, cmd) not in ALSO_IN:
            problems.append(f"{rel}:{line}: documented here, but TABLE says {TABLE[cmd][2]}: {cmd}")
    for cmd, (_, _, rel) in TABLE.items():
        if cmd not in seen:
            problems.append(f"{rel}: no longer documents (remove it from TABLE): {cmd}")
    for cmd, (_, _, rel) in INLINE.items():
        if f"`{cmd}`" not in open(os.path.join(root, rel), encoding="utf-8").read():
            problems.append(f"{rel}: no longer says `{cmd}` (update INLINE)")
    return problems


def demo_built(root: str, build: str) -> List[str]:
    """Problems: a README command runs a program from build/ that the demo does not build (the
    test runs in the full build `scripts/dev.sh test` made, where it would be found anyway)."""
    if os.path.realpath(build) != os.path.realpath(os.path.join(root, "build")):
        return []  # the demo builds build/ only; another build directory has no demo to match
    out = subprocess.run([os.path.join(root, "scripts", "dev.sh"), "demo-targets"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return [f"scripts/dev.sh demo-targets failed (exit {out.returncode}): {out.stderr}"]
    built = set(out.stdout.split())
    problems = []
    for rel, line, cmd in extract(root):
        if rel != "README.md":
            continue
        for path in re.findall(r"(?<![\w/.$-])build/[\w./-]+", cmd):
            inside = os.path.relpath(os.path.normpath(path), "build")
            if os.path.isfile(os.path.join(build, inside)) and inside != "env.sh" and \
                    inside not in built:
                problems.append(f"README.md:{line}: runs build/{inside}, which scripts/dev.sh "
                                f"demo does not build (add it to demo_targets in scripts/dev.sh)")
    return problems


def reading_order(root: str) -> List[Tuple[str, str]]:
    """(scenario, where the reader first meets one of its commands) for every scenario, in the
    order a reader meets them: README.md top to bottom, then docs/*.md. A scenario runs its
    commands together, so it stands where its first one does."""
    files = ["README.md"] + sorted(os.path.relpath(p, root)
                                   for p in glob.glob(os.path.join(root, "docs", "*.md")))
    first: Dict[str, Tuple[int, int, str]] = {}

    def meet(scenario: str, rel: str, line: int) -> None:
        key = (files.index(rel) if rel in files else len(files), line, f"{rel}:{line}")
        if scenario not in first or key < first[scenario]:
            first[scenario] = key

    for rel, line, cmd in extract(root):
        kind, scenario, _ = TABLE.get(cmd, ("", "", ""))
        if kind == "run":
            meet(scenario, rel, line)
    for cmd, (kind, scenario, rel) in INLINE.items():
        if kind != "run":
            continue
        text = open(os.path.join(root, rel), encoding="utf-8").read()
        at = text.find(f"`{cmd}`")
        if at >= 0:
            meet(scenario, rel, text.count("\n", 0, at) + 1)
    order = sorted(first, key=lambda n: first[n])
    return [(n, first[n][2]) for n in order] + [(n, "not in the docs") for n in SCENARIOS
                                                if n not in first]


def gpu_script() -> str:
    lines = ["#!/usr/bin/env bash",
             "# The documented commands that need an NVIDIA GPU (tests/docs/documented_commands.py"
             " --gpu-script),",
             "# one block per reason; run them by hand on a GPU machine from the repository root.",
             "export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}",
             "source build/env.sh"]
    for cmd, (kind, why, rel) in list(TABLE.items()):
        if kind == "gpu":
            lines.append(f"# {rel}: {why}")
            lines.append(cmd)
    lines += ["# README: the tool's pub in GPU memory", "cudaipc pub $XDG_RUNTIME_DIR/cudaipc/gpu0 "
              "--caps video/x-raw,format=RGBA,width=640,height=480,framerate=30/1 --memory cuda "
              "--frames 30 & sleep 2; cudaipc ls; kill %1",
              "# docs/python.md, examples", "examples/pipelines.sh cuda build",
              "examples/python/detect.sh cuda 60", "examples/python/bridge.sh videotestsrc 60"]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if "--gpu-script" in sys.argv:
        sys.stdout.write(gpu_script())
        return 0
    if "--list" in sys.argv:
        for rel, line, cmd in extract(root):
            kind, why, _ = TABLE.get(cmd, ("UNKNOWN", "", ""))
            print(f"{rel}:{line}: [{kind}: {why}] {cmd}")
        for cmd, (kind, why, rel) in INLINE.items():
            print(f"{rel} (inline): [{kind}: {why}] {cmd}")
        return 0
    problems = check_in_step(root) + demo_built(root, build)
    for p in problems:
        print(f"FAIL {p}")
    for cmd, (kind, why, rel) in list(TABLE.items()) + list(INLINE.items()):
        if kind in ("gpu", "skip", "covered"):
            label = {"gpu": "GPU-only", "skip": "not run", "covered": "covered elsewhere"}[kind]
            print(f"{label}: {rel}: {cmd}\n    ({why})")
    if not os.path.exists(os.path.join(build, "gst", "libgstcudaipc.so")):
        print(f"SKIP: no GStreamer plugin in {build}/gst: the documented pipelines cannot run")
        return 1 if problems else 77
    # In the reader's order, in one shell's environment carried from scenario to scenario; named
    # scenarios run with the setup lines the docs give before them.
    order = reading_order(root)
    named = [a for a in sys.argv[3:] if not a.startswith("-")]
    # --without=NAME: a scenario another run of this suite covers (the tool's, which no
    # GStreamer version changes, in CI's second GStreamer build).
    without = {a.split("=", 1)[1] for a in sys.argv[3:] if a.startswith("--without=")}
    wanted = [(n, at) for n, at in order
              if (not named or n in named or n == "setup") and n not in without]
    for n in sorted(without - set(SCENARIOS)):
        print(f"FAIL --without={n}: no such scenario")
        problems.append(f"--without={n}")
    print("\nin the order a reader meets them: " + ", ".join(f"{n} ({at})" for n, at in wanted))
    failed, passed, skipped = len(problems), 0, 0
    shell: Dict[str, str] = {}
    for name, _ in wanted:
        env = Env(root, build, shell)
        print(f"\n== {name}: {SCENARIOS[name].__doc__.split(chr(10))[0] if SCENARIOS[name].__doc__ else ''}",
              flush=True)
        start = time.monotonic()
        try:
            SCENARIOS[name](env)
            print(f"PASS {name} ({time.monotonic() - start:.1f} s)")
            passed += 1
        except Skip as e:
            print(f"SKIP {name}: {e}")
            skipped += 1
        except (Failed, subprocess.TimeoutExpired) as e:
            print(f"FAIL {name}: {e}")
            failed += 1
        finally:
            shell = env.shell
            env.close()
    print(f"\n{passed} passed, {failed} failed, {skipped} skipped (partly or wholly)")
    if failed:
        return 1
    return 0 if passed else 77


if __name__ == "__main__":
    sys.exit(main())
