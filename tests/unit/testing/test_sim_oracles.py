"""The simulation's ``__share_group_state`` oracle (kemu/testing/sim/oracles.py): a replica
replaying only what was appended since the last check, kept across restarts, and one built from
the log start at a seeded interval (longer for a longer log) and at the end. Each re-introduced
bug here is one the oracle must report: a live change no record carries (the step-by-step
replica), and a prune one record too far (the from-the-start replica at once, and when its
spaced-out turn comes; the step-by-step one after a restart, where the old per-boot replica,
replaying the same pruned log as the restarted process, agreed with it). And seeds run by worker
processes print what one process prints, in seed order."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.share.persister import PersistedBatch, SharePartitionKey
from kemu.coordinator.share.service import (
    SHARE_PERSISTER,
    SHARE_STATE_TOPIC,
    ShareCoordinatorService,
)
from kemu.protocol.errors import ErrorCode
from kemu.storage.log import PartitionLog
from kemu.storage.segments import SegmentLog
from kemu.testing.sim.__main__ import Options, run_seeds
from kemu.testing.sim.oracles import (
    FULL_REPLAY_EVERY,
    FULL_REPLAY_RECORDS_PER_CHECK,
    Oracles,
)
from kemu.testing.sim.run import Result, Simulation

NOW = 1_700_000_000_000
PER_SNAPSHOT = 3
ACKNOWLEDGED = 2


def make_cluster(data_dir: Path) -> Cluster:
    def segment_logs(topic: str, index: int) -> PartitionLog:
        return SegmentLog(data_dir / f"{topic}-{index}")

    cluster = Cluster(
        cluster_id="oracle-unit",
        nodes={1: BrokerNode(1, "127.0.0.1", 19391)},
        config=BrokerConfig(
            {
                "share.coordinator.state.topic.num.partitions": "1",
                "share.coordinator.snapshot.update.records.per.snapshot": str(PER_SNAPSHOT),
            }
        ),
        log_factory=segment_logs,
    )
    cluster.data_dir = data_dir
    return cluster


def start(cluster: Cluster) -> tuple[Runtime, ShareCoordinatorService]:
    runtime = Runtime(cluster=cluster, clock_ms=lambda: NOW)
    service = ShareCoordinatorService(runtime)
    runtime.services.provide(SHARE_PERSISTER, service)
    return runtime, service


def restart(cluster: Cluster, data_dir: Path) -> tuple[Cluster, Runtime, ShareCoordinatorService]:
    for partition in cluster.all_partitions():
        partition.log.close()
    reopened = make_cluster(data_dir)
    reopened.load_metadata()
    return (reopened, *start(reopened))


def write(service: ShareCoordinatorService, key: SharePartitionKey, step: int) -> None:
    """An update acknowledging one more offset: the state is the sum of every update. Then
    the prune job, as if its timer fired after every write (the earliest a prune can come)."""
    result = service.write_sync(
        key,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=0,
        batches=(PersistedBatch(step, step, ACKNOWLEDGED, 1),),
    )
    assert result.error is ErrorCode.none
    service.prune_all()


def keys_of(cluster: Cluster) -> list[SharePartitionKey]:
    topic = cluster.topics.get("orders") or cluster.create_topic("orders", 2, 1)
    return [SharePartitionKey("g", topic.topic_id, p) for p in range(2)]


def traffic(service: ShareCoordinatorService, keys: list[SharePartitionKey], steps: range) -> None:
    """An update of every key per step: snapshots of each, so that the log start moves."""
    for step in steps:
        for key in keys:
            write(service, key, step)


def test_correct_code_passes_every_check_across_a_restart(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path)
    runtime, service = start(cluster)
    keys = keys_of(cluster)
    for key in keys:
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    oracles = Oracles(seed=1)
    for step in range(4 * PER_SNAPSHOT):
        traffic(service, keys, range(step, step + 1))
        assert oracles.check(runtime, NOW, {}) == []
    assert cluster.topics[SHARE_STATE_TOPIC].partitions[0].log_start_offset > 0  # pruned
    assert oracles.full_replay(service) == []
    replica = oracles.replica
    cluster, runtime, service = restart(cluster, tmp_path)
    assert oracles.check(runtime, NOW, {}) == []
    assert oracles.replica is replica  # carried over the restart, not replayed again
    traffic(service, keys, range(100, 100 + PER_SNAPSHOT))
    assert oracles.check(runtime, NOW, {}) == []
    assert oracles.final(runtime) == []
    for partition in cluster.all_partitions():
        partition.log.close()


def test_a_live_change_no_record_carries_is_reported_at_the_next_check(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path)
    runtime, service = start(cluster)
    keys = keys_of(cluster)
    for key in keys:
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    oracles = Oracles(seed=1)
    traffic(service, keys, range(2))
    assert oracles.check(runtime, NOW, {}) == []
    shard = service.shard(0)
    state = shard.states[keys[0]]
    shard.states[keys[0]] = dataclasses.replace(state, start_offset=99)  # the bug
    found = oracles.check(runtime, NOW, {})
    assert found and "replayed step by step differs" in found[0]
    assert "replayed from its start differs" in oracles.full_replay(service)[0]
    for partition in cluster.all_partitions():
        partition.log.close()


def pruning_one_too_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Cluster, Runtime, ShareCoordinatorService, list[SharePartitionKey]]:
    """A started share coordinator whose pruning takes one record too many, its keys
    initialized."""
    original = ShareCoordinatorService.redundant_below

    def one_too_far(self: ShareCoordinatorService, index: int) -> int:
        below = original(self, index)
        partition = self.topic().partitions[index]
        return below + 1 if below > partition.log_start_offset else below

    monkeypatch.setattr(ShareCoordinatorService, "redundant_below", one_too_far)
    cluster = make_cluster(tmp_path)
    runtime, service = start(cluster)
    keys = keys_of(cluster)
    for key in keys:
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    return cluster, runtime, service, keys


def test_a_prune_one_record_too_far_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, runtime, service, keys = pruning_one_too_far(tmp_path, monkeypatch)
    oracles = Oracles(seed=1)
    for step in range(3 * PER_SNAPSHOT):
        for key in keys:
            write(service, key, step)
            # the step-by-step replica replayed the record before it was pruned: it agrees
            assert oracles.check(runtime, NOW, {}) == []
    assert cluster.topics[SHARE_STATE_TOPIC].partitions[0].log_start_offset > 0
    found = oracles.full_replay(service)
    assert found and "replayed from its start differs" in found[0]
    # after a restart the process loads the pruned log: the carried replica disagrees
    cluster, runtime, service = restart(cluster, tmp_path)
    found = oracles.check(runtime, NOW, {})
    assert found and "replayed step by step differs" in found[0]
    for partition in cluster.all_partitions():
        partition.log.close()


def test_full_replays_come_less_often_as_the_log_grows(tmp_path: Path) -> None:
    """A key initialized and never written again holds the log start back (as in a run whose
    kemu restarts before any cold snapshot): one check per FULL_REPLAY_RECORDS_PER_CHECK records
    between two full replays, so that they cost each step the same however long the run."""
    cluster = make_cluster(tmp_path)
    runtime, service = start(cluster)
    keys = keys_of(cluster)
    cold = SharePartitionKey("cold", keys[0].topic_id, 0)
    for key in (cold, *keys):  # the cold key's snapshot first: the log start stays at 0
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    oracles = Oracles(seed=1)
    # more records than FULL_REPLAY_EVERY's longest draw accounts for
    traffic(service, keys, range(FULL_REPLAY_RECORDS_PER_CHECK * FULL_REPLAY_EVERY[1] // 2))
    partition = cluster.topics[SHARE_STATE_TOPIC].partitions[0]
    assert partition.log_start_offset == 0  # nothing pruned
    records = partition.high_watermark
    assert oracles.check(runtime, NOW, {}) == []
    assert oracles.full_replay(service) == []
    assert oracles.full_replay_due == oracles.checks + records // FULL_REPLAY_RECORDS_PER_CHECK
    for partition in cluster.all_partitions():
        partition.log.close()


def test_a_due_full_replay_still_reports_a_prune_one_record_too_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that the spacing makes due replays the log from its start and reports what
    only a replay from the start sees."""
    cluster, runtime, service, keys = pruning_one_too_far(tmp_path, monkeypatch)
    oracles = Oracles(seed=1)
    found: list[str] = []
    step = due = 0
    while not found:
        write(service, keys[step % 2], step)  # each record checked before a prune can take it
        due = oracles.full_replay_due
        found = oracles.check(runtime, NOW, {})
        step += 1
    assert "replayed from its start differs" in found[0]
    assert oracles.checks == due  # found by the full replay that was due
    for partition in cluster.all_partitions():
        partition.log.close()


def test_seeds_run_by_worker_processes_print_as_one_process_does() -> None:
    """``make sim JOBS=2``: the same per-seed lines, in seed order."""
    options = Options(steps=2, no_faults=True, trace=False, tail=10)
    alone = [outcome.text for outcome in run_seeds([6, 7], options, jobs=1)]
    workers = [outcome.text for outcome in run_seeds([6, 7], options, jobs=2)]
    assert workers == alone
    assert [text[0].split(":")[0] for text in workers] == ["seed 6", "seed 7"]


def test_a_seed_whose_harness_raises_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Simulation.run

    def run(self: Simulation) -> Result:
        if self.seed == 6:
            raise RuntimeError("harness bug")
        return original(self)

    monkeypatch.setattr(Simulation, "run", run)  # the forked workers inherit it
    options = Options(steps=2, no_faults=True, trace=False, tail=10)
    outcomes = list(run_seeds([7, 6], options, jobs=2))
    assert [outcome.ok for outcome in outcomes] == [True, False]
    assert outcomes[1].text[0] == "seed 6: FAILED, the harness raised"
    assert "RuntimeError: harness bug" in "\n".join(outcomes[1].text)
