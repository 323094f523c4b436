"""docs/configuration.md's "Share groups read from `latest`" runs as written against kemu: the
group config set on the GROUP resource makes the new share group read the record written
before it had a member. Without it the same steps read nothing of what was already there."""

from __future__ import annotations

import re
import threading
import uuid

import pytest
from confluent_kafka import Producer, ShareConsumer

from kemu.testing.inprocess import InProcessKemu
from tests import REPO_ROOT
from tests.integration.config.test_timing_fast import (
    SHARE_FETCH,
    answered,
    names_partitions,
    recorded,
)

pytestmark = pytest.mark.integration

PAGE = REPO_ROOT / "docs" / "configuration.md"


def snippet() -> str:
    text = PAGE.read_text()
    section = text[text.index("## Share groups read from `latest`") :]
    fence = r"```python run-by=tests/integration/share/test_share_latest_doc.py\n(.*?)```"
    match = re.search(fence, section, re.S)
    assert match is not None
    return match.group(1)


def test_the_documented_snippet_reads_the_record_written_before_it_joined(
    kemu_inprocess: InProcessKemu, capsys: pytest.CaptureFixture[str]
) -> None:
    code = snippet().replace('"localhost:9092"', repr(kemu_inprocess.bootstrap))
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            exec(compile(code, "configuration.md", "exec"), {})
        except BaseException as error:
            failure.append(error)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "the snippet never read its record"
    assert not failure, failure
    assert capsys.readouterr().out.strip() == "b'first order'"


def test_without_the_group_config_a_share_group_starts_at_latest(
    kemu_inprocess: InProcessKemu,
) -> None:
    """The record written before the member joined is not delivered; one written after the
    member's first ShareFetch of the partition was answered (empty) is."""
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kemu_inprocess.bootstrap})
    producer.produce(topic, b"before")
    assert producer.flush(10) == 0
    with recorded(kemu_inprocess) as proxy:
        consumer = ShareConsumer({"bootstrap.servers": proxy.bootstrap, "group.id": group})
        consumer.subscribe([topic])
        try:
            seen: list[bytes] = []
            for _ in range(150):  # a bound for failing
                seen += [m.value() for m in consumer.poll(0.2) if m.error() is None]
                if any(names_partitions(f) for f in answered(proxy, SHARE_FETCH)):
                    break
            producer.produce(topic, b"after")
            assert producer.flush(10) == 0
            for _ in range(150):
                seen += [m.value() for m in consumer.poll(0.2) if m.error() is None]
                if seen:
                    break
            assert seen == [b"after"]
        finally:
            consumer.close()
