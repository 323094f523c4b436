"""Start-up configs Apache Kafka 4.4.0 refuses or reads differently, and kemu the same way (the
one-line refusals of ``kemu serve`` itself are in test_startup_errors.py)."""

from __future__ import annotations

from kemu.cli import _parser
from kemu.protocol.versions import CURRENT_RELEASE, KAFKA_RELEASES, release_caps


def test_as_version_accepts_the_current_release_as_the_default_advertisement() -> None:
    args = _parser().parse_args(["serve", "--as-version", "4.4"])
    assert args.as_version == CURRENT_RELEASE == "4.4"
    assert release_caps("4.4") is None  # kemu's own ranges, as without --as-version
    assert release_caps(None) is None
    assert release_caps("4.3") == KAFKA_RELEASES["4.3"]
