"""Maximum API versions per Apache Kafka release, for ``--as-version``.

Read off the ApiVersions responses of real brokers of each release (max version per api key) and
kept as data in ``kafka_releases.json`` beside this module: one release per line, api key ->
max version. A key absent from a release is not advertised when mimicking it.
"""

from __future__ import annotations

import json
from pathlib import Path


def _load(path: Path) -> dict[str, dict[int, int]]:
    raw: dict[str, dict[str, int]] = json.loads(path.read_text())
    return {
        release: {int(key): version for key, version in caps.items()}
        for release, caps in raw.items()
    }


KAFKA_RELEASES: dict[str, dict[int, int]] = _load(Path(__file__).with_name("kafka_releases.json"))

# The release kemu's own ranges follow: ``--as-version 4.4`` is the default advertisement.
CURRENT_RELEASE = "4.4"


def caps_for_release(release: str) -> dict[int, int]:
    return dict(KAFKA_RELEASES[release])


def release_caps(release: str | None) -> dict[int, int] | None:
    """``--as-version``'s caps: None (kemu's own ranges) when no release or CURRENT_RELEASE."""
    if release is None or release == CURRENT_RELEASE:
        return None
    return caps_for_release(release)
