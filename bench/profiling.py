"""Sample kemu with py-spy while one phase of the workload runs.

Profiles are written in py-spy's collapsed-stack format (``raw``), which ``summarize`` turns into
the top functions by own and by total samples; ``py-spy`` can also render them as flame graphs.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def py_spy() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


@contextlib.contextmanager
def recording(pid: int, output: Path, rate: int = 250) -> Iterator[None]:
    binary = py_spy()
    if binary is None:
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    output.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [
            binary,
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(rate),
            # KEMU_PROFILE_NATIVE=1 adds C frames; py-spy must pause the process for those.
            *(["--native"] if os.environ.get("KEMU_PROFILE_NATIVE") else ["--nonblocking"]),
            "--format",
            "raw",
            "--output",
            str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def summarize(path: Path, top: int = 25) -> str:
    """Top frames by own samples and by total (inclusive) samples."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        samples += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    if not samples:
        return f"{path}: no samples"
    out = [f"{path}: {samples} samples", "", "own%   function"]
    out += [f"{100 * n / samples:5.1f}  {frame}" for frame, n in own.most_common(top)]
    out += ["", "total% function"]
    out += [f"{100 * n / samples:5.1f}  {frame}" for frame, n in total.most_common(top)]
    return "\n".join(out)


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        print(summarize(Path(argument)))
