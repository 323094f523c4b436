"""Why kemu's codec is kio: the API keys and versions each candidate defines, and the cost of
decoding one request with each (``python -m bench.codec_choice``; ARCHITECTURE.md, "The codec").

The candidates are kio (what kemu uses) and aiokafka's protocol package, which kemu's founding
design named ("kafka-protocol via aiokafka internals"). Decoding is timed on versions both have.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import timeit
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import aiokafka
import aiokafka.protocol
from aiokafka.protocol.metadata import MetadataRequest_v5
from aiokafka.protocol.produce import ProduceRequest_v8
from kio.schema.index import api_key_map, schema_name_map

from kemu.protocol import wire

REPEAT = 5
NUMBER = 20_000


def aiokafka_versions() -> dict[int, set[int]]:
    """API key -> request versions defined by aiokafka's protocol package (its ``Xxx_vN``)."""
    found: dict[int, set[int]] = defaultdict(set)
    for info in pkgutil.iter_modules(aiokafka.protocol.__path__):
        module = importlib.import_module(f"aiokafka.protocol.{info.name}")
        for name, value in vars(module).items():
            match = re.fullmatch(r"\w+Request_v(\d+)", name)
            if match and isinstance(getattr(value, "API_KEY", None), int):
                found[value.API_KEY].add(int(match.group(1)))
    return found


def best_microseconds(call: Callable[[], Any]) -> float:
    return min(timeit.repeat(call, number=NUMBER, repeat=REPEAT)) / NUMBER * 1e6


def main() -> None:
    theirs = aiokafka_versions()
    kio_versions = sum(len(versions) for versions in schema_name_map.values())
    print(
        f"aiokafka {aiokafka.__version__}: {len(theirs)} API keys, "
        f"{sum(map(len, theirs.values()))} request versions, highest key {max(theirs)}"
    )
    print(
        f"kio: {len(api_key_map)} API keys, {kio_versions} versions, highest key {max(api_key_map)}"
    )
    batch = b"\x00" * 1024
    topics = [(f"topic-{t}", [(p, batch) for p in range(3)]) for t in range(2)]
    cases = [
        (
            "Produce v8, 2 topics x 3 partitions x 1 KiB",
            ProduceRequest_v8,
            ProduceRequest_v8(None, -1, 1000, topics).encode(),
            0,
            8,
        ),
        (
            "Metadata v5, 10 topics",
            MetadataRequest_v5,
            MetadataRequest_v5([f"topic-{t}" for t in range(10)], True).encode(),
            3,
            5,
        ),
    ]
    for label, their_class, raw, api_key, version in cases:
        read = wire._reader(wire.request_schema(api_key, version))
        ours = best_microseconds(lambda read=read, raw=raw: read(raw, 0))
        other = best_microseconds(lambda cls=their_class, raw=raw: cls.decode(raw))
        print(f"{label}: kio {ours:.1f} us, aiokafka {other:.1f} us per request body")


if __name__ == "__main__":
    main()
