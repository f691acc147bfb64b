#!/bin/sh
# The cudaipc tool on CUDA channels (issue #21), for the GPU machine: pub in GPU memory, ls shows
# the memory and device, cat downloads frames that match the pattern for their index, probe
# reads them. Usage: tests/cli/gpu_cli.sh BUILD/core/cli/cudaipc
# Exit status: 0 passed, 1 failed, 77 no GPU here (meson's "skipped").
set -u
tool=${1:?usage: gpu_cli.sh PATH-TO-cudaipc}
dir=$(mktemp -d /tmp/cudaipc-gpu-cli-XXXXXX)
pub_pid=
cleanup() {
  [ -n "$pub_pid" ] && kill "$pub_pid" 2>/dev/null && wait "$pub_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "gpu_cli: FAIL: $*" >&2; exit 1; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_cli: skipped: no NVIDIA GPU here (nvidia-smi -L fails)"
  exit 77
fi

"$tool" pub "$dir/cam" --caps "video/x-raw,format=RGBA,width=320,height=240" --memory cuda \
  --rate 60 >"$dir/pub.log" 2>&1 &
pub_pid=$!
for _ in $(seq 100); do grep -q publishing "$dir/pub.log" && break; sleep 0.1; done
grep -q publishing "$dir/pub.log" || fail "pub --memory cuda did not start: $(cat "$dir/pub.log")"

timeout 20 "$tool" ls --json --interval 1 "$dir/cam" >"$dir/ls.json" || fail "ls: $(cat "$dir/ls.json")"
python3 - "$dir/ls.json" <<'PY' || fail "ls --json of a CUDA channel"
import json, sys
c = json.load(open(sys.argv[1]))["channels"][0]
assert c["state"] == "live", c
assert c["memory"] == "cuda" and c["export"] in ("vmm", "legacy") and c["device"] >= 0, c
assert 40 <= c["frames_per_second"] <= 80, c["frames_per_second"]
print("gpu_cli: ls ok:", c["memory"], c["export"], "device", c["device"], round(c["frames_per_second"], 1), "frames/s")
PY

timeout 30 "$tool" cat "$dir/cam" --frames 3 --out "$dir/out" >"$dir/cat.log" 2>&1 ||
  fail "cat: $(cat "$dir/cat.log")"
python3 - "$dir/out" <<'PY' || fail "cat's downloaded frames differ from the pattern"
import glob, os, struct, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "frame-*.npy")))
assert len(files) == 3, files
for f in files:
    seq = int(os.path.basename(f)[6:-4])
    raw = open(f, "rb").read()
    hlen = struct.unpack("<H", raw[8:10])[0]
    assert b"(240, 320, 4)" in raw[10:10 + hlen], raw[10:10 + hlen]
    data = raw[10 + hlen:]
    assert len(data) == 240 * 320 * 4
    want = bytes(((seq >> (8 * i)) & 0xff) if i < 8 else ((seq + i) & 0xff) for i in range(len(data)))
    assert data == want, "frame %d differs" % seq
print("gpu_cli: cat ok:", len(files), "frames downloaded and checked")
PY

timeout 20 "$tool" probe "$dir/cam" --seconds 2 --json >"$dir/probe.json" 2>&1 ||
  fail "probe: $(cat "$dir/probe.json")"
python3 - "$dir/probe.json" <<'PY' || fail "probe of a CUDA channel"
import json, sys
j = json.load(open(sys.argv[1]))
assert 40 <= j["frames_per_second"] <= 80, j
print("gpu_cli: probe ok:", round(j["frames_per_second"], 1), "frames/s, p50", j["latency_p50_us"], "us")
PY
echo "gpu_cli: passed"
