"""Later finds of the deterministic simulation (docs/reliability.md), each kept by its seed."""

from __future__ import annotations

from kemu.testing.sim.run import Simulation


def test_a_piggybacked_acknowledgement_error_is_a_kafka_error() -> None:
    """Seed 907 found it (step 232): a ShareFetch answering an acknowledgement error
    (INVALID_RECORD_STATE for a batch no longer held) crashed kemu.client's ShareConsumer with
    AttributeError, as AcknowledgeErrorCode decodes as a plain int, not an ErrorCode."""
    result = Simulation(907, 240).run()
    assert result.ok, (result.violations, result.trace[-30:])
