"""What a bench's CPUs were like on this lease, printed beside its rows: the same code's per-call
rows have moved 3x from one GPU machine to the next (docs/benchmarks.md), and a row alone cannot
say whether the code or the machine moved.

- `yardstick()`: a fixed pure-Python loop's time per step on the calling thread's CPUs, the
  lease's own speed for what the model loop's calls are made of.
- `CpuTimes`: the CPUs' busy and steal shares (/proc/stat) between two snapshots: steal is time
  the hypervisor gave this guest's CPU to another, busy what ran there (ours included).
"""

import os
import time
from typing import Dict, Iterable, List, Optional


def yardstick(steps: int = 200_000, rounds: int = 5) -> float:
    """ns per step of a plain Python loop (an add and a compare), the best of `rounds`."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter_ns()
        x = 0
        for i in range(steps):
            x += i
        best = min(best, (time.perf_counter_ns() - t) / steps)
    return best


def _read_stat() -> Dict[int, List[int]]:
    out: Dict[int, List[int]] = {}
    with open("/proc/stat") as f:
        for line in f:
            name, _, rest = line.partition(" ")
            if name.startswith("cpu") and name[3:].isdigit():
                out[int(name[3:])] = [int(v) for v in rest.split()]
    return out


class CpuTimes:
    """A /proc/stat snapshot of every CPU; `report(later, cpus)` the shares of `cpus` (all when
    None) between it and `later`."""

    def __init__(self) -> None:
        self.stat = _read_stat()

    def report(self, later: "CpuTimes", cpus: Optional[Iterable[int]] = None) -> str:
        chosen = sorted(cpus) if cpus else sorted(self.stat)
        total = busy = steal = 0
        for c in chosen:
            a, b = self.stat.get(c), later.stat.get(c)
            if not a or not b:
                continue
            d = [y - x for x, y in zip(a, b)]
            # user nice system idle iowait irq softirq steal (guest times are inside user)
            idle = d[3] + (d[4] if len(d) > 4 else 0)
            st = d[7] if len(d) > 7 else 0
            total += sum(d[:8])
            busy += sum(d[:8]) - idle - st
            steal += st
        if total <= 0:
            return f"CPUs {chosen}: no time counted"
        return f"CPUs {chosen}: busy {100 * busy / total:.0f} %, steal {100 * steal / total:.1f} %"


def describe_cpu() -> str:
    """The CPU's model name and this process's CPU count."""
    name = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name}, {len(os.sched_getaffinity(0))} CPUs here"
