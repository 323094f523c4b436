"""The deterministic simulation (kemu/testing/sim, docs/reliability.md): a few seeds of modest
length pass every oracle, a seed replays byte for byte, and the seeds that found bugs stay
fixed. Longer runs: ``make sim SEEDS=1-100 STEPS=1000``."""

from __future__ import annotations

import asyncio

import pytest

from kemu.testing.sim.chaos import FaultRates
from kemu.testing.sim.loop import Process, SimLoop
from kemu.testing.sim.run import Simulation


def test_a_seed_replays_byte_for_byte() -> None:
    """Seed 7 also found a bug: after a broker refused a connection kemu.client forgot the
    topics it led but kept their ids, and ShareConsumer.poll raised KeyError."""
    first = Simulation(7, 80).run()
    second = Simulation(7, 80).run()
    assert first.trace == second.trace
    assert first.faults == second.faults
    assert first.ok, first.violations


def test_a_seed_passes_every_oracle() -> None:
    result = Simulation(1, 60).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.counts.get("pipeline.committed", 0) > 0  # the workload did work
    assert result.counts.get("member.commits", 0) > 0  # the consumer group committed


def test_the_workload_alone_passes() -> None:
    result = Simulation(5, 40, rates=FaultRates.none()).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.faults == {}


def test_no_crash_point_fires_while_settling() -> None:
    """Seed 2001 x 10000 failed at the final check (docs/reliability.md): crash points still
    fired while settling, and each restart gave the share-group members of dead pipeline lives
    another 45 s session, holding the input partitions from the live ones. Here every crash
    point reached kills kemu during the steps, and none does while settling."""
    rates = FaultRates(crash=0, crash_point=1.0, cut=0, tear=0, rule=0, client_death=0)
    result = Simulation(5, 40, rates=rates).run()
    settling = next(i for i, line in enumerate(result.trace) if "settling" in line)
    assert any("crash point" in line for line in result.trace[:settling])
    assert not any("kemu crashes" in line for line in result.trace[settling:])
    assert result.ok, (result.violations, result.trace[-30:])


def test_lost_heartbeat_answer_leaves_no_member_unassigned() -> None:
    """Seed 2 found it: a ShareGroupHeartbeat applied but its answer lost (a drop_after rule)
    left a member at the new epoch with no partitions, since kemu.client's next heartbeat was
    not a full one and the coordinator sends the assignment only to those; the pipeline then
    never consumed two of three partitions. The workload's draws have moved since: seed 4 (150
    steps) lost such an answer, and with the fix's line removed its next heartbeats were
    answered without the assignment (``share.heartbeat.assignment_unlearnt`` 4); only that
    count, not the final check, sees the bug. (Seed 206 until the idempotent producer joined
    the workload, 10 until kemu.client backed off as Kafka's clients do; 4 x 150 until stalls
    and the shorter lock, session and transaction timeouts: no seed of 1-42 x 150 loses such an
    answer since.) Seed 6 x 300 with fault rules ten times as often does (3 did until
    consumer-group members stalled too), and with the fix's line removed counts
    ``share.heartbeat.assignment_unlearnt`` 13."""
    result = Simulation(6, 300, rates=FaultRates(rule=0.2)).run()
    assert result.ok, (result.violations, result.trace[-30:])
    # the seed still loses a heartbeat answer that moved an assignment (else pick another seed:
    # one that counts share.heartbeat.assignment_unlearnt with the fix's line removed)
    assert result.counts.get("share.heartbeat.answer_lost", 0) > 0, result.counts
    assert result.counts.get("share.heartbeat.assignment_unlearnt", 0) == 0, result.counts


def test_a_dead_process_runs_no_callback() -> None:
    loop = SimLoop()
    ran: list[str] = []
    doomed, survivor = Process("doomed"), Process("survivor")

    async def tick(name: str) -> None:
        while True:
            await asyncio.sleep(1)
            ran.append(name)

    loop.create_task(tick("doomed"), context=doomed.context)
    loop.create_task(tick("survivor"), context=survivor.context)
    loop.run_until_complete(asyncio.sleep(2.5))
    doomed.dead = True
    loop.run_until_complete(asyncio.sleep(2))
    assert ran == ["doomed", "survivor", "doomed", "survivor", "survivor", "survivor"]
    assert loop.time() - 1_767_225_600 == pytest.approx(4.5)
    loop.bury()


def test_a_faulted_find_coordinator_answers_every_key() -> None:
    """Seed 401 found it: an error rule on FindCoordinator v4+ answered no coordinator at all
    (Kafka answers one per key, with the error), and kemu.client failed to unpack it."""
    result = Simulation(401, 400).run()
    assert result.ok, (result.violations, result.trace[-30:])


def test_a_commit_retried_across_a_rejoin_does_not_land_under_the_new_owner() -> None:
    """Seed 600 found it: a GroupConsumer commit in flight when kemu restarted was retried
    after the member had rejoined, under its new epoch; the partition was another member's by
    then, which had read the older commit, and the group's committed offset went back (59, then
    56). A commit now stays with the epoch its positions belong to (else CommitFailedError)."""
    result = Simulation(600, 60).run()
    assert result.ok, (result.violations, result.trace[-30:])


def test_a_release_of_a_lost_acquisition_ends_no_newer_one() -> None:
    """Seed 700 found it: after kemu restarted, a pipeline handed out records from a fetch
    answered before the crash; their transaction failed and the pipeline RELEASEd them, but
    the RELEASE rode on a fetch after the member had acquired the same records again, ended that
    acquisition while it was being processed, and the records came a third time after their
    transaction committed. kemu.client's ShareConsumer sends no RELEASE for an acquisition made
    in a session lost since."""
    result = Simulation(700, 300).run()
    assert result.ok, (result.violations, result.trace[-30:])


def test_a_power_loss_keeps_the_renamed_metadata() -> None:
    """Seed 801 (with a random crash one step in 33) found it once the simulated disk covered
    every file: kemu-metadata.json and kemu-producer-ids were written to a synced temporary and
    renamed into place, but the directory was never synced, so a power loss could undo the
    rename; after one, the group's committed offsets answered before it were gone. Every such
    rename is now followed by a sync of its directory. (Seed 804 from when the pipelines' group
    had a dead-letter queue, when 801 no longer drew a power loss, until stalls and shorter
    timeouts moved the draws: 801 draws one again.)"""
    result = Simulation(801, 40, rates=FaultRates(crash=0.03)).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert result.faults.get("crash.power_loss", 0) > 0
