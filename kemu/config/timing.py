"""Timing profiles: ``kemu serve --timing fast`` (the default) or ``--timing kafka``.

``kafka`` is Kafka 4.4.0's code default for every timer: kemu starts from no properties at all,
as a Kafka broker with an empty ``server.properties`` does. ``fast`` is ``FAST_TIMING``: a
broker property per row, set as if written in ``server.properties`` (so DescribeConfigs reports
it as STATIC_BROKER_CONFIG with Kafka's code default as the DEFAULT_CONFIG synonym, as Kafka
reports any configured value), under ``--config`` and ``--override``, which still win.

Every row changes only *when* something happens (a timer, a wait), never *what* happens: the
same records, assignments, epochs and errors, sooner. docs/configuration.md shows this table
("What `--timing fast` changes").
"""

from __future__ import annotations

from dataclasses import dataclass

from kemu.config.definitions import broker_definition

PROFILES = ("fast", "kafka")
DEFAULT_PROFILE = "fast"

# The broker-driven heartbeat interval of KIP-848 consumer, share and streams groups under
# ``fast``: a rebalance needs a member's next heartbeat (one interval) and, for consumer and
# streams groups, the revoking member's acknowledgement and then the new owner's next heartbeat
# (two), so 100 ms leaves a join at most 0.2 s of broker waits; the rest is the clients' own
# steps (docs/benchmarks.md). CPU stays small: four idle members (two KIP-848, two share) cost
# kemu 2.4 % of a core at 100 ms, 1.6 % at 200 ms, 0.6 % at Kafka's 5 s (bench.idle_heartbeat_cpu).
FAST_HEARTBEAT_MS = "100"
# KIP-848 consumer groups go lower: the Java consumer (AsyncKafkaConsumer) lets its application
# thread sleep in poll() until the next heartbeat is due, so each step of a reconciliation that
# runs there (the assignment and revocation callbacks, the positions) waits up to one interval;
# its heartbeats themselves stay at most one per retry.backoff.ms (100 ms) after the previous
# answer. A librdkafka member heartbeats on the interval: about 0.65 % of a core per idle member
# at 100 ms, 1.3 % at 50 ms (docs/benchmarks.md, "Where the time goes in the rows not met").
FAST_CONSUMER_HEARTBEAT_MS = "50"


@dataclass(frozen=True, slots=True)
class TimingRow:
    name: str  # a broker property
    fast: str  # kemu's value under --timing fast
    why: str  # one line: what a test stops waiting for

    @property
    def kafka(self) -> str:
        """Kafka 4.4.0's code default (what --timing kafka leaves in place), from the one place
        it is defined (kemu's own default for a kemu.* config)."""
        definition = broker_definition(self.name)
        assert definition is not None and definition.default is not None, self.name
        return definition.default


FAST_TIMING: tuple[TimingRow, ...] = (
    TimingRow(
        "group.initial.rebalance.delay.ms",
        "0",
        "a new classic group's first rebalance does not wait 3 s for more members "
        "(Kafka's shipped server.properties sets 0 too)",
    ),
    TimingRow(
        "group.streams.initial.rebalance.delay.ms",
        "0",
        "a new streams group's first target assignment is computed at once",
    ),
    TimingRow(
        "group.consumer.assignment.interval.ms",
        "0",
        "a consumer group computes a new target with every new group epoch, not at most once a "
        "second",
    ),
    TimingRow(
        "group.share.assignment.interval.ms",
        "0",
        "likewise for share groups",
    ),
    TimingRow(
        "group.streams.assignment.interval.ms",
        "0",
        "likewise for streams groups",
    ),
    TimingRow(
        "kemu.group.consumer.regex.refresh.min.interval.ms",
        "0",
        "a KIP-848 consumer subscribed with a regex gets a topic created since the group's last "
        "resolution at its next heartbeats, not up to 10 s later (each creation is then "
        "resolved on its own, as on Kafka when creations are 10 s apart)",
    ),
    TimingRow(
        "kemu.group.share.initialize.before.answer",
        "true",
        "a share consumer gets its partitions in the answer to its first heartbeat, not one "
        "heartbeat interval (5 s) later: kemu initializes their share state before answering",
    ),
    TimingRow(
        "group.consumer.heartbeat.interval.ms",
        FAST_CONSUMER_HEARTBEAT_MS,
        "a KIP-848 consumer learns of a rebalance (a member joined or left) within 0.1 s (the "
        "Java consumer's retry.backoff.ms spaces its heartbeats 0.1 s apart), and the Java "
        "consumer's poll() wakes every 0.05 s to run the reconciliation's next step",
    ),
    TimingRow(
        "group.consumer.min.heartbeat.interval.ms",
        FAST_CONSUMER_HEARTBEAT_MS,
        "the floor under the row above (Kafka refuses an interval below it)",
    ),
    TimingRow(
        "group.share.heartbeat.interval.ms",
        FAST_HEARTBEAT_MS,
        "a share consumer learns of a rebalance within 0.1 s",
    ),
    TimingRow(
        "group.share.min.heartbeat.interval.ms",
        FAST_HEARTBEAT_MS,
        "the floor under the row above",
    ),
    TimingRow(
        "group.streams.heartbeat.interval.ms",
        FAST_HEARTBEAT_MS,
        "a streams member learns of a rebalance within 0.1 s",
    ),
    TimingRow(
        "group.streams.min.heartbeat.interval.ms",
        FAST_HEARTBEAT_MS,
        "the floor under the row above",
    ),
)


def profile_properties(profile: str) -> dict[str, str]:
    """The broker properties a profile starts from, before ``--config`` and ``--override``."""
    if profile == "fast":
        return {row.name: row.fast for row in FAST_TIMING}
    if profile == "kafka":
        return {}
    raise ValueError(f"unknown timing profile {profile!r}: expected one of {', '.join(PROFILES)}")
