"""What one request costs: CPU seconds and the growth of peak resident memory, measured in a forked child.

The child is a copy of the caller at the moment of the call (Django set up, the test's database connection and
transaction, whose socket the parent leaves alone until the child is done), so the request sees the test's
data. Its CPU time starts at zero, and its peak RSS is reset (Linux's /proc/self/clear_refs) before the request
runs: the figures are the request's own, whatever the parent did before. Not wall-clock time, which a shared
machine makes meaningless.
"""

import gc
import os
import pickle
import resource
import traceback
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Cost:
    cpu_seconds: float
    peak_mb: float  # growth of the peak resident set over what the process held when the request began
    written_mb: float  # bytes the process wrote (files, sockets, pipes: /proc/self/io's wchar)
    result: object


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field))
    return int(line.split()[1])


def _written() -> int:
    with open("/proc/self/io") as io:
        return int(next(line for line in io if line.startswith("wchar:")).split()[1])


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _measured(action) -> tuple:
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # resets the peak resident set to the current one
    base_kb, start, written = _status_kb("VmRSS:"), _cpu(), _written()
    result = action()
    return _cpu() - start, (_status_kb("VmHWM:") - base_kb) / 1024, (_written() - written) / 2**20, result


def cost_of(action) -> Cost:
    """Run `action()` (whose result must pickle) in a forked child and return what it cost."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads: the child uses none of theirs
        pid = os.fork()
    if pid == 0:  # the child: measure, report, and leave without any cleanup of the parent's state
        os.close(read)
        try:
            payload = pickle.dumps(("ok", _measured(action)))
        except BaseException:  # reported to the parent, which raises it
            payload = pickle.dumps(("error", traceback.format_exc()))
        with os.fdopen(write, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as report:
        data = report.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind == "error":
        raise AssertionError(f"the measured request raised:\n{value}")
    return Cost(*value)
