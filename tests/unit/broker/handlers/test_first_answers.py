"""The first Metadata, Produce and Fetch answers of an older version build from that version's
schema alone: a field given that the version lacks made ``wire.build`` check its name in the
other versions' schemas, ~10-15 ms of imports that the first request of each waited for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

# A fresh interpreter: other tests import schema versions. Prints the modules the answers loaded.
PROBE = """
import datetime, json, sys
from kemu.protocol.records import build_batch
from kemu.testing.harness import HandlerHarness
broker = HandlerHarness(brokers=1)
broker.cluster.create_topic("t", 1, 1)
schemas = lambda: {m for m in sys.modules if m.startswith("kio.schema.")}
topics = broker.nested(3, 12, "MetadataRequestTopic", name="t")
requests = [
    broker.request(3, 12, topics=(topics,), allow_auto_topic_creation=False),
    broker.request(0, 9, acks=1, timeout=datetime.timedelta(seconds=1), topic_data=(
        broker.nested(0, 9, "TopicProduceData", name="t", partition_data=(
            broker.nested(0, 9, "PartitionProduceData", index=0,
                          records=build_batch([(b"k", b"v")], timestamp_ms=1)),
        )),
    )),
    broker.request(1, 12, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                   forgotten_topics_data=(), topics=(
        broker.nested(1, 12, "FetchTopic", topic="t", partitions=(
            broker.nested(1, 12, "FetchPartition", partition=0, current_leader_epoch=-1,
                          fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                          partition_max_bytes=1 << 20),
        )),
    )),
]
before = schemas()
answers = [broker.send_body_now(body) for body in requests]
print(json.dumps({
    "loaded": sorted(schemas() - before),
    "records": len(answers[2].responses[0].partitions[0].records or b""),
}))
"""


def test_older_versions_answer_without_other_versions_schemas() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["records"] > 0  # the fetch did read what the produce wrote
    # kio.schema.<api>.v<N>[.request|.response]: each api at the version asked only
    versions = {".".join(m.split(".")[2:4]) for m in result["loaded"] if m.count(".") >= 3}
    assert versions <= {"metadata.v12", "produce.v9", "fetch.v12"}, versions
