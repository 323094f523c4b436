"""Deterministic simulation of kemu: the process, its clients and its crashes on virtual time
(``docs/reliability.md``). Run it with ``python -m kemu.testing.sim --seed N --steps S``."""
