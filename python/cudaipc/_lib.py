"""The core's C API (core/include/cudaipc/cudaipc.h) as the package reaches it: the compiled binding
``native`` (python/native), the one binding of the core. Its calls check their arguments, raise the
package's exceptions for the core's statuses, and let the GIL go where the core may wait; the
DLPack capsule calls keep it (the binding gave the core CPython's capsule functions when it loaded,
and the core lets the GIL go itself while a publish waits for a slot). Here: the core's constants
and the binding's loading."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

from . import _errors

MAX_RANK = 8
MAX_PLANES = 4
NO_TIME = (1 << 64) - 1

MEMORY_HOST, MEMORY_CUDA = 1, 2
MAX_SLOTS = 32  # CUDAIPC_MAX_SLOTS
ROLE_FRAMES, ROLE_REQUESTS = 1, 2  # cudaipc_role
EVERY_FRAME, LATEST = 0, 1
BLOCK, DROP = 0, 1
PUBLISHED, DROPPED, TIMED_OUT, INTERRUPTED_PUBLISH, NEEDS_FORMAT = 0, 1, 2, 3, 4
# Flags of the DLPack calls, and the DLPack device types.
DLPACK_VERSIONED, DLPACK_NO_SYNC, DLPACK_READ_ONLY = 1, 2, 4
DL_CPU, DL_CUDA, DL_CUDA_HOST = 1, 2, 3
(EVENT_FRAME, EVENT_FORMAT, EVENT_EOS, EVENT_TIMEOUT, EVENT_INTERRUPTED,
 EVENT_DISCONNECTED) = range(6)


def _load_native() -> types.ModuleType:
    """The compiled binding: the package's own, or the build CUDAIPC_NATIVE names (a developer's
    build directory's python/native/_native*.so, for the package run from the source tree)."""
    path = os.environ.get("CUDAIPC_NATIVE")
    if not path:
        try:
            from . import _native
        except ImportError as e:
            raise ImportError(f"cudaipc: its compiled binding cudaipc._native is missing or does "
                              f"not load ({e}); reinstall the package (pip install builds it for "
                              f"the Python that runs pip)") from e
        return _native
    spec = importlib.util.spec_from_file_location("cudaipc._native", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cudaipc: CUDAIPC_NATIVE={path} is not a Python extension")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["cudaipc._native"] = mod
    spec.loader.exec_module(mod)
    return mod


native = _load_native()


# Raises the package's exception for a C API status (nonzero), with the core's message after the
# context: check(status, context="").
check = native.check


# What the core's capsule calls raise (the binding installs CPython's capsule functions in the core
# when it loads); callers turn it into the package's exception for cudaipc_last_error_code().
CapsuleFailed = native.CapsuleFailed


frame_capsule = native.frame_capsule


def capsule_error(e: CapsuleFailed) -> _errors.Error:
    """The package's exception for a failed capsule call."""
    return _errors.from_code(native.last_error_code(), str(e))
