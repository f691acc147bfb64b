"""Issue #38: cudaipc's elements inside an application never take the process down.

Runs each element in an application process whose C++ runtime and unwinder were loaded the way a
Python application loads them (NumPy or torch before PyGObject; see embed_app.c), through the
paths that fail, wait and reconnect: sink, source and filter with and without their peer, the peer
SIGKILLed and restarted, bad paths. Every case must end with the application exiting 0 and the
pipeline's outcome (EOS or a named error) the case expects, every frame intact.

  embedded.py c               the C application (any GStreamer: it loads GStreamer by dlopen)
  embedded.py python MODULE   the PyGObject application with MODULE imported first
                              (CUDAIPC_GI_PYTHON: a Python with gi and NumPy)
Programs from the environment: CUDAIPC_EMBED_APP (the C application), CUDAIPC_GST_MP_PEER,
CUDAIPC_GST_FILTER_MODEL, and GST_PLUGIN_PATH_1_0 and friends as the other suites set them.
Exit 0: every case passed; 1: one failed; 77: the application cannot run here (says why).
"""
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CAPS = "video/x-raw,format=GRAY8,width=64,height=48,framerate=100/1"
APPSRC = f"appsrc name=src format=time caps={CAPS}"
CHECK = "fakesink name=check signal-handoffs=true sync=false"
PRINT_LOCK = threading.Lock()


def skip(why: str) -> None:
    print(f"SKIP: {why}")
    sys.exit(77)


class Peer:
    """A peer process (producer, consumer, model) whose output is kept and can be waited on."""

    def __init__(self, argv):
        self.argv = argv
        self.lines = []
        self.killed = False
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_for(self, prefix: str, seconds: float = 10) -> bool:
        end = time.monotonic() + seconds
        with self.cond:
            while not any(line.startswith(prefix) for line in self.lines):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.1))
        return True

    def kill(self):
        self.killed = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def producer(path, *extra):
    return [os.environ["CUDAIPC_GST_MP_PEER"], "produce", "--socket", path, "--timeout-s", "30",
            *extra]


def consumer(path, *extra):
    return [os.environ["CUDAIPC_GST_MP_PEER"], "consume", "--socket", path, "--timeout-s", "30",
            *extra]


def launch(description):
    return [os.environ.get("CUDAIPC_GST_LAUNCH", "gst-launch-1.0"), *description.split()]


def model(path):
    return [os.environ["CUDAIPC_GST_FILTER_MODEL"], "--socket", path, "--timeout-s", "30"]


# name: (pipeline, app arguments, plan, expected outcome prefix, least frames checked[, what the
# bus says: message prefixes in order])
# A plan is a list of (seconds after the application started, action, argv-maker or None);
# "before" peers start (and say they are ready) before the application does; ("once", PREFIX) acts
# once the last peer printed a line starting with PREFIX: a kill meant to land mid-stream waits for
# the stream, since an application whose start is slow (its imports, a registry scan on a loaded
# machine) began streaming after a kill timed from its start, and met only the second peer.
def cases(d):
    long_name = "x" * 120
    return {
        "filter-no-model": (
            f"{APPSRC} ! cudaipcfilter socket-path={d}/nomodel ipc-mode=host ! {CHECK}",
            ["--count", "30"], [], "eos", 30),
        "filter-model": (
            f"{APPSRC} ! cudaipcfilter socket-path={d}/m1 ipc-mode=host ! {CHECK}",
            ["--count", "60"], [("before", "serving", model(f"{d}/m1"))], "eos", 60),
        "filter-model-killed-and-back": (
            f"{APPSRC} ! cudaipcfilter name=filter socket-path={d}/m2 ipc-mode=host ! {CHECK}",
            ["--count", "250"],
            [("before", "serving", model(f"{d}/m2")), (("once", "reply id=10 "), "kill", None),
             (1.3, "start", model(f"{d}/m2"))], "eos", 250,
            ["message info: A model process serves this pipeline",
             "message element: filter: cudaipcfilter-model, event=(string)serving",
             "message info: The model process left (the producer's process ended without "
             "closing the channel)",
             "message element: filter: cudaipcfilter-model, event=(string)left",
             "message info: A model process serves",
             "message element: filter: cudaipcfilter-model, event=(string)serving"]),
        "filter-typo": (
            f"{APPSRC} ! cudaipcfilter socket-path={d}/detector ipc-mode=host ! {CHECK}",
            ["--count", "400"], [("before", "serving", model(f"{d}/detectr"))], "eos", 400,
            [f"message warning: No model process serves {d}/detector: frames go on without "
             "results (on-missing=pass)"]),
        "filter-path-too-long": (
            f"{APPSRC} ! cudaipcfilter socket-path={d}/{long_name} ipc-mode=host ! {CHECK}",
            [], [], "error", 0),
        "filter-missing-directory": (
            f"{APPSRC} ! cudaipcfilter socket-path={d}/missing/f ipc-mode=host ! {CHECK}",
            [], [], "error", 0),
        "src-before-producer": (
            f"cudaipcsrc socket-path={d}/late mode=every-frame ! {CHECK}", [],
            [(1.0, "start", producer(f"{d}/late", "--count", "30", "--wait-for-consumer"))],
            "eos", 30),
        "src-producer-killed-reconnect": (
            f"cudaipcsrc socket-path={d}/p1 mode=every-frame reconnect=true ! {CHECK}", [],
            [("before", "listening", producer(f"{d}/p1", "--count", "100000", "--fps", "100")),
             (1.0, "kill", None),
             (1.5, "start", producer(f"{d}/p1", "--count", "30", "--first-id", "1000000",
                                     "--wait-for-consumer"))], "eos", 31),
        "src-producer-killed": (
            f"cudaipcsrc socket-path={d}/p2 reconnect=false ! {CHECK}", [],
            [("before", "listening", producer(f"{d}/p2", "--count", "100000", "--fps", "100")),
             (1.0, "kill", None)],
            f"error: The producer on {d}/p2 went away (the producer's process ended without "
            "closing the channel) and reconnect is off.", 1),
        "src-producer-stopped-cleanly": (
            # videotestsrc's frames carry no id: this case is about the reason alone.
            f"cudaipcsrc socket-path={d}/p4 reconnect=false ! fakesink", [],
            [("before", "Setting pipeline to PLAYING", launch(
                f"videotestsrc is-live=true ! {CAPS} ! cudaipcsink ipc-mode=host "
                f"socket-path={d}/p4")), (1.0, "int", None)],
            f"error: The producer on {d}/p4 went away (the producer closed the channel: its "
            "pipeline stopped) and reconnect is off.", 0),
        "src-producer-stopped-then-continued": (
            f"cudaipcsrc socket-path={d}/p3 mode=every-frame ! {CHECK}", [],
            [("before", "listening", producer(f"{d}/p3", "--count", "30", "--wait-for-consumer")),
             ("before", "stop", None), (4.0, "cont", None)], "eos", 30,
            [f"message warning: The producer on {d}/p3 does not serve this source yet; retrying: "
             f"nothing on '{d}/p3' answered the cudaipc handshake"]),
        "src-connect-timeout": (
            f"cudaipcsrc socket-path={d}/nobody connect-timeout=300000000 ! {CHECK}", [], [],
            "error", 0),
        "src-regular-file": (
            f"cudaipcsrc socket-path={d}/regular-file ! {CHECK}", [], [], "error", 0),
        "src-path-too-long": (
            f"cudaipcsrc socket-path={d}/{long_name} ! {CHECK}", [], [], "error", 0),
        "src-missing-directory": (
            f"cudaipcsrc socket-path={d}/missing/s connect-timeout=300000000 ! {CHECK}", [], [], "error", 0),
        "src-missing-directory-says-why": (
            f"cudaipcsrc socket-path={d}/missing/s2 ! {CHECK}", ["--timeout-s", "2.5"], [],
            "timeout", 0,
            [f"message info: Waiting for a cudaipc producer on {d}/missing/s2 (connect-timeout=0: "
             f"until one starts there). Its directory {d}/missing does not exist"]),
        "sink-consumer-killed-and-back": (
            f"{APPSRC} ! cudaipcsink name=sink socket-path={d}/s1 ipc-mode=host "
            "wait-for-consumer=true",
            ["--count", "250"],
            [(0.0, "start", consumer(f"{d}/s1", "--verbose")),
             (("once", "frame seq=10 "), "kill", None),
             (1.2, "start", consumer(f"{d}/s1"))], "eos", 0,
            ["message element: sink: cudaipcsink-consumer, event=(string)joined",
             "message element: sink: cudaipcsink-consumer, event=(string)left",
             "message element: sink: cudaipcsink-consumer, event=(string)joined"]),
        "sink-busy": (
            f"{APPSRC} ! cudaipcsink socket-path={d}/busy ipc-mode=host", [],
            [("before", "listening", producer(f"{d}/busy", "--count", "100000", "--fps", "50"))],
            f"error: Another cudaipc producer is live on {d}/busy. Stop it or choose another "
            "socket-path.", 0),
        "sink-path-too-long": (
            f"{APPSRC} ! cudaipcsink socket-path={d}/{long_name} ipc-mode=host", [], [], "error", 0),
        "sink-missing-directory": (
            f"{APPSRC} ! cudaipcsink socket-path={d}/missing/s ipc-mode=host", [], [], "error", 0),
    }


def run_case(app_argv, name, spec, d):
    pipeline, app_args, plan, expect, least = spec[:5]
    says = spec[5] if len(spec) > 5 else []
    peers = []
    try:
        for when, what, argv in plan:
            if when == "before" and what == "stop":
                peers[-1].proc.send_signal(signal.SIGSTOP)
            elif when == "before":
                p = Peer(argv)
                peers.append(p)
                if not p.wait_for(what):
                    return f"peer {argv[0]} never said '{what}': {p.lines[-5:]}"
        app = subprocess.Popen(app_argv + ["--pipeline", pipeline, "--timeout-s", "20"] + app_args,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        for when, what, argv in plan:
            if when == "before":
                continue
            if isinstance(when, tuple):
                last = peers[-1]
                if not last.wait_for(when[1], 20):
                    return f"peer {last.argv[0]} never said '{when[1]}': {last.lines[-5:]}"
            else:
                time.sleep(max(0.0, start + when - time.monotonic()))
            if what == "kill":
                peers[-1].kill()
            elif what == "cont":
                peers[-1].proc.send_signal(signal.SIGCONT)
            elif what == "int":  # gst-launch-1.0 sets its pipeline to NULL, without EOS
                peers[-1].proc.send_signal(signal.SIGINT)
            else:
                peers.append(Peer(argv))
        try:
            out, err = app.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            app.kill()
            out, err = app.communicate()
            return f"the application hung (killed after 40 s); stderr: {err[-800:]}"
        # A consumer peer checks the frames it got itself and ends at EOS with a summary.
        for p in peers:
            if p.argv[1] == "consume" and not p.killed:
                if not p.wait_for("summary ", 10):
                    return f"the consumer never ended: {p.lines[-3:]}"
                summary = next(line for line in p.lines if line.startswith("summary "))
                if '"bad":0,' not in summary or '"frames":0,' in summary:
                    return f"the consumer's frames: {summary}"
    finally:
        for p in peers:
            p.kill()
    lines = out.splitlines()
    tail = "\n    ".join((lines[-4:] if lines else []) + err.splitlines()[-6:])
    # A case that expects the pipeline still to be waiting when the application gives up (3).
    if app.returncode != (3 if expect == "timeout" else 0):
        how = (f"killed by signal {-app.returncode}" if app.returncode < 0
               else f"exit {app.returncode}")
        return f"the application {how}:\n    {tail}"
    held = next((float(l.split("=")[1]) for l in lines if l.startswith("set-state ms=")), -1)
    if not 0 <= held < 1000:
        return f"set_state(PLAYING) held the application's thread {held:.0f} ms"
    outcome = next((l[len("outcome "):] for l in lines if l.startswith("outcome ")), "")
    if not outcome.startswith(expect):
        return f"outcome '{outcome}', expected {expect}:\n    {tail}"
    # What the bus must have said, in this order.
    messages = [l for l in lines if l.startswith("message ")]
    at = 0
    for want in says:
        at = next((i + 1 for i in range(at, len(messages)) if messages[i].startswith(want)), -1)
        if at < 0:
            outcome = next((l for l in lines if l.startswith("outcome ")), "no outcome")
            frames = sum(l.startswith("frame ") for l in lines)
            return (f"the bus never said '{want}' (in order); it said: {messages}; {outcome}, "
                    f"{frames} frames")
    frames = [l for l in lines if l.startswith("frame ")]
    broken = [l for l in frames if " ok=1" not in l]
    if broken:
        return f"{len(broken)} frames not intact, first: {broken[0]}"
    if len(frames) < least:
        seen = {int(l.split("id=")[1].split(" ")[0]) for l in frames if "id=?" not in l}
        missing = sorted(set(range(least)) - seen)[:10] if expect.startswith("eos") else []
        refused = [l for l in lines if l.startswith("push-refused")][:5]
        return (f"{len(frames)} frames checked, expected at least {least}; missing ids "
                f"{missing}, refused pushes {refused}; stderr: {err[-500:]}")
    wrong = [l for l in frames if " result=" in l and
             l.split(" result=")[1] != l.split("id=")[1].split(" ")[0]]
    if wrong:
        return f"{len(wrong)} frames carry another frame's result, first: {wrong[0]}"
    results = sum(" result=" in l for l in frames)
    with PRINT_LOCK:  # cases run on several threads: one line each, whole
        print(f"ok   {name}: {outcome[:110]}; {len(frames)} frames intact"
              + (f", {results} with their own result" if results else ""), flush=True)
    return None


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("c", "python"):
        print(__doc__)
        return 2
    for var in ("CUDAIPC_GST_MP_PEER", "CUDAIPC_GST_FILTER_MODEL"):
        if not os.path.exists(os.environ.get(var, "")):
            skip(f"{var} does not name a built program")
    if sys.argv[1] == "c":
        app_argv = [os.environ.get("CUDAIPC_EMBED_APP", "")]
        if not os.path.exists(app_argv[0]):
            skip("CUDAIPC_EMBED_APP does not name the built C application")
    else:
        module = sys.argv[2] if len(sys.argv) > 2 else "numpy"
        py = os.environ.get("CUDAIPC_GI_PYTHON", "")
        if not py:
            skip("CUDAIPC_GI_PYTHON is not set (scripts/dev.sh test makes build/gi-venv: "
                 "the system's PyGObject with NumPy from pip)")
        probe = subprocess.run([py, "-c", f"import {module}, gi; gi.require_version('Gst', '1.0')"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            skip(f"{py} cannot import {module} and PyGObject's Gst: "
                 f"{probe.stderr.strip().splitlines()[-1:]}")
        app_argv = [py, os.path.join(HERE, "embed_app.py"), "--first", module]
    failed = 0
    only = sys.argv[3:] if sys.argv[1] == "python" else sys.argv[2:]
    with tempfile.TemporaryDirectory(prefix="cudaipc-embedded-") as d:
        open(os.path.join(d, "regular-file"), "w").close()
        chosen = {n: spec for n, spec in cases(d).items() if not only or n in only}
        # Each case has its own paths and processes: three at a time keeps the suite short while
        # every case's own timings (a kill at 0.8 s, a model back at 1.3 s) still hold.
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            runs = {n: pool.submit(run_case, app_argv, n, spec, d) for n, spec in chosen.items()}
            for name, run in runs.items():
                why = run.result()
                if why:
                    failed += 1
                    print(f"FAIL {name}: {why}", flush=True)
    print(f"{'FAILED' if failed else 'passed'}: {failed} of the cases failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
