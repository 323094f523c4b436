"""Each oracle of the simulation (kemu/testing/sim/oracles.py) fed a fabricated violation, and
shown to report it: log start/end offsets, share start offsets, a consumer group's committed
offsets, TX_PENDING outliving its transaction, a share window's invariants, a state partition the
replay check never compares, and a state field only the replay sees; and what a power loss that
cut a partition's unsynced tail makes it forget (that partition's end offset only). The replay
check's own re-introduced bugs are in test_sim_oracles.py."""

from __future__ import annotations

import dataclasses
import os
import random
import struct
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kemu.broker.share.manager import SHARE_PARTITIONS
from kemu.coordinator.group.service import GROUP_COORDINATOR
from kemu.coordinator.share.persister import PersistedBatch, SharePartitionKey
from kemu.coordinator.share.service import SHARE_STATE_TOPIC
from kemu.coordinator.transaction.coordinator import TxnState
from kemu.coordinator.transaction.service import TRANSACTION_COORDINATOR
from kemu.protocol.errors import ErrorCode
from kemu.testing.sim.chaos import FaultRates
from kemu.testing.sim.disk import DiskModel
from kemu.testing.sim.oracles import TX_PENDING_GRACE_MS, UNCOMPARED_CHECKS, Oracles
from kemu.testing.sim.run import Simulation
from kemu.testing.sim.workload import CONSUMER_GROUP
from tests.unit.testing.test_sim_oracles import NOW, keys_of, make_cluster, start, traffic

BATCH_HEAD = 12  # a record batch's base offset and length


class Services:
    def __init__(self, built: dict[Any, Any]) -> None:
        self._built = built

    def built(self, key: Any) -> Any:
        return self._built.get(key)


class Partition:
    """What the log-offset check reads of a partition."""

    def __init__(self, topic: str, index: int, start: int, end: int) -> None:
        self.topic_name, self.index = topic, index
        self.topic_id = topic  # one topic of the name all along
        self.log_start_offset = start
        self.log = SimpleNamespace(log_end_offset=end)


def runtime_of(partitions: Sequence[Partition] = (), **built: Any) -> Any:
    services = {
        {"group": GROUP_COORDINATOR, "windows": SHARE_PARTITIONS, "txn": TRANSACTION_COORDINATOR}[
            name
        ]: value
        for name, value in built.items()
    }
    return SimpleNamespace(
        cluster=SimpleNamespace(all_partitions=lambda: list(partitions)),
        services=Services(services),
    )


def test_a_log_end_or_start_going_back_is_reported() -> None:
    oracles = Oracles()
    partitions = [Partition("t", 0, 10, 20), Partition("t", 1, 0, 5)]
    assert oracles.check(runtime_of(partitions), NOW, {}) == []
    partitions[0].log.log_end_offset = 19
    partitions[1].log_start_offset = 3  # forward: fine
    assert oracles.check(runtime_of(partitions), NOW, {}) == [
        "log end of ('t', 0) went back from 20 to 19"
    ]
    partitions[1].log_start_offset = 2
    assert oracles.check_logs(runtime_of(partitions), "after a boot") == [
        "after a boot: log start of ('t', 1) went back from 3 to 2"
    ]


def test_a_power_loss_forgets_only_the_end_offsets_of_the_partitions_it_cut() -> None:
    oracles = Oracles()
    partitions = [Partition("t", 0, 0, 20), Partition("t", 1, 0, 20)]
    assert oracles.check_logs(runtime_of(partitions), "before a crash") == []
    oracles.forget_cut({("t", 0)})
    partitions[0].log.log_end_offset = partitions[1].log.log_end_offset = 15
    assert oracles.check_logs(runtime_of(partitions), "after a boot") == [
        "after a boot: log end of ('t', 1) went back from 20 to 15"
    ]


def test_a_cut_of_the_offsets_log_alone_forgets_the_committed_offsets() -> None:
    oracles = Oracles()
    oracles.group_offsets[(CONSUMER_GROUP, "input", 0)] = 7
    oracles.forget_cut({("input", 0), (SHARE_STATE_TOPIC, 0)})
    assert oracles.group_offsets
    oracles.forget_cut({("__consumer_offsets", 2)})
    assert not oracles.group_offsets


def group_coordinator(committed: dict[tuple[str, int], int]) -> Any:
    def of_group(group: str) -> dict[tuple[str, int], Any]:
        assert group == CONSUMER_GROUP
        return {tp: SimpleNamespace(offset=offset) for tp, offset in committed.items()}

    return SimpleNamespace(offsets=SimpleNamespace(of_group=of_group))


def test_a_committed_offset_going_back_or_below_an_answered_commit_is_reported() -> None:
    oracles = Oracles()
    committed = {("input", 0): 10, ("input", 1): 4}
    runtime = runtime_of(group=group_coordinator(committed))
    assert oracles.check(runtime, NOW, {("input", 0): 10}) == []
    committed[("input", 0)] = 9
    assert oracles.check(runtime, NOW, {("input", 1): 5}) == [
        f"group {CONSUMER_GROUP}: committed offset of ('input', 1) is 4, below the 5 an "
        "OffsetCommit answered",
        f"group {CONSUMER_GROUP}: committed offset of ('input', 0) went back from 10 to 9",
    ]


def share_leader(pending: set[tuple[int, int]], broken: str | None = None) -> Any:
    """A share-partition manager with one actor staging for ``pending`` transactions; its window
    fails its invariants with ``broken``."""

    def check_invariants() -> None:
        if broken is not None:
            raise AssertionError(broken)

    core = SimpleNamespace(
        pending_transactions=lambda: set(pending), check_invariants=check_invariants
    )
    return SimpleNamespace(actors={("g", "t", 0): SimpleNamespace(core=core)})


def transactions(*open_ones: tuple[int, int]) -> Any:
    metas = {
        f"txn-{pid}": SimpleNamespace(state=TxnState.ONGOING, producer_id=pid, producer_epoch=epoch)
        for pid, epoch in open_ones
    }
    return SimpleNamespace(coordinator=SimpleNamespace(transactions=metas))


def test_tx_pending_outliving_its_transaction_is_reported_after_the_grace() -> None:
    oracles = Oracles()
    windows = share_leader({(7, 0)})
    runtime = runtime_of(windows=windows, txn=transactions((7, 0)))
    assert oracles.check(runtime, NOW, {}) == []  # its transaction is open
    ended = runtime_of(windows=windows, txn=transactions())
    assert oracles.check(ended, NOW + 1, {}) == []  # the markers are on their way
    assert oracles.check(ended, NOW + 1 + TX_PENDING_GRACE_MS, {}) == []
    assert oracles.check(ended, NOW + 2 + TX_PENDING_GRACE_MS, {}) == [
        f"TX_PENDING of producer 7 epoch 0 outlived its transaction by {TX_PENDING_GRACE_MS + 1} ms"
    ]


def test_a_share_window_failing_its_invariants_is_reported() -> None:
    found = Oracles().check(runtime_of(windows=share_leader(set(), "overlap")), NOW, {})
    assert found == ["share window ('g', 't', 0): AssertionError('overlap')"]


def started(tmp_path: Path) -> tuple[Any, Any, list[SharePartitionKey]]:
    cluster = make_cluster(tmp_path)
    runtime, service = start(cluster)
    keys = keys_of(cluster)
    for key in keys:
        assert service.initialize_sync(key, 0, 0).error is ErrorCode.none
    traffic(service, keys, range(2))
    return runtime, service, keys


def close(runtime: Any) -> None:
    for partition in runtime.cluster.all_partitions():
        partition.log.close()


def test_a_share_start_offset_going_back_is_reported_but_in_a_group_being_reset(
    tmp_path: Path,
) -> None:
    runtime, service, keys = started(tmp_path)
    oracles = Oracles(seed=1)
    result = service.write_sync(
        keys[0],
        state_epoch=0,
        leader_epoch=0,
        start_offset=5,
        delivery_complete_count=0,
        batches=(),
    )
    assert result.error is ErrorCode.none
    assert oracles.check(runtime, NOW, {}) == []
    shard = service.shard(0)
    shard.states[keys[0]] = dataclasses.replace(shard.states[keys[0]], start_offset=3)  # the bug
    found = oracles.check(runtime, NOW, {})
    assert f"SPSO of {keys[0]} went back from 5 to 3" in found
    assert not any("SPSO" in line for line in oracles.check(runtime, NOW, {}, frozenset({"g"})))
    close(runtime)


def test_a_field_the_old_comparison_left_out_is_compared(tmp_path: Path) -> None:
    """leader_epoch fences a stale share leader: a live one the log does not carry is a
    difference (so are the snapshot epoch, the delivery-complete count, and the fencing
    epochs the shard keeps per key)."""
    runtime, service, keys = started(tmp_path)
    oracles = Oracles(seed=1)
    assert oracles.check(runtime, NOW, {}) == []
    shard = service.shard(0)
    for change in ({"leader_epoch": 9}, {"snapshot_epoch": 9}, {"delivery_complete_count": 9}):
        kept = shard.states[keys[0]]
        shard.states[keys[0]] = dataclasses.replace(kept, **change)
        found = oracles.check(runtime, NOW, {})
        assert found and "replayed step by step differs" in found[0], change
        shard.states[keys[0]] = kept
    for epochs in (shard.leader_epochs, shard.state_epochs):  # what fences a stale writer
        epochs[keys[0]] += 1
        found = oracles.check(runtime, NOW, {})
        assert found and "replayed step by step differs" in found[0]
        epochs[keys[0]] -= 1
    assert oracles.check(runtime, NOW, {}) == []
    close(runtime)


def test_a_state_partition_never_compared_is_reported(tmp_path: Path) -> None:
    """Markers resolved but never written out: the partition cannot be compared, which is a
    violation once it lasts ``UNCOMPARED_CHECKS`` checks, and at the end of the run."""
    runtime, service, keys = started(tmp_path)
    oracles = Oracles(seed=1)
    service.shard(0).marker_resolved[keys[0]] = (PersistedBatch(0, 0, 2, 1),)  # never settled
    for _ in range(UNCOMPARED_CHECKS):
        assert oracles.check(runtime, NOW, {}) == []
    assert oracles.check(runtime, NOW, {}) == [
        f"__share_group_state-0 not compared with its replay for {UNCOMPARED_CHECKS + 1} checks "
        "in a row (markers not replayed or not written out)"
    ]
    assert oracles.final(runtime) == [
        "__share_group_state-0 not compared with its replay at the end of the run (markers not "
        "replayed or not written out)"
    ]
    service.shard(0).marker_resolved.clear()
    assert oracles.check(runtime, NOW, {}) == []  # compared again: the count starts over
    assert oracles.uncompared == {}
    assert oracles.final(runtime) == []
    close(runtime)


# --- in a run ---------------------------------------------------------------------------------


def cutting_the_last_state_batch(disk: DiskModel) -> None:
    """A power loss that also takes the last synced batch of every share-state segment."""
    for directory in sorted(disk.root.glob(f"{SHARE_STATE_TOPIC}-*")):
        segments = sorted(path for path in directory.iterdir() if path.suffix == ".log")
        if not segments:
            continue
        data = segments[-1].read_bytes()
        position, last = 0, -1
        while position + BATCH_HEAD <= len(data):
            (length,) = struct.unpack(">i", data[position + 8 : position + BATCH_HEAD])
            last, position = position, position + BATCH_HEAD + length
        if last >= 0:
            os.truncate(segments[-1], last)


def test_a_power_loss_taking_synced_share_state_is_reported_at_the_boot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bug a power loss must not hide: synced records gone. The end offsets, checked just
    before the crash and as soon as kemu has booted, are kept over a loss that cut nothing of
    the partition (before, every end offset and the replica were forgotten at a power loss, and
    the reboot's load was compared with a replay of the same bytes: the run passed)."""
    lose = DiskModel.lose_unsynced

    def losing_more(self: DiskModel, tear: random.Random | None = None) -> int:
        lost = lose(self, tear)
        cutting_the_last_state_batch(self)
        return lost

    monkeypatch.setattr(DiskModel, "lose_unsynced", losing_more)
    # seed 801 draws a power loss (804 did until stalls and shorter timeouts moved the draws)
    result = Simulation(801, 40, rates=FaultRates(crash=0.03)).run()
    assert result.faults.get("crash.power_loss", 0) > 0
    assert result.violations[0].startswith(
        f"after a boot: log end of ('{SHARE_STATE_TOPIC}', 0) went back from"
    ), result.violations


def test_a_step_is_checked_before_its_faults_and_the_disk_baselined_at_the_first_boot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crash drawn at a step ends a state that step's check saw; and only the first boot's
    files are taken as durable without a sync (a later boot's writes, and the unsynced writes
    of a crashed process it finds, are durable once synced)."""
    baselines: list[int] = []
    baseline = DiskModel.baseline

    def counted(self: DiskModel) -> None:
        baselines.append(1)
        baseline(self)

    monkeypatch.setattr(DiskModel, "baseline", counted)
    result = Simulation(805, 40, rates=FaultRates(crash=0.03)).run()
    assert result.ok, (result.violations, result.trace[-30:])
    crashes = [i for i, line in enumerate(result.trace) if "random step)" in line]
    assert crashes
    for at in crashes:
        step = result.trace[at].split()[0]
        assert result.trace[at - 1].split()[0] == step and " leo " in result.trace[at - 1]
    assert sum(" restarts " in line for line in result.trace) >= 2
    assert baselines == [1]


def test_a_cut_state_partition_is_replayed_again_and_the_others_carried(tmp_path: Path) -> None:
    runtime, _, _ = started(tmp_path)
    oracles = Oracles(seed=1)
    assert oracles.check(runtime, NOW, {}) == []
    replica = oracles.replica
    assert replica is not None and 0 in replica.replayed
    oracles.forget_cut({("orders", 1)})  # a data partition: the replica keeps everything
    assert 0 in replica.replayed
    oracles.forget_cut({(SHARE_STATE_TOPIC, 0)})
    assert oracles.replica is replica and 0 not in replica.replayed
    assert oracles.check(runtime, NOW, {}) == []  # replayed from the log start, and agrees
    assert (
        replica.replayed[0]
        == runtime.cluster.topics[SHARE_STATE_TOPIC].partitions[0].high_watermark
    )
    close(runtime)
