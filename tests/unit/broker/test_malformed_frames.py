"""A bounded, seeded run of ``bench.fuzz``: every request schema kemu serves (each API key and
version it advertises), valid requests generated from the schemas, then flipped, truncated,
extended, given bad lengths and varints, against an in-process kemu. No frame may make a handler
raise, the connection code fail, a task hang, or the server stop answering. The same holds for
SASL exchanges (``--sasl``) and for the contents of produced record batches (``--records``).

``KEMU_FUZZ_FRAMES`` and ``KEMU_FUZZ_SEED`` run a longer or another sequence; the published
figures (``docs/reliability.md``) come from ``python -m bench.fuzz``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # bench/ is not an installed package

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


async def test_no_sasl_exchange_crashes_the_pre_authentication_path(tmp_path: Path) -> None:
    """SaslHandshake/SaslAuthenticate (v0 raw tokens included) with mutated PLAIN, SCRAM and
    OAUTHBEARER steps, KIP-368 re-authentication and expiry, on SASL_PLAINTEXT and, through
    real TLS sockets, SASL_SSL (``bench/fuzz_sasl.py``; ``KEMU_FUZZ_SASL`` connections)."""
    from bench.fuzz_sasl import fuzz_sasl, print_sasl_report

    connections = int(os.environ.get("KEMU_FUZZ_SASL", "150"))
    report = await fuzz_sasl(
        connections, int(os.environ.get("KEMU_FUZZ_SEED", "20261202")), data_dir=tmp_path
    )
    lines: list[str] = []
    print_sasl_report(report, lines.append)
    print("\n".join(lines))
    assert report.connections == connections
    assert report.crashes == [], "\n".join(lines)
    # the exchanges reach every end: success, refusal, expiry and re-authentication
    assert report.outcomes["authenticated"] > 0
    assert any("authentication error 58" in outcome for outcome in report.outcomes)
    assert set(report.per_mechanism) >= {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}


async def test_no_record_batch_content_crashes_produce_or_the_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Produce with validly framed batches around mutated records, compressed payloads and
    decompression bombs (``bench/fuzz_records.py``; ``KEMU_FUZZ_RECORDS`` requests). The
    decompression bound is lowered to 4 MiB so that 8 MiB bombs reach it in little time."""
    from bench.fuzz_records import fuzz_records, print_record_report
    from kemu.protocol import record_reader

    monkeypatch.setattr(record_reader, "MAX_DECOMPRESSED_BATCH_BYTES", 4 << 20)
    produces = int(os.environ.get("KEMU_FUZZ_RECORDS", "150"))
    report = await fuzz_records(
        produces,
        int(os.environ.get("KEMU_FUZZ_SEED", "20261202")),
        data_dir=tmp_path,
        bomb_mib=(1, 8),
    )
    lines: list[str] = []
    print_record_report(report, lines.append)
    print("\n".join(lines))
    assert report.produces == produces
    assert report.crashes == [], "\n".join(lines)
    # what a client cannot read is refused, but for a record whose inner lengths lie on a topic
    # that is not compacted (kemu walks only the records' lengths there)
    assert all(
        mutation == "record" and topic != "rec-compact"
        for mutation, topic, _ in report.accepted_unreadable
    ), "\n".join(lines)
    assert report.answers[("bomb", "INVALID_RECORD")] > 0  # beyond the bound
    assert report.answers[("unreadable", "CORRUPT_MESSAGE")] > 0
