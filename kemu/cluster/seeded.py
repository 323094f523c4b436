"""The one seeded source of every random choice kemu makes, so a run can be replayed.

``kemu serve --seed N`` seeds it (without the flag a seed is drawn from the OS and logged at
start-up); topic ids, the cluster id, group member ids, telemetry instance ids, fetch-session
ids and fault rules' fractions all come from it. What must stay unpredictable does not: SCRAM
salts and nonces use ``secrets``, since a seed anyone can read would make them guessable.
"""

from __future__ import annotations

import os
import random
import uuid

_source = random.Random()
_seed = 0


def reseed(seed: int | None = None) -> int:
    """Seed the source (a fresh seed from the OS when ``seed`` is None); returns the seed."""
    global _seed
    _seed = int.from_bytes(os.urandom(8), "big") >> 1 if seed is None else seed
    _source.seed(_seed)
    return _seed


def current_seed() -> int:
    return _seed


def new_uuid() -> uuid.UUID:
    """A version-4 UUID drawn from the seeded source."""
    return uuid.UUID(int=_source.getrandbits(128), version=4)


def derived_random() -> random.Random:
    """A generator of its own, seeded from the source (one per fault table, session cache)."""
    return random.Random(_source.getrandbits(64))


reseed()
