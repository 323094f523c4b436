"""ApiVersions (key 18), v0-v5.

Advertises exactly the handlers registered in ``kemu.broker.handlers`` (capped by
``--as-version``), except that Produce is advertised from v0 as Kafka 4.x brokers do
(``ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION``, KAFKA-18659: older librdkafka needs a
v0 minimum) while v0-v2 requests are still refused, plus feature levels the way a Kafka 4.4.0
KRaft broker reports them: the supported ranges it advertises, ``metadata.version`` 33
(4.4-IV2), and finalized levels for what kemu really serves (``share.version`` needs the share
handlers, ``transaction.version`` 2 needs EndTxn v5, ``group.version`` needs
ConsumerGroupHeartbeat, ``streams.version`` 1 needs StreamsGroupHeartbeat).
``eligible.leader.replicas.version`` 1 and ``kraft.version`` 1 are finalized as a Kafka 4.4.0
formatted ``--standalone`` finalizes them. ELR is honoured trivially: kemu's replicas share one
log and stay in sync, so no ISR shrinks below ``min.insync.replicas`` and the ELR stays empty;
the controller's ELR config rules apply (``kemu.cluster.config_resources``). kraft.version 1
(a dynamic quorum) changes nothing a client does with kemu: DescribeQuorum describes kemu's
virtual single voter, and Add/RemoveRaftVoter are not served under either level.
With ``kemu.kip1289.enable`` ``share.version`` is supported up to 3 and
finalized at 3 (SV_3, KIP-1289) as long as TxnShareAcknowledge and
AddShareAcknowledgementsToTxn are advertised (at their configured keys) with transaction version
2; without it both keys are absent and share.version stays at 1 (spec §8).

v5 (KIP-1242) carries the cluster id and node id the client means to reach, checked as Kafka
4.4's KafkaApis does: one given without the other is INVALID_REQUEST; both given and either
not this broker's (its cluster id, the node id of the broker the connection reached) is
REBOOTSTRAP_REQUIRED, so a client whose address now points at another cluster or node
bootstraps again. Both answers carry the error alone, with no API list.

A request at a version newer than v5 is answered with a v0-encoded UNSUPPORTED_VERSION body
that still lists every API, which is how clients learn the range to retry with. Below v4 the
supported features whose range starts at 0 are left out, as Kafka 4.4 does (older clients could
not parse a 0 minimum, KAFKA-17011); finalized levels are listed at v3 and v4 alike.

Omissions: ``ZkMigrationReady`` is always false (kemu is "KRaft" only). kemu serves no
UpdateFeatures: finalized levels follow what is served and configured, a client cannot change
them (``share.version`` below 3 is ``kemu.kip1289.enable=false``).
"""

from __future__ import annotations

import struct
from typing import Any

from kemu.broker.handlers import REGISTRY, handler, is_enabled, wire_keys
from kemu.cluster.context import RequestContext, Runtime
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode
from kemu.protocol.kip1289 import (
    ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY,
    TXN_SHARE_ACKNOWLEDGE_KEY,
)
from kemu.protocol.views.api_versions import ApiVersionsRequestView

API_KEY = 18
METADATA_VERSION_MIN = 7  # 3.3-IV3, the oldest level a 4.x broker accepts
METADATA_VERSION = 33  # 4.4-IV2, Kafka 4.4.0's latest production level
FINALIZED_FEATURES_EPOCH = 1
# share.version 3 (SV_3): transactional share acknowledgements, KIP-1289 (spec §8)
SHARE_VERSION_TXN_ACKS = 3
KIP1289_KEYS = (TXN_SHARE_ACKNOWLEDGE_KEY, ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY)
PRODUCE_KEY = 0
# Kafka's ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION: a broker advertises Produce from v0.
PRODUCE_ADVERTISED_MIN_VERSION = 0
CLUSTER_CHECK_VERSION = 5  # KIP-1242: ClusterId and NodeId in the request


def advertised(runtime: Runtime) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) for every API this process serves, at the key it
    is served at (the KIP-1289 keys are configurable)."""
    caps = runtime.max_versions
    at = wire_keys(runtime.cluster.config)
    result = []
    for api_key, spec in REGISTRY.items():
        if not is_enabled(runtime, api_key):
            continue
        top = spec.max_version if caps is None else min(spec.max_version, caps.get(api_key, -1))
        if top >= spec.min_version:
            low = PRODUCE_ADVERTISED_MIN_VERSION if api_key == PRODUCE_KEY else spec.min_version
            result.append((at.get(api_key, api_key), low, top))
    return sorted(result)


def _served(served: list[tuple[int, int, int]], api_key: int, version: int = 0) -> bool:
    """``api_key`` is in ``served`` (what ``advertised`` gives) up to at least ``version``."""
    return any(key == api_key and top >= version for key, _, top in served)


def supported_features(runtime: Runtime) -> list[tuple[str, int, int]]:
    return [
        ("eligible.leader.replicas.version", 0, 1),
        ("group.version", 0, 1),
        ("kraft.version", 0, 1),
        ("metadata.version", METADATA_VERSION_MIN, METADATA_VERSION),
        # Kafka 4.4.0 supports share.version 2 (SV_2, bound to 4.4-IV0); kemu finalizes 1 as it
        ("share.version", 0, SHARE_VERSION_TXN_ACKS if _kip1289_enabled(runtime) else 2),
        ("streams.version", 0, 1),
        ("transaction.version", 0, 2),
    ]


def finalized_features(runtime: Runtime) -> list[tuple[str, int]]:
    features = [
        ("eligible.leader.replicas.version", 1),
        ("kraft.version", 1),
        ("metadata.version", METADATA_VERSION),
    ]
    served = advertised(runtime)  # once: it walks every API's spec and config
    if _served(served, 68):
        features.append(("group.version", 1))
    if _served(served, 88):
        features.append(("streams.version", 1))
    if _served(served, 76):
        share_version = SHARE_VERSION_TXN_ACKS if _kip1289_served(runtime, served) else 1
        features.append(("share.version", share_version))
    if _served(served, 26, 5):
        features.append(("transaction.version", 2))
    return features


def _kip1289_enabled(runtime: Runtime) -> bool:
    return all(is_enabled(runtime, api_key) for api_key in KIP1289_KEYS)


def _kip1289_served(runtime: Runtime, served: list[tuple[int, int, int]]) -> bool:
    """Both KIP-1289 APIs are advertised (at their configured keys) and transaction version 2
    is: share.version 3 is finalized exactly then (spec §8)."""
    at = wire_keys(runtime.cluster.config)
    return _served(served, 26, 5) and all(_served(served, at[key]) for key in KIP1289_KEYS)


@handler(API_KEY, 0, 5)
def handle(ctx: RequestContext, request: ApiVersionsRequestView) -> Any:
    runtime = ctx.runtime
    module = ctx.response_module
    refusal = request_error(request, ctx.version, runtime.cluster.cluster_id, ctx.node.node_id)
    if refusal is not None:
        # Kafka answers these with the error alone (ApiVersionsRequest.getErrorResponse).
        return ctx.respond(error_code=refusal, api_keys=())
    keys = _api_version_entries(module, tuple(advertised(runtime)))
    extras: dict[str, Any] = {}
    if ctx.version >= 3:
        extras = {
            "supported_features": tuple(
                wire.build(module.SupportedFeatureKey, name=name, min_version=low, max_version=high)
                for name, low, high in supported_features(runtime)
                # As Kafka 4.4: below v4, features whose range starts at 0 are left out, since
                # older clients cannot parse them (KAFKA-17011, fixed by v4).
                if low > 0 or ctx.version >= 4
            ),
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": tuple(
                wire.build(
                    module.FinalizedFeatureKey,
                    name=name,
                    max_version_level=level,
                    min_version_level=level,
                )
                for name, level in finalized_features(runtime)
            ),
            "zk_migration_ready": False,
        }
    return ctx.respond(error_code=ErrorCode.none, api_keys=keys, **extras)


# The ApiVersion entries of an answer, by response module and advertised list: every connection
# asks (a client's first request), and the entries are immutable messages.
_ENTRIES: dict[tuple[Any, tuple[tuple[int, int, int], ...]], tuple[Any, ...]] = {}


def _api_version_entries(module: Any, served: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    found = _ENTRIES.get((module, served))
    if found is None:
        found = _ENTRIES[(module, served)] = tuple(
            wire.build(module.ApiVersion, api_key=key, min_version=low, max_version=high)
            for key, low, high in served
        )
    return found


def request_error(
    request: ApiVersionsRequestView, version: int, cluster_id: str, node_id: int
) -> ErrorCode | None:
    """Kafka 4.4's checks of an ApiVersions request, in its order: v5's ClusterId and NodeId
    come together or not at all, v3+'s client software name and version match Kafka's
    pattern (INVALID_REQUEST, ``ApiVersionsRequest.isValid``); then v5's ids, when given,
    must be this broker's (REBOOTSTRAP_REQUIRED, KIP-1242)."""
    wanted_cluster = (
        getattr(request, "cluster_id", None) if version >= CLUSTER_CHECK_VERSION else None
    )
    wanted_node = getattr(request, "node_id", -1) if version >= CLUSTER_CHECK_VERSION else -1
    if (wanted_cluster is None) != (wanted_node == -1):
        return ErrorCode.invalid_request
    if version >= 3:
        name = getattr(request, "client_software_name", "")
        software = getattr(request, "client_software_version", "")
        if not _valid_software(name) or not _valid_software(software):
            return ErrorCode.invalid_request
    if wanted_cluster is not None and (wanted_cluster != cluster_id or wanted_node != node_id):
        return ErrorCode.rebootstrap_required
    return None


def _valid_software(value: str) -> bool:
    import re

    return bool(re.fullmatch(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?", value))


def unsupported_version_frame(runtime: Runtime, correlation_id: int) -> bytes:
    """The v0 body Kafka sends for an ApiVersions version it does not know."""
    entries = advertised(runtime)
    body = struct.pack(">hi", int(ErrorCode.unsupported_version), len(entries)) + b"".join(
        struct.pack(">hhh", key, low, high) for key, low, high in entries
    )
    return wire.encode_raw_response_frame(correlation_id, body)
