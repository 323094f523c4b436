"""Differences between kemu and Kafka 4.4.0 that ``make conformance-diff`` finds and kemu keeps
on purpose, each with its reason (docs/conformance.md repeats them). A pair whose differences
all match one of these counts as "known", not as identical."""

from __future__ import annotations

from conformance.compare import Known

KNOWN: tuple[Known, ...] = ()
