"""A bounded, seeded run of ``bench.fuzz``: every request schema kemu serves (each API key and
version it advertises), valid requests generated from the schemas, then flipped, truncated,
extended, given bad lengths and varints, against an in-process kemu. No frame may make a handler
raise, the connection code fail, a task hang, or the server stop answering.

``KEMU_FUZZ_FRAMES`` and ``KEMU_FUZZ_SEED`` run a longer or another sequence; the published
figures (``docs/reliability.md``) come from ``python -m bench.fuzz``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/ is not an installed package

from bench.fuzz import MUTATIONS, fuzz, print_report


async def test_no_frame_crashes_a_handler_or_the_connection(tmp_path: Path) -> None:
    frames = int(os.environ.get("KEMU_FUZZ_FRAMES", "3000"))
    report = await fuzz(
        frames, int(os.environ.get("KEMU_FUZZ_SEED", "20261202")), data_dir=tmp_path
    )
    lines: list[str] = []
    print_report(report, lines.append)
    print("\n".join(lines))
    assert report.frames == frames
    assert report.crashes == [], "\n".join(lines)
    # every (key, version) kemu serves got frames, and every kind of mutation was tried
    assert len(report.per_version) >= 262
    assert set(report.per_mutation) == set(MUTATIONS)
