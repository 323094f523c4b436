"""Kafka 4.4 versions that kio 0.6.5 (Kafka 4.2's message set) does not have: hand-written
kio-style classes in the shape kio generates, so kio's reader and writer (and kemu's
``wire.build``) handle them unchanged. Unchanged nested structs are the previous version's.

- ApiVersions v5 (KIP-1242): the request adds a nullable ``ClusterId`` and an int32 ``NodeId``
  (default -1), the cluster and node the client means to reach; the response is v4's.
- TxnOffsetCommit v6 (KIP-1319): topics are named by ``TopicId`` (uuid) instead of ``Name``, in
  the request and the response; the request's generation field is Kafka's
  ``GenerationIdOrMemberEpoch`` (kio's ``generation_id``, same place and type).
- DeleteGroups v3: the request is v2's; each result adds a nullable ``ErrorMessage``.

Field definitions: Kafka 4.4.0's clients/src/main/resources/common/message/*.json.
"""

from __future__ import annotations

from typing import Any

from kemu.protocol.kafka44 import (
    api_versions_request,
    api_versions_response,
    delete_groups_request,
    delete_groups_response,
    txn_offset_commit_request,
    txn_offset_commit_response,
)

API_VERSIONS_KEY = 18
TXN_OFFSET_COMMIT_KEY = 28
DELETE_GROUPS_KEY = 42

SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (API_VERSIONS_KEY, 5): (
        api_versions_request.ApiVersionsRequest,
        api_versions_response.ApiVersionsResponse,
    ),
    (TXN_OFFSET_COMMIT_KEY, 6): (
        txn_offset_commit_request.TxnOffsetCommitRequest,
        txn_offset_commit_response.TxnOffsetCommitResponse,
    ),
    (DELETE_GROUPS_KEY, 3): (
        delete_groups_request.DeleteGroupsRequest,
        delete_groups_response.DeleteGroupsResponse,
    ),
}
