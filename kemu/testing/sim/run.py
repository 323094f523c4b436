"""One simulation run: a seed, a number of steps, a trace, and the violations found.

A step runs the world for a random 10-300 virtual milliseconds, then draws the faults of that
step (``chaos.py``) and checks the oracles (``oracles.py``, and the clients' own checks in
``workload.py``). After the last step the faults stop (crash points too), the crashed process
and dead clients come back, producers stop, and the world runs until the pipeline has caught up
with its input (or a virtual deadline passes); then the end-to-end checks: every committed input
value is there, and each is, exactly once, either transformed in the pipeline's output or in
its group's dead-letter queue, archived at the delivery limit (``exactly_once.py``).

Everything the run does comes from ``random.Random(seed)``; wall time is never read (``time``
and ``uuid.uuid4`` are patched for the run's duration, see ``deterministic``), so a seed replays
the same trace byte for byte (with the same ``PYTHONHASHSEED``; ``python -m kemu.testing.sim``
fixes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kemu.cluster import crash_points
from kemu.coordinator.group import offsets_log
from kemu.coordinator.group.service import GROUP_COORDINATOR
from kemu.coordinator.share import service as share_service
from kemu.coordinator.transaction import service as transaction_service
from kemu.testing.sim.admin_ops import Operator
from kemu.testing.sim.chaos import Chaos, FaultRates
from kemu.testing.sim.churn import (
    TOPIC_POINT_RATE,
    Churner,
    ChurnLedger,
    churn_check,
)
from kemu.testing.sim.copier import Copier, ListeningCopier, copier_final
from kemu.testing.sim.exactly_once import DeadLetterSeen, pipeline_once, pipeline_owes
from kemu.testing.sim.loop import START_S, SimLoop, lookups_without_getpid
from kemu.testing.sim.network import SimNetwork
from kemu.testing.sim.oracles import Oracles
from kemu.testing.sim.settings import lost_settings, prepare
from kemu.testing.sim.stalls import STALL_SECONDS, counting_expiries
from kemu.testing.sim.surroundings import deterministic, fewer_collections, quiet_logs
from kemu.testing.sim.workload import (
    CONSUMER_GROUP,
    INPUT,
    OUTPUT,
    PIPE_DELIVERY_LIMIT,
    PLAIN,
    Actor,
    GroupMember,
    InputProducer,
    Ledger,
    Pipeline,
    PlainProducer,
    Reader,
    Verifier,
)
from kemu.testing.sim.world import SimKemu, SimulatedCrash

SETTLE_DEADLINE_S = 600.0
# log.cleaner.backoff.ms in runs: the cleaner and its crash points run within most of kemu's
# lives, and __transaction_state stays compacted, so restarts stay cheap in long runs
SIM_CLEANER_BACKOFF_MS = 1000
# Decoded batches of the state logs (share state, transactions, committed offsets) kept across
# the run's restarts (kemu.storage.batch_memo): each boot still reads and replays the whole log,
# through the same recovery code, without decoding again what an earlier boot (or the replay
# oracle) decoded from the same bytes.
DECODED_BATCHES_KEPT = 16_384


@dataclass
class Result:
    seed: int
    steps: int
    virtual_ms: int
    trace: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    faults: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    failed_step: int | None = None

    @property
    def ok(self) -> bool:
        return not self.violations

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()


class Simulation:
    def __init__(
        self,
        seed: int,
        steps: int,
        *,
        rates: FaultRates | None = None,
        root: Path | None = None,
        pipelined: bool = False,
        cleaner_backoff_ms: int | None = SIM_CLEANER_BACKOFF_MS,
        copier: bool = False,
        copier_listener: bool = False,
        churn: bool = False,
        undo_deletions: bool = False,
        clean_stops: bool = False,
    ) -> None:
        self.seed, self.steps = seed, steps
        # None: Kafka's 15 s, longer than most lives of the sim's kemu (a crash every few
        # simulated seconds), so the cleaner would seldom run
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.pipelined = pipelined
        # --copier: the consume-transform-produce role (copier.py); --copier-listener: with
        # transactions spanning polls, ended by a rebalance listener
        self.copier = copier or copier_listener
        self.copier_class = ListeningCopier if copier_listener else Copier
        # --churn: topics created and deleted (churn.py), and kemu's topic crash points drawn
        # from a stream of their own
        self.churn = ChurnLedger() if churn else None
        self._churn_points = random.Random(f"{seed}-churn-points")
        # --undo-deletions: a power loss undoes deletions no directory sync made durable
        self.undo_deletions = undo_deletions
        # --clean-stops: kemu stopped as a user stops it, drawn from a stream of their own
        self.clean_stops = clean_stops
        self._stop_rng = random.Random(f"{seed}-clean-stop")
        self.stopping = False
        self.rng = random.Random(seed)
        self.rates = rates if rates is not None else FaultRates()
        self.root = root
        self.trace: list[str] = []
        self.step = 0
        self.ledger = Ledger()
        self.oracles = Oracles(seed)
        self.chaos = Chaos(self.rng, self.rates)
        self._cleaner_rng = random.Random(f"{seed}-cleaner")
        self._dead_letter_rng = random.Random(f"{seed}-dead-letter")
        # whether a crash point's crash is a power loss, and the torn writes power losses leave
        self._power_rng = random.Random(f"{seed}-power")
        self._tear_rng = random.Random(f"{seed}-tear")
        self.violations: list[str] = []
        self.logged: list[str] = []  # kemu's error log events (quiet_logs)
        self.failed_step: int | None = None
        self.settling = False  # after the last step: no fault of any kind, crash points too
        self._waiting_for: tuple[str, bytes] | None = None  # see _caught_up

    # --- the run ----------------------------------------------------------------------------------

    def run(self) -> Result:
        if sys.flags.optimize:
            # the share windows' check_invariants is asserts: -O would check less, silently
            raise RuntimeError("the simulation does not run under python -O (PYTHONOPTIMIZE)")
        with (
            quiet_logs(self.logged),
            fewer_collections(),
            share_service.DECODED_BATCHES.enabled(DECODED_BATCHES_KEPT),
            transaction_service.DECODED_BATCHES.enabled(DECODED_BATCHES_KEPT),
            offsets_log.DECODED_BATCHES.enabled(DECODED_BATCHES_KEPT),
            counting_expiries(self.chaos.note),
        ):
            return self._run()

    def _run(self) -> Result:
        loop = SimLoop()
        directory = Path(tempfile.mkdtemp(prefix=f"kemu-sim-{self.seed}-", dir=self.root))
        previous_loop = None
        with contextlib.suppress(RuntimeError):
            previous_loop = asyncio.get_event_loop_policy().get_event_loop()
        asyncio.set_event_loop(loop)
        try:
            with deterministic(self.rng, loop), lookups_without_getpid(loop):
                crash_points.set_crash_hook(self._crash_point)
                try:
                    loop.run_until_complete(self._main(loop, directory))
                finally:
                    crash_points.set_crash_hook(None)
                    self.kemu.disk.uninstall()
                    if self.kemu.up:
                        self.kemu.crash()
                    self._drain(loop)
        finally:
            # not closed: the coroutines of killed processes, collected later, may still
            # schedule their last callbacks on it (they never run)
            asyncio.set_event_loop(previous_loop)
            shutil.rmtree(directory, ignore_errors=True)
        return Result(
            self.seed,
            self.step,
            round((loop.time() - START_S) * 1000),
            self.trace,
            self.violations,
            dict(sorted(self.chaos.injected.items())),
            dict(sorted(self.ledger.counts.items())),
            self.failed_step,
        )

    def _drain(self, loop: SimLoop) -> None:
        for actor in getattr(self, "actors", ()):
            self._kill(actor)
        loop.bury()

    async def _main(self, loop: SimLoop, directory: Path) -> None:
        self.loop = loop
        self.network = SimNetwork(loop, random.Random(self.rng.getrandbits(64)))
        self.network.max_latency_ms = self.rng.choice((1, 3, 10))
        flush = self.rng.choice(("always", "interval"))
        brokers = self.rng.randint(1, 3)
        self.kemu = SimKemu(
            loop,
            self.network,
            directory / "data",
            brokers,
            {"kemu.log.flush": flush}
            | (
                {}
                if self.cleaner_backoff_ms is None
                else {"log.cleaner.backoff.ms": str(self.cleaner_backoff_ms)}
            ),
            cluster_id="kemu-sim-cluster",
            undo_deletions=self.undo_deletions,
        )
        self.power_loss = flush == "always"
        self.kemu.disk.install()
        self.kemu.on_boot.append(self._prepare)
        self.log(
            f"seed {self.seed}: {brokers} brokers, kemu.log.flush={flush}, "
            f"latency <= {self.network.max_latency_ms} ms"
        )
        await self.kemu.boot()
        self.ledger.share_member = self._share_member
        bootstrap = self.kemu.bootstrap
        streams = [random.Random(self.rng.getrandbits(64)) for _ in range(10)]
        # --pipelined: each input producer's max_in_flight from a stream of its own, so that it
        # moves no other draw (without it, every seed runs as before pipelining existed)
        in_flight = [1, 1]
        if self.pipelined:
            pipelining = random.Random(f"{self.seed}-max-in-flight")
            in_flight = [pipelining.randint(2, 5) for _ in range(2)]
            self.log(f"input producers' max_in_flight: {in_flight[0]}, {in_flight[1]}")
        self.actors: list[Actor] = [
            InputProducer(
                "producer-1", bootstrap, self.ledger, streams[0], max_in_flight=in_flight[0]
            ),
            InputProducer(
                "producer-2", bootstrap, self.ledger, streams[1], max_in_flight=in_flight[1]
            ),
            Pipeline("pipeline-1", bootstrap, self.ledger, streams[2]),
            Pipeline("pipeline-2", bootstrap, self.ledger, streams[3]),
            Reader("reader-1", bootstrap, self.ledger, streams[4]),
            Verifier("verifier", bootstrap, self.ledger, streams[5]),
            GroupMember("member-1", bootstrap, self.ledger, streams[6]),
            GroupMember("member-2", bootstrap, self.ledger, streams[7]),
            Operator("operator", bootstrap, self.ledger, streams[8]),
            PlainProducer("plain-1", bootstrap, self.ledger, streams[9]),
        ]
        if self.copier:  # streams of their own: no other role's draw moves
            self.actors += [
                self.copier_class(
                    name, bootstrap, self.ledger, random.Random(f"{self.seed}-{name}")
                )
                for name in ("copier-1", "copier-2")
            ]
        if self.churn is not None:
            self.actors.append(
                Churner(
                    "churner",
                    bootstrap,
                    self.ledger,
                    random.Random(f"{self.seed}-churner"),
                    churn=self.churn,
                )
            )
        self.dead_until: dict[str, int] = {}
        self.down_until = 0
        for actor in self.actors:
            actor.start(loop)
        for step in range(1, self.steps + 1):
            self.step = step
            await asyncio.sleep(self.rng.randint(10, 300) / 1000)
            # checked before the step's faults: a crash drawn now ends a state that was checked
            # (nothing else a fault does changes kemu's state before the loop runs again)
            if not self._check():
                return
            self._faults()
            self._revive()
        await self._settle()

    # --- faults --------------------------------------------------------------------------------

    def _faults(self) -> None:
        chaos, rates = self.chaos, self.rates
        if chaos.roll(rates.crash) and self.kemu.up:
            self._crash_kemu("random step", power_loss=self.power_loss and self.rng.random() < 0.5)
        if chaos.roll(rates.cut) and self.kemu.up:
            pipes = self.network.connections_of(self.kemu.process)  # type: ignore[arg-type]
            if pipes:
                self.network.cut(self.rng.choice(pipes))
                chaos.note("net.cut")
                self.log("cut a connection")
        if chaos.roll(rates.tear) and self.kemu.up:
            pipes = self.network.connections_of(self.kemu.process)  # type: ignore[arg-type]
            if pipes:
                self.network.tear(self.rng.choice(pipes))
                chaos.note("net.torn")
                self.log("tear the next frame of a connection")
        if chaos.roll(rates.rule) and self.kemu.up:
            runtime = self.kemu.runtime()
            self.log(self.chaos.fault_rule(runtime, sorted(runtime.cluster.nodes)))
        if chaos.roll(rates.client_death):
            living = [actor for actor in self.actors if actor.alive]
            if living:
                victim = self.rng.choice(living)
                self._kill(victim)
                self.dead_until[victim.name] = self.step + self.rng.randint(1, 100)
                chaos.note(f"client.death.{victim.kind}")
                self.log(f"{victim.name} dies")
        if chaos.roll(rates.stall):
            self._stall()
        # one draw a step (with the flag), taken or not
        stop = self.clean_stops and self._stop_rng.random() < rates.crash
        if stop and self.kemu.up and not self.stopping:
            self._stop_kemu()

    def _stop_kemu(self) -> None:
        """kemu stopped cleanly, at the rate of crashes at random steps: a boot after it reads
        the clean-shutdown marker (its active segments from their summaries)."""
        assert self.kemu.process is not None
        self.ledger.violations += self.oracles.check_logs(self.kemu.runtime(), "before a stop")
        self.stopping = True
        self.log("kemu is stopped (a clean shutdown)")
        self.loop.create_task(self._stopping(), context=self.kemu.process.context)

    async def _stopping(self) -> None:
        await self.kemu.stop()
        self.stopping = False
        self.chaos.note("stop.clean")
        self.down_until = self.step + self._stop_rng.randint(1, 30)
        self.log("kemu has stopped")

    def _stall(self) -> None:
        """A client that holds share records or an open transaction at a point of its work
        (``Actor.stall_points``) will go quiet there, the next time it gets there
        (``stalls.py``)."""
        candidates = [
            (actor, point)
            for actor in self.actors
            if actor.alive and actor.stall_armed is None
            for point in actor.stall_points
        ]
        if candidates:
            actor, point = self.rng.choice(candidates)
            actor.stall_armed = (self.rng.uniform(*STALL_SECONDS), point)
            actor.stalling = self._stalling

    def _stalling(self, actor: Actor, point: str, seconds: float) -> None:
        if self.settling or actor.process is None:
            return
        self.loop.freeze(actor.process, seconds)
        self.chaos.note(f"stall.{actor.kind}.{point}")
        self.log(f"{actor.name} stalls for {seconds:.1f} s at {point}")

    def _crash_point(self, name: str) -> None:
        # The cleaner's points draw from their own stream: when the cleaner runs moves no other
        # choice, so a seed's trace does not depend on the sim's segment size or cleaner backoff.
        # The KIP-1191 dead-letter points likewise, at their own higher rate: a record reaches
        # them only at its last delivery, so at crash_point's rate kemu never died there.
        roll, rate = self.rng.random, self.rates.crash_point
        if name.startswith("topic."):
            if self.churn is None:
                return  # only --churn's workload creates and deletes topics of its own
            roll = self._churn_points.random
            # reached once or twice a simulated second: at crash_point's rate kemu would seldom
            # die there
            rate = TOPIC_POINT_RATE if rate > 0 else 0.0
        elif name.startswith("clean."):
            roll = self._cleaner_rng.random
        elif name in ("share.archiving", "share.dead_lettered"):
            roll, rate = self._dead_letter_rng.random, self.rates.dead_letter_point
            self.ledger.count(f"reached.{name}")
        if name == "clean.swap_committed":
            self.ledger.count("cleaner.cleaned")  # a partition's cleaned segments swapped in
        # Settling: no crash point fires (nor draws). A kemu still dying there every few dozen
        # simulated seconds seldom expires the share-group member of a pipeline life that
        # ended while it was down (each boot gives every member a fresh 45 s session, as
        # Kafka's coordinator does), and no live member reads the partitions assigned to it
        # (seed 2001 x 10000: 1,012 outputs missing after the 600 s).
        if self.settling or not self.kemu.up or not roll() < rate:
            return
        # a power loss there too (as at random steps): the unsynced tails, a torn write, and
        # the cleaner's renames not yet made durable go with it
        chance = self.rates.power_loss_at_point
        power_loss = self.power_loss and self._power_rng.random() < chance
        self._crash_kemu(f"crash point {name}", power_loss=power_loss)
        raise SimulatedCrash(name)

    def _crash_kemu(self, why: str, *, power_loss: bool) -> None:
        # the log ends the crash may take back, learnt at the last moment (a crash point may
        # fire after appends no step check saw): the boot's must not be below them
        self.ledger.violations += self.oracles.check_logs(self.kemu.runtime(), "before a crash")
        # At a crash point the dying process's stack still unwinds (SimulatedCrash), and a
        # ``with`` or ``finally`` on the way out (a buffered file closed) writes what a real
        # power loss would have stopped: the power goes once it has unwound.
        later = power_loss and why != "random step"
        self.stopping = False  # a stop under way ends with its process
        lost = self.kemu.crash(power_loss=power_loss and not later, tear=self._tear_rng)
        kind = "power_loss" if power_loss else "process"
        self.chaos.note(f"crash.{kind}" if why == "random step" else f"crash.{why.split()[-1]}")
        if later:
            self.chaos.note("crash.power_loss_at_point")
            self.loop.call_soon(self._lose_power, context=contextvars.Context())
        if power_loss and not later:
            self.oracles.forget_cut({_partition_of(name) for name in self.kemu.disk.cut})
        self.down_until = self.step + self.rng.randint(1, 30)
        left = self._torn(power_loss and not later)
        self.log(f"kemu crashes ({kind}, {why}), {lost} unsynced bytes lost{left}")

    def _lose_power(self) -> None:
        lost = self.kemu.disk.lose_unsynced(self._tear_rng)
        self.oracles.forget_cut({_partition_of(name) for name in self.kemu.disk.cut})
        self.log(f"the power goes: {lost} unsynced bytes lost{self._torn(True)}")

    def _torn(self, power_loss: bool) -> str:
        torn = self.kemu.disk.torn if power_loss else 0
        if torn:
            self.chaos.note("crash.torn_tail")
        left = f", a torn write of {torn} bytes left" if torn else ""
        restored = self.kemu.disk.restored if power_loss else 0
        if restored:
            self.chaos.note("crash.deletions_undone")
            left += f", {restored} deleted names back"
        return left

    def _kill(self, actor: Actor) -> None:
        if actor.process is not None and not actor.process.dead:
            actor.process.dead = True
            self.network.process_died(actor.process)

    def _revive(self) -> None:
        if not self.kemu.up and self.step >= self.down_until:
            self.loop.create_task(self._reboot())
            self.down_until = self.steps + 1 << 30  # one boot at a time
        for actor in self.actors:
            if not actor.alive and self.dead_until.get(actor.name, 0) <= self.step:
                actor.start(self.loop)
                self.log(f"{actor.name} starts again")

    async def _reboot(self) -> None:
        await self.kemu.boot()
        self.ledger.violations += self.oracles.check_logs(self.kemu.runtime(), "after a boot")
        self.log(f"kemu restarts (incarnation {self.kemu.incarnation})")

    def _share_member(self, group_id: str, member_id: str) -> tuple[int, frozenset[Any]] | None:
        service = self.kemu.runtime().services.built(GROUP_COORDINATOR) if self.kemu.up else None
        group = None if service is None else service.registry.get(group_id)
        member = getattr(group, "members", {}).get(member_id)
        return None if member is None else (member.member_epoch, member.assigned)

    # --- checks --------------------------------------------------------------------------------

    def _check(self) -> bool:
        found = list(self.ledger.violations) + [f"client: {u}" for u in self.ledger.unexpected]
        self.ledger.violations.clear()
        self.ledger.unexpected.clear()
        found += [f"event loop: {e}" for e in self.loop.exceptions if "SimulatedCrash" not in e]
        self.loop.exceptions.clear()
        found += [f"kemu logged {e}" for e in self.logged]
        self.logged.clear()
        if self.kemu.up:
            self.oracles.forget_share_groups(self.ledger.reset)
            self.ledger.reset.clear()
            found += self.oracles.check(
                self.kemu.runtime(),
                self.loop.now_ms(),
                self.ledger.group_committed,
                frozenset(self.ledger.resetting),
            )
            if self.churn is not None:
                found += churn_check(self.kemu.runtime(), self.churn)
        self._summary()
        if found:
            self.violations = found
            self.failed_step = self.step
            for violation in found:
                self.log(f"VIOLATION {violation}")
            return False
        return True

    def _summary(self) -> None:
        offsets = self.oracles.log_offsets
        ends = " ".join(
            f"{topic}:" + ",".join(str(offsets.get((topic, i), (0, 0))[1]) for i in range(3))
            for topic in (INPUT, OUTPUT)
        )
        ledger = self.ledger
        self.log(
            f"leo {ends} produced {len(ledger.produced)} piped {len(ledger.pipe_done)} "
            f"accepted {len(ledger.accepted)} seen {sum(len(s) for s in ledger.seen.values())} "
            f"grouped {len(ledger.group_seen)}"
        )

    async def _settle(self) -> None:
        """Faults off, everyone back, producers stopped; wait for the pipeline, then judge."""
        self.log("settling: faults off, producers stop")
        self.settling = True
        for actor in self.actors:
            if isinstance(actor, (InputProducer, PlainProducer)):
                self._kill(actor)
                self.dead_until[actor.name] = 1 << 62
        self.down_until = min(self.down_until, self.step)
        deadline = self.loop.time() + SETTLE_DEADLINE_S
        while self.loop.time() < deadline:
            self.step += 1
            await asyncio.sleep(1.0)
            self._revive()
            if not self._check():
                return
            if self.kemu.up and self._caught_up():
                break
        self._final()

    def _caught_up(self) -> bool:
        """The verifier read every committed input value and every acknowledged ``plain``
        value; the pipelines caught up with the inputs (``exactly_once.caught_up``) and the
        consumer group too. One value still waited for is enough to answer no: the one found
        at the last call is asked about first, and the others only once it is through."""
        if self._waiting_for is not None and self._still_waiting(*self._waiting_for):
            return False
        self._waiting_for = next(self._waited_for(), None)
        return self._waiting_for is None

    def _waited_for(self) -> Iterator[tuple[str, bytes]]:
        """Every (what, value) the settling still waits for, newest inputs first."""
        ledger = self.ledger
        inputs = ledger.seen_values.get(INPUT, {})
        outputs = ledger.seen_values.get(OUTPUT, {})
        dead = {value for value, _ in ledger.dead_letters.values()}
        excused = self._excused()
        for value in reversed(ledger.seen.get(INPUT, {}).values()):
            if pipeline_owes(value, outputs, dead, excused):
                yield "output", value
            if value not in ledger.group_values:
                yield "grouped", value
        for value in ledger.produced:
            if value not in inputs:
                yield "input", value
        plain = ledger.seen_values.get(PLAIN, {})
        for (_, topic, _), answered in ledger.acknowledged.items():
            if topic == PLAIN:
                for _, value in answered:
                    if value not in plain:
                        yield "plain", value

    def _still_waiting(self, what: str, value: bytes) -> bool:
        """Whether (what, value), once waited for, still is."""
        ledger = self.ledger
        if what == "input":  # committed (``produced`` only grows), not read yet
            return value not in ledger.seen_values.get(INPUT, {})
        if what == "plain":  # acknowledged (for good), not read yet
            return value not in ledger.seen_values.get(PLAIN, {})
        if value not in ledger.seen_values.get(INPUT, {}):
            return False  # no longer a committed input value (its record was replaced)
        if what == "grouped":
            return value not in ledger.group_values
        dead = {value for value, _ in ledger.dead_letters.values()}
        return pipeline_owes(value, ledger.seen_values.get(OUTPUT, {}), dead, self._excused())

    def _final(self) -> None:
        seen = self.ledger.seen
        inputs = list(seen.get(INPUT, {}).values())
        outputs = list(seen.get(OUTPUT, {}).values())
        found = []
        lost = self.ledger.produced - set(inputs)
        if lost:
            found.append(f"{len(lost)} committed input values lost, e.g. {sorted(lost)[:3]}")
        if len(set(inputs)) != len(inputs):
            found.append("an input value is committed twice")
        dead = self._dead_letters()
        found += pipeline_once(
            seen.get(INPUT, {}),
            outputs,
            dead,
            excused=self._excused(),
            committed=self.ledger.pipe_done.keys(),
            delivered=self.ledger.pipe_delivered,
            limit=PIPE_DELIVERY_LIMIT,
        )
        found += self._group_final(seen.get(INPUT, {}))
        found += [f"kemu logged {e}" for e in self.logged]
        found += self._order_final(seen)
        if self.kemu.up:
            found += self.oracles.final(self.kemu.runtime())
            if self.copier:
                found += copier_final(self.kemu.runtime(), seen.get(INPUT, {}))
            if self.churn is not None:
                found += churn_check(self.kemu.runtime(), self.churn)
        self.log(f"final: {len(inputs)} inputs, {len(outputs)} outputs, {len(dead)} dead letters")
        if found:
            self.violations = found
            self.failed_step = self.step
            for violation in found:
                self.log(f"VIOLATION {violation}")

    def _order_final(self, seen: dict[str, dict[tuple[int, int], bytes]]) -> list[str]:
        """Per partition, each producer's acknowledged records (an input producer's of
        committed transactions) are in the log at the offsets it was answered, once each, in the
        order it sent them (pipelined or not); and no value is in ``plain`` twice, acknowledged
        or not (a failed send may be in the log, but once)."""
        found = []
        plain = list(seen.get(PLAIN, {}).values())
        if len(set(plain)) != len(plain):
            twice = sorted({v for v in plain if plain.count(v) > 1})
            found.append(f"plain: {len(twice)} values written twice, e.g. {twice[:3]}")
        for (producer, topic, partition), answered in sorted(self.ledger.acknowledged.items()):
            records = seen.get(topic, {})
            offsets = [offset for offset, _ in answered]
            if offsets != sorted(offsets) or len(set(offsets)) != len(offsets):
                found.append(
                    f"{producer}: {topic}-{partition} answered offsets out of send order: "
                    f"{offsets[:20]}"
                )
            wrong = [(o, v) for o, v in answered if records.get((partition, o)) != v]
            if wrong:
                found.append(
                    f"{producer}: {topic}-{partition} acknowledged records not at their offsets, "
                    f"e.g. {wrong[:3]}"
                )
        return found

    def _dead_letters(self) -> list[DeadLetterSeen]:
        """What the verifier read of the pipelines' DLQ topic."""
        return [
            DeadLetterSeen(partition, offset, value, headers)
            for (partition, offset), (value, headers) in sorted(self.ledger.dead_letters.items())
        ]

    def _excused(self) -> set[bytes]:
        """Output values an operator's data-partition abort took: every value a pipeline
        transaction asked to commit (the answer may be lost) wrote to a partition the operator
        aborted it on."""
        sends = self.ledger.pipe_sends
        return {v for key in self.ledger.tool_aborted for v in sends.get(key, ())}

    def _group_final(self, inputs: dict[tuple[int, int], bytes]) -> list[str]:
        """At least once from the committed offset: every committed input record below the
        group's last confirmed commit of its partition was handed to a member, and (the group
        having caught up) every committed input value was."""
        found = []
        handed = self.ledger.group_seen
        committed = self.ledger.group_committed
        skipped = sorted(
            where
            for where in inputs
            if where < (where[0], committed.get((INPUT, where[0]), 0)) and where not in handed
        )
        if skipped:
            found.append(
                f"group {CONSUMER_GROUP}: {len(skipped)} committed input records below a "
                f"committed offset never handed to a member, e.g. {skipped[:3]}"
            )
        missing = set(inputs.values()) - set(handed.values())
        if missing:
            found.append(
                f"group {CONSUMER_GROUP}: {len(missing)} committed input values never consumed, "
                f"e.g. {sorted(missing)[:3]}"
            )
        return found

    def _prepare(self, server: Any) -> None:
        if self.kemu.incarnation == 1:
            prepare(server)
        else:
            self.ledger.violations += lost_settings(server)

    def log(self, event: str) -> None:
        self.trace.append(f"{self.step:6d} {self.loop.now_ms() - round(START_S * 1000):9d} {event}")


def _partition_of(directory: str) -> tuple[str, int]:
    """(topic, index) of a partition's directory name, ``topic-index``."""
    topic, _, index = directory.rpartition("-")
    return topic, int(index)
