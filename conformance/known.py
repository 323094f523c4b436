"""Differences between kemu and Kafka 4.4.0 that ``make conformance-diff`` finds and kemu keeps
on purpose (or cannot remove), each with its reason; docs/conformance.md repeats them. A pair
whose differences all match one of these counts as "known", never as identical."""

from __future__ import annotations

from conformance.compare import Known

API_SET = (
    "kemu stops at the versions kio has schemas for (ApiVersions v4, TxnOffsetCommit v5, "
    "DeleteGroups v2; Kafka 4.4 has v5 with KIP-1242's cluster and node id checks, v6 with topic "
    "ids, v3 with per-group error messages), finalizes metadata.version 29 (4.2-IV1, the 4.2 "
    "message set kio has; Kafka 4.4 is at 33) and neither eligible.leader.replicas.version nor "
    "kraft.version (no ELR maintenance, no Raft quorum). The APIs only one side offers on "
    "purpose are left out before comparing (KAFKA_ONLY_APIS, KEMU_ONLY_APIS in compare.py)"
)

KNOWN: tuple[Known, ...] = (
    Known("api_versions", r"^\.(api_keys|supported_features|finalized_features)", API_SET),
    Known(
        "describe_quorum",
        r".",
        "kemu has no Raft quorum: a virtual single voter with offsets 0 and no listeners",
    ),
    Known(
        "describe_configs",
        r"\.read_only$",
        "kemu lets num.partitions change at run time (a dynamic broker config); Kafka reads it "
        "at start-up only (KEMU_DIFFERENCES in kemu/cluster/broker_catalogue.py)",
        name="num.partitions",
    ),
    Known(
        "describe_share_group_offsets",
        r"\.start_offset$",
        "Kafka persists the start offset that held before the acknowledgement which moves it (the "
        "next write carries the new one); kemu persists the moved start offset at once",
    ),
    Known(
        "get_telemetry_subscriptions",
        r"\.subscription_id$",
        "Kafka's subscription id is a hash of its (empty) subscription set; kemu's is 0",
    ),
    Known(
        "describe_producers",
        r"\.coordinator_epoch$",
        "kemu does not keep the coordinator epoch of a producer's last transaction marker (-1)",
    ),
    Known(
        "fetch",
        r"\.records\.batches",
        "the Java producer batches by time (linger, requests in flight): how the same records "
        "split into batches differs between the two runs",
        scenario="java_",
    ),
)
