"""The simulation with pipelined input producers (``--pipelined``: max_in_flight 2-5 from the
seed): per partition, each producer's acknowledged records of committed transactions are in the
log at the offsets it was answered, once each, in the order it sent them."""

from __future__ import annotations

from kemu.testing.sim.run import Simulation


def test_pipelined_producers_keep_send_order_through_faults() -> None:
    # Seed 2 (before --pipelined drew 2-5): concurrent sends took their sequences in the order
    # their topic lookups finished, not the order they were called, so answered offsets went
    # back (0, 5, 4, 2, 1); TransactionalProducer.send_many now takes them in call order.
    result = Simulation(2, 100, pipelined=True).run()
    assert result.ok, (result.violations, result.trace[-30:])
    assert any("max_in_flight" in line for line in result.trace[:5])
    assert result.counts.get("producer.committed", 0) > 0
