"""Differences between kemu and Kafka 4.4.0 that ``make conformance-diff`` finds and kemu keeps
on purpose (or cannot remove), each with its reason; docs/conformance.md repeats them. A pair
whose differences all match one of these counts as "known", never as identical."""

from __future__ import annotations

from conformance.compare import Known

KNOWN: tuple[Known, ...] = (
    Known(
        "describe_quorum",
        r".",
        "kemu has no Raft quorum: a virtual single voter with offsets 0 and no listeners",
    ),
    Known(
        "describe_configs",
        r"\.read_only$",
        "kemu lets num.partitions change at run time (a dynamic broker config); Kafka reads it "
        "at start-up only (KEMU_DIFFERENCES in kemu/config/broker_catalogue.py)",
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
        "fetch",
        r"\.records\.batches",
        "the Java producer batches by time (linger, requests in flight): how the same records "
        "split into batches differs between the two runs",
        scenario="java_",
    ),
)
