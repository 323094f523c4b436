"""``kemu serve --seed N``: two kemus started with one seed make the same random choices.

Checked through what a client sees: the cluster id (Metadata) and the id of a topic created by
CreateTopics are the same on both; a third kemu on another seed differs. The seed a run used is
logged in its ``started`` line, so any run can be replayed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]

TIMEOUT = 30.0


def ids(kemu: KemuProcess) -> tuple[str, str]:
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(TIMEOUT)
    metadata = admin.list_topics(timeout=TIMEOUT)
    described = admin.describe_topics(TopicCollection(["orders"]))["orders"].result(TIMEOUT)
    return str(metadata.cluster_id), str(described.topic_id)


def test_one_seed_gives_the_same_ids(kemu_factory: type[KemuProcess], tmp_path: Path) -> None:
    runs = []
    for index, seed in enumerate(("5", "5", "6")):
        log = tmp_path / f"kemu-{index}.log"
        kemu = kemu_factory(brokers=1, extra_args=["--seed", seed], log_path=log).start()
        try:
            runs.append(ids(kemu))
        finally:
            kemu.stop()
        started = [line for line in log.read_text().splitlines() if "[info     ] started" in line]
        assert started and started[0].endswith(f" seed={seed}"), started
    assert runs[0] == runs[1]
    assert runs[2][0] != runs[0][0] and runs[2][1] != runs[0][1]
