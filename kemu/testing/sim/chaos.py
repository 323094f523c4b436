"""Seeded faults: what can go wrong at each step, and how often.

Per step, each with its own probability (``FaultRates``): the kemu process crashes (a SIGKILL,
or a power loss taking the unsynced tails when ``kemu.log.flush=always`` makes that a fair
test); it crashes at a named crash point (``kemu.cluster.crash_points``) when one is reached; a
connection is cut or its next frame torn; a rule of the broker's fault table answers a request
with an error, late, or without applying or answering it; a client dies (without closing
anything: its share sessions, member and transaction are left to expire) and is started again
a few steps later; a client holding share records or an open transaction stalls, its
connections open, past its locks, session or transaction timeout (``stalls.py``). Every choice
comes from the simulation's seeded ``random.Random``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kemu.broker.faults import fault_table
from kemu.protocol.errors import ErrorCode
from kemu.protocol.kip1289 import ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY, TXN_SHARE_ACKNOWLEDGE_KEY

# API keys a fault rule may name (every request the workload sends), and the errors their
# answers may carry. KIP-1289's two APIs are named by the key they are registered under: the
# fault stage looks rules up by the served API's registered key, whatever wire key
# kemu.kip1289.*.api.key gives it (the simulated kemu keeps the defaults, 95 and 96).
_RULE_KEYS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    37: "CreatePartitions",
    44: "IncrementalAlterConfigs",
    61: "DescribeProducers",
    68: "ConsumerGroupHeartbeat",
    76: "ShareGroupHeartbeat",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    92: "DeleteShareGroupOffsets",
    TXN_SHARE_ACKNOWLEDGE_KEY: "TxnShareAcknowledge",
    ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY: "AddShareAcknowledgementsToTxn",
}
_RULE_ERRORS = (
    ErrorCode.not_leader_or_follower,
    ErrorCode.request_timed_out,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
)
_RULE_KINDS = ("error", "latency", "drop_before", "drop_after", "torn")


@dataclass
class FaultRates:
    """Per-step probabilities."""

    crash: float = 0.002
    crash_point: float = 0.003  # per crash point reached
    cut: float = 0.02
    tear: float = 0.01
    rule: float = 0.02
    client_death: float = 0.006
    # a client holding share records or an open transaction goes quiet (stalls.py)
    stall: float = 0.03
    # per KIP-1191 dead-letter crash point reached (share.archiving, share.dead_lettered): a
    # record reaches them only at its last delivery, a few times a thousand steps
    dead_letter_point: float = 0.25
    # the chance that a crash at a crash point is a power loss too (kemu.log.flush=always only)
    power_loss_at_point: float = 0.3

    @classmethod
    def none(cls) -> FaultRates:
        return cls(0, 0, 0, 0, 0, 0, 0, 0, 0)


class Chaos:
    def __init__(self, rng: random.Random, rates: FaultRates) -> None:
        self.rng = rng
        self.rates = rates
        self.injected: dict[str, int] = {}

    def note(self, kind: str) -> None:
        self.injected[kind] = self.injected.get(kind, 0) + 1

    def roll(self, probability: float) -> bool:
        # one draw per chance, taken or not, so that one rate's change moves no other choice
        return self.rng.random() < probability

    def fault_rule(self, runtime: Any, node_ids: list[int]) -> str:
        api_key = self.rng.choice(sorted(_RULE_KEYS))
        kind = self.rng.choice(_RULE_KINDS)
        spec: dict[str, Any] = {"api_key": api_key, "kind": kind, "count": self.rng.randint(1, 3)}
        if kind == "error":
            spec["error_code"] = int(self.rng.choice(_RULE_ERRORS))
        if kind == "latency":
            spec["latency_ms"] = self.rng.randint(10, 3000)
        if self.rng.random() < 0.5:
            spec["broker"] = self.rng.choice(node_ids)
        fault_table(runtime).add(spec)
        self.note(f"rule.{kind}")
        return f"rule {kind} on {_RULE_KEYS[api_key]} {spec}"
