"""Differences between kemu and Kafka 4.4.0 that ``make conformance-diff`` finds and kemu keeps
on purpose (or cannot remove), each with its reason; docs/conformance.md repeats them. A pair
whose differences all match one of these counts as "known", never as identical."""

from __future__ import annotations

from conformance.compare import Known

API_SET = (
    "kemu advertises the APIs it serves: not AlterReplicaLogDirs (34), the delegation-token APIs "
    "(38-41), UpdateFeatures (57), UnregisterBroker (64), Add/RemoveRaftVoter (80, 81) nor "
    "keys 93/94; it offers client telemetry (71, 72), which Kafka only advertises with a metrics "
    "plugin; it stops at the versions kio has schemas for (ApiVersions v4, TxnOffsetCommit v5, "
    "DeleteGroups v2, Streams v0, Produce from v3); metadata.version 29 and no "
    "eligible.leader.replicas / kraft.version features"
)
EPOCHS = (
    "group epochs count differently: Kafka bumps a KIP-848/share group's epoch once more when it "
    "first resolves the subscribed topics, so member, group and assignment epochs (and the "
    "fenced-epoch message that quotes them) are one higher there"
)

MIN_ISR = (
    "Kafka 4.4's storage format writes a cluster-wide dynamic min.insync.replicas=1 (for ELR), "
    "so topics list it from DYNAMIC_DEFAULT_BROKER_CONFIG; kemu has no such record and reports "
    "the default"
)

KNOWN: tuple[Known, ...] = (
    Known("api_versions", r"^\.(api_keys|supported_features|finalized_features)", API_SET),
    Known(
        "describe_quorum",
        r".",
        "kemu has no Raft quorum: a virtual single voter with offsets 0 and no listeners",
    ),
    *(
        Known(api, r"\.(config_source|synonyms)$", MIN_ISR, name="min.insync.replicas")
        for api in ("describe_configs", "create_topics")
    ),
    Known(
        "describe_configs",
        r"\.read_only$",
        "kemu lets num.partitions change at run time (a dynamic broker config); Kafka reads it "
        "at start-up only (KEMU_DIFFERENCES in kemu/cluster/broker_catalogue.py)",
        name="num.partitions",
    ),
    Known("consumer_group_heartbeat", r"\.member_epoch$", EPOCHS),
    Known("consumer_group_heartbeat", r"\.error_message$", EPOCHS, request='"member_epoch": 7'),
    Known("consumer_group_describe", r"\.(group_epoch|assignment_epoch|member_epoch)$", EPOCHS),
    Known("share_group_describe", r"\.(group_epoch|assignment_epoch|member_epoch)$", EPOCHS),
    Known("share_group_heartbeat", r"\.member_epoch$", EPOCHS),
    Known(
        "share_group_heartbeat",
        r"\.assignment\.topic_partitions$",
        "Kafka assigns a share partition only once its share state is initialised, in a later "
        "heartbeat; kemu initialises it at once and assigns in the first",
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
