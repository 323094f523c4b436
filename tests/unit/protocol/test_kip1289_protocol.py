"""KIP-1289 messages: kemu's own schemas go through the wire like kio's."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import uuid
from pathlib import Path
from typing import Any

from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.kip1289 import TXN_SHARE_ACKNOWLEDGE_KEY

KEY = TXN_SHARE_ACKNOWLEDGE_KEY
DEFINITIONS = Path(wire.__file__).parent / "kip1289"


def _definition(name: str) -> Any:
    text = (DEFINITIONS / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE))


def request() -> Any:
    module = wire.request_module(KEY, 0)
    batch = module.TxnShareAcknowledgeBatch(first_offset=3, last_offset=5, acknowledge_types=(1,))
    gap = module.TxnShareAcknowledgeBatch(first_offset=7, last_offset=8, acknowledge_types=(0, 3))
    return module.TxnShareAcknowledgeRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=42,
        producer_epoch=3,
        member_id="m",
        member_epoch=2,
        topics=(
            module.TxnShareAcknowledgeTopic(
                topic_id=uuid.uuid4(),
                partitions=(
                    module.TxnShareAcknowledgePartition(
                        partition_index=1, acknowledgement_batches=(batch, gap)
                    ),
                ),
            ),
        ),
    )


def test_request_round_trips_through_the_wire() -> None:
    body = request()
    frame = wire.encode_request_frame(body, correlation_id=7)
    decoded = wire.decode_request(frame[4:])
    assert decoded.header.api_key == KEY and decoded.header.correlation_id == 7
    assert decoded.body == body
    assert wire.api_name(KEY) == "txn_share_acknowledge"
    assert wire.known_versions(KEY) == (0, 0)


def test_null_transactional_id_decodes_as_none() -> None:
    body = request()
    nulled = dataclasses.replace(body, transactional_id=None)
    assert wire.decode_request(wire.encode_request_frame(nulled, 1)[4:]).body == nulled


def test_response_round_trips_and_builds_from_field_union() -> None:
    module = wire.response_module(KEY, 0)
    topic_id = uuid.uuid4()
    partition = wire.build(
        module.TxnShareAcknowledgePartitionResponse,
        partition_index=1,
        error_code=ErrorCode.invalid_record_state,
        error_message="not acquired",
    )
    body = wire.build(
        module.TxnShareAcknowledgeResponse,
        responses=(
            module.TxnShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=(partition,)),
        ),
    )
    assert body.error_code is ErrorCode.none and body.throttle_time == datetime.timedelta(0)
    frame = wire.encode_response_frame(KEY, 0, 9, body)
    correlation_id, decoded = wire.decode_response(KEY, 0, frame[4:])
    assert correlation_id == 9 and decoded == body


def test_dataclasses_follow_the_json_definitions() -> None:
    def names(fields: list[Any]) -> list[str]:
        return [re.sub(r"(?<!^)(?=[A-Z])", "_", f["name"]).lower() for f in fields]

    req = _definition("TxnShareAcknowledgeRequest")
    assert req["apiKey"] == KEY and req["validVersions"] == "0"
    body_fields = [f.name for f in dataclasses.fields(wire.request_schema(KEY, 0))]
    assert body_fields == names(req["fields"])
    resp = _definition("TxnShareAcknowledgeResponse")
    resp_fields = [f.name for f in dataclasses.fields(wire.response_schema(KEY, 0))]
    assert resp_fields == ["throttle_time", *names(resp["fields"])[1:]]
