"""What must hold after every step of the simulation, read from the live kemu process.

- every share-partition window passes ``RecordWindow.check_invariants``;
- log start and log end offsets only move forward, checked every step, just before kemu crashes
  and as soon as it has booted (a power loss may take back a tail nobody was answered for: the
  end offsets of the partitions whose segment it cut are learnt afresh);
- a share partition's start offset (SPSO) in ``__share_group_state`` only moves forward, across
  restarts too;
- a consumer group's committed offsets only move forward, and never fall below what an
  OffsetCommit answered (a power loss that cut ``__consumer_offsets`` may take back a commit
  nobody was answered for);
- ``__share_group_state`` replayed gives the state the share coordinator holds: every step by a
  replica that replays what was appended since the last step (kept across restarts, so that it
  also checks a start-up's own from-scratch load against it; a state partition rebuilt when a
  power loss cut its segment or a recovery took back records it had replayed), and by a
  replica built from the log start at a seeded interval of steps (longer for a longer log, so
  that its cost per step stays bounded) and at the end of the run; every field of each key's
  state; a state partition not compared for ``UNCOMPARED_CHECKS`` checks in a row, or at the
  end, is a violation;
- no record stays TX_PENDING once its transaction has ended (after ``TX_PENDING_GRACE_MS``, the
  markers travelling to the share-partition leader asynchronously).
"""

from __future__ import annotations

import random
from typing import Any

from kemu.broker.share.manager import SHARE_PARTITIONS
from kemu.cluster.model import SHARE_STATE_TOPIC
from kemu.coordinator.group.offsets_log import TOPIC as OFFSETS_TOPIC
from kemu.coordinator.group.service import GROUP_COORDINATOR
from kemu.coordinator.share.persister import SharePartitionKey
from kemu.coordinator.share.service import SHARE_PERSISTER, ShareCoordinatorService
from kemu.coordinator.share.shard import ShareCoordinatorShard
from kemu.coordinator.transaction.coordinator import PREPARING, TxnState
from kemu.coordinator.transaction.service import TRANSACTION_COORDINATOR
from kemu.testing.sim.workload import CONSUMER_GROUP

TX_PENDING_GRACE_MS = 10_000
FULL_REPLAY_EVERY = (50, 150)  # checks between two replays of the whole log (seeded), at least
# A replay from the log start costs in proportion to the records above it, which grow all run
# long where nothing prunes (kemu restarting more often than the cold-snapshot interval): the
# next one is due after at least one check per this many records replayed, so that full replays
# cost a bounded share of each step instead of one that grows with the run.
FULL_REPLAY_RECORDS_PER_CHECK = 20
TX_PENDING_STATE = 5  # PersistedBatch.delivery_state of a staged record
# A state partition the step-by-step replica could not compare (the live coordinator has not
# replayed or written out a transaction's markers there) is compared at a later check; one left
# uncompared for more checks than this in a row is a violation: nothing would check it.
UNCOMPARED_CHECKS = 20


class Oracles:
    def __init__(self, seed: int = 0) -> None:
        self.log_offsets: dict[tuple[str, int], tuple[int, int]] = {}
        # the topic id each partition's offsets were learnt of: a topic deleted and created
        # again under its name (--churn) has a new log, whose offsets start afresh
        self.log_topic_ids: dict[tuple[str, int], Any] = {}
        self.start_offsets: dict[Any, int] = {}
        self.pending_since: dict[tuple[int, int], int] = {}
        self.replica: ShareCoordinatorService | None = None
        self.group_offsets: dict[tuple[str, str, int], int] = {}
        self.checks = 0
        # its own stream, so that when full replays happen moves no other choice of the seed
        self.interval_rng = random.Random(f"full-replay-{seed}")
        self.full_replay_due = self.interval_rng.randint(*FULL_REPLAY_EVERY)
        self.full_replays = 0
        self.uncompared: dict[int, int] = {}  # state partition -> checks in a row not compared

    def forget_cut(self, cut: set[tuple[str, int]]) -> None:
        """After a power loss that cut these partitions' unsynced tails (records nobody was
        answered for, ``flush=always``): learn their end offsets again, drop what the
        step-by-step replica replayed of a cut state partition, and forget the committed
        offsets if ``__consumer_offsets`` was cut (answered commits are checked against the
        clients' ledger). A partition the loss did not cut keeps everything: its end offset
        must not go back, and the replica must meet the reboot's load of it."""
        for tp in cut:
            if tp in self.log_offsets:
                self.log_offsets[tp] = (self.log_offsets[tp][0], -1)
            if tp[0] == SHARE_STATE_TOPIC:
                self._drop_replica_partition(tp[1])
            if tp[0] == OFFSETS_TOPIC:
                self.group_offsets.clear()

    def _drop_replica_partition(self, index: int) -> None:
        """The step-by-step replica replays that state partition again from its log start."""
        if self.replica is not None:
            self.replica.shards.pop(index, None)
            self.replica.replayed.pop(index, None)
            self.replica.snapshot_offsets.pop(index, None)

    def check_logs(self, runtime: Any, when: str) -> list[str]:
        """The log-offset check alone, at a moment no step check sees: just before kemu
        crashes (at a crash point too) and as soon as it has booted."""
        return [f"{when}: {found}" for found in self._logs(runtime)]

    def forget_share_groups(self, groups: set[str]) -> None:
        """Their offsets were deleted (DeleteShareGroupOffsets): start offsets begin afresh."""
        for key in [k for k in self.start_offsets if k.group_id in groups]:
            del self.start_offsets[key]

    def check(
        self,
        runtime: Any,
        now_ms: int,
        confirmed: dict[tuple[str, int], int],
        resetting: frozenset[str] = frozenset(),
    ) -> list[str]:
        self.checks += 1
        found: list[str] = []
        found += self._logs(runtime)
        found += self._windows(runtime)
        share_state = runtime.services.built(SHARE_PERSISTER)
        if isinstance(share_state, ShareCoordinatorService):
            found += self._start_offsets(share_state, resetting)
            found += self._replay(share_state)
        found += self._tx_pending(runtime, share_state, now_ms)
        found += self._group_offsets(runtime, confirmed)
        return found

    def _group_offsets(self, runtime: Any, confirmed: dict[tuple[str, int], int]) -> list[str]:
        service = runtime.services.built(GROUP_COORDINATOR)
        if service is None:
            return []
        found = []
        committed = {
            tp: value.offset for tp, value in service.offsets.of_group(CONSUMER_GROUP).items()
        }
        for tp, answered in sorted(confirmed.items()):
            if committed.get(tp, -1) < answered:
                found.append(
                    f"group {CONSUMER_GROUP}: committed offset of {tp} is "
                    f"{committed.get(tp)}, below the {answered} an OffsetCommit answered"
                )
        for tp, offset in sorted(committed.items()):
            key = (CONSUMER_GROUP, *tp)
            before = self.group_offsets.get(key)
            if before is not None and offset < before:
                found.append(
                    f"group {CONSUMER_GROUP}: committed offset of {tp} went back from {before} "
                    f"to {offset}"
                )
            self.group_offsets[key] = offset
        return found

    def final(self, runtime: Any) -> list[str]:
        """At the end of a run: the whole log replayed once more, every state partition
        compared (none may be left waiting for its markers once the run has settled)."""
        share_state = runtime.services.built(SHARE_PERSISTER)
        if not isinstance(share_state, ShareCoordinatorService):
            return []
        topic = share_state.cluster.topics.get(SHARE_STATE_TOPIC)
        if topic is None:
            return []
        found, uncompared = _compare(
            share_state, _empty_replica(share_state), topic, "replayed from its start"
        )
        found += [
            f"__share_group_state-{index} not compared with its replay at the end of the run "
            "(markers not replayed or not written out)"
            for index in sorted(uncompared)
        ]
        return found

    def _logs(self, runtime: Any) -> list[str]:
        found = []
        for partition in runtime.cluster.all_partitions():
            tp = (partition.topic_name, partition.index)
            start, end = partition.log_start_offset, partition.log.log_end_offset
            before = self.log_offsets.get(tp)
            if self.log_topic_ids.setdefault(tp, partition.topic_id) != partition.topic_id:
                self.log_topic_ids[tp] = partition.topic_id
                before = None
            if before is not None:
                if start < before[0]:
                    found.append(f"log start of {tp} went back from {before[0]} to {start}")
                if end < before[1]:
                    found.append(f"log end of {tp} went back from {before[1]} to {end}")
            self.log_offsets[tp] = (start, end)
        return found

    def _windows(self, runtime: Any) -> list[str]:
        manager = runtime.services.built(SHARE_PARTITIONS)
        if manager is None:
            return []
        found = []
        for key, actor in sorted(manager.actors.items(), key=lambda item: str(item[0])):
            core = actor.core
            if core is None:
                continue
            try:
                core.check_invariants()
            except AssertionError as error:
                found.append(f"share window {key}: {error!r}")
        return found

    def _start_offsets(
        self, service: ShareCoordinatorService, resetting: frozenset[str]
    ) -> list[str]:
        found = []
        for shard in service.shards.values():
            for key, state in shard:
                if key.group_id in resetting:
                    continue
                before = self.start_offsets.get(key)
                if before is not None and state.start_offset < before and state.start_offset >= 0:
                    found.append(f"SPSO of {key} went back from {before} to {state.start_offset}")
                self.start_offsets[key] = max(state.start_offset, before or -1)
        return found

    def _replay(self, live: ShareCoordinatorService) -> list[str]:
        """The incremental replica: what was appended since the last check, replayed onto what
        it holds, must give what the live coordinator holds."""
        topic = live.cluster.topics.get(SHARE_STATE_TOPIC)
        if topic is None:
            return []
        replica = self.replica
        if replica is None or self._taken_back(replica, topic):
            replica = self.replica = _empty_replica(live)
        elif replica.runtime is not live.runtime:
            # a restart: the new process loaded the log from its start; the replica goes on
            # from where it was, so the two must meet
            replica.runtime, replica.cluster = live.runtime, live.cluster
        for partition in topic.partitions:
            if 0 < replica.replayed.get(partition.index, 0) < partition.log_start_offset:
                # a prune moved the log start past records it never replayed (a tombstone
                # among them: seed 25 x 150, crash-point rate 0.03, power losses at 0.3 of
                # them): that partition is replayed again from the log start
                self._drop_replica_partition(partition.index)
        found, uncompared = _compare(live, replica, topic, "replayed step by step")
        self.uncompared = {index: self.uncompared.get(index, 0) + 1 for index in uncompared}
        found += [
            f"__share_group_state-{index} not compared with its replay for {checks} checks in "
            "a row (markers not replayed or not written out)"
            for index, checks in sorted(self.uncompared.items())
            if checks > UNCOMPARED_CHECKS
        ]
        if self.checks >= self.full_replay_due:
            found += self.full_replay(live)
        return found

    def full_replay(self, live: ShareCoordinatorService) -> list[str]:
        """A replica built from the log start now must hold what the live coordinator holds.
        Due again once every partition could be compared, after a seeded number of checks or
        one check per ``FULL_REPLAY_RECORDS_PER_CHECK`` records it replayed, whichever is more."""
        topic = live.cluster.topics.get(SHARE_STATE_TOPIC)
        if topic is None:
            return []
        found, uncompared = _compare(live, _empty_replica(live), topic, "replayed from its start")
        if not uncompared:
            self.full_replays += 1
            self.full_replay_due = self.checks + full_replay_interval(
                self.interval_rng.randint(*FULL_REPLAY_EVERY), _records(topic)
            )
        return found

    @staticmethod
    def _taken_back(replica: ShareCoordinatorService, topic: Any) -> bool:
        """Records the replica replayed are no longer in the log (a power loss cut the tail, a
        recovery truncated it): it starts again from the log start."""
        return any(
            replica.replayed.get(partition.index, 0) > partition.high_watermark
            for partition in topic.partitions
        )

    def _tx_pending(self, runtime: Any, share_state: Any, now_ms: int) -> list[str]:
        pending: set[tuple[int, int]] = set()
        manager = runtime.services.built(SHARE_PARTITIONS)
        if manager is not None:
            for actor in manager.actors.values():
                if actor.core is not None:
                    pending |= actor.core.pending_transactions()
        if isinstance(share_state, ShareCoordinatorService):
            for shard in share_state.shards.values():
                for _, state in shard:
                    for batch in state.batches:
                        if batch.delivery_state == TX_PENDING_STATE:
                            pending.add((batch.staged_producer_id, batch.staged_producer_epoch))
        service = runtime.services.built(TRANSACTION_COORDINATOR)
        open_transactions: set[tuple[int, int]] = set()
        if service is not None:
            for meta in service.coordinator.transactions.values():
                if meta.state is TxnState.ONGOING or meta.state in PREPARING:
                    open_transactions.add((meta.producer_id, meta.producer_epoch))
        found = []
        for staged in sorted(pending):
            if staged in open_transactions:
                self.pending_since.pop(staged, None)
                continue
            since = self.pending_since.setdefault(staged, now_ms)
            if now_ms - since > TX_PENDING_GRACE_MS:
                found.append(
                    f"TX_PENDING of producer {staged[0]} epoch {staged[1]} outlived its "
                    f"transaction by {now_ms - since} ms"
                )
        for gone in set(self.pending_since) - pending:
            del self.pending_since[gone]
        return found


def full_replay_interval(drawn: int, records: int) -> int:
    """Checks until the next replay from the log start: the seeded draw, or longer for a log of
    many records (see ``FULL_REPLAY_RECORDS_PER_CHECK``)."""
    return max(drawn, records // FULL_REPLAY_RECORDS_PER_CHECK)


def _records(topic: Any) -> int:
    """Offsets from the log start to the high watermark, over the state partitions."""
    return sum(p.high_watermark - p.log_start_offset for p in topic.partitions)


def _empty_replica(live: ShareCoordinatorService) -> ShareCoordinatorService:
    """A share coordinator that has replayed nothing yet and never writes (no load, no timer)."""
    replica = ShareCoordinatorService.__new__(ShareCoordinatorService)
    replica.runtime, replica.cluster = live.runtime, live.cluster
    replica.shards, replica.replayed, replica.snapshot_offsets = {}, {}, {}
    replica._cold_timer = None
    return replica


def _compare(
    live: ShareCoordinatorService, replica: ShareCoordinatorService, topic: Any, how: str
) -> tuple[list[str], set[int]]:
    """Catch ``replica`` up with the log and compare it with ``live``, per state partition;
    returns the differences and the partitions that could not be compared (whose markers the
    live coordinator has not replayed or written out yet: compared at a later check)."""
    found = []
    uncompared = set()
    for partition in topic.partitions:
        index = partition.index
        replica._catch_up(index)
        if live.replayed.get(index, 0) != partition.high_watermark:
            uncompared.add(index)
            continue  # markers not replayed yet: the next operation will
        if live.shard(index).marker_resolved:
            uncompared.add(index)
            continue  # resolved by markers, not yet written out as ShareUpdates
        mine, theirs = live.shard(index), replica.shard(index)
        for key in sorted(set(mine.states) | set(theirs.states), key=str):
            if _comparable(mine, key) != _comparable(theirs, key):
                found.append(
                    f"__share_group_state-{index} {how} differs for {key}: "
                    f"live {_comparable(mine, key)}, replayed {_comparable(theirs, key)}"
                )
    return found, uncompared


def _comparable(shard: ShareCoordinatorShard, key: SharePartitionKey) -> Any:
    """All of a key's state, and the epochs that fence writers of it: the live coordinator
    changes them only by replaying the records it appends and the markers in the log, as the
    replica does, so every field must agree (``leader_epoch`` fences a stale share leader; the
    snapshot epoch, the delivery-complete count and the timestamps are read back by the share
    leader and the admin tools)."""
    state = shard.states.get(key)
    if state is None:
        return None
    return state, shard.leader_epochs.get(key), shard.state_epochs.get(key)
