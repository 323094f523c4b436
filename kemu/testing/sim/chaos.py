"""Seeded faults: what can go wrong at each step, and how often.

Per step, each with its own probability (``FaultRates``): the kemu process crashes (a SIGKILL,
or a power loss taking the unsynced tails when ``kemu.log.flush=always`` makes that a fair
test); it crashes at a named crash point (``kemu.cluster.crash_points``) when one is reached; a
connection is cut or its next frame torn; a rule of the broker's fault table answers a request
with an error, late, or without applying or answering it; a client dies (without closing
anything: its share sessions, member and transaction are left to expire) and is started again
a few steps later. Every choice comes from the simulation's seeded ``random.Random``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kemu.broker.faults import fault_table
from kemu.protocol.errors import ErrorCode

# API keys a fault rule may name, and the errors their answers may carry
_RULE_KEYS = {
    0: "Produce",
    1: "Fetch",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    26: "EndTxn",
    68: "ConsumerGroupHeartbeat",
    76: "ShareGroupHeartbeat",
    78: "ShareFetch",
    79: "ShareAcknowledge",
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

    @classmethod
    def none(cls) -> FaultRates:
        return cls(0, 0, 0, 0, 0, 0)


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
