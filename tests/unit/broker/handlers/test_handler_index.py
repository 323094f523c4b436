"""The handler index kemu serves from at start matches what the handler decorators register."""

from __future__ import annotations

from kemu.broker.handlers import REGISTRY, _index, _is_placeholder, register_placeholders


def test_index_matches_the_decorators() -> None:
    assert _index.current() == _index.HANDLERS, (
        "kemu/broker/handlers/_index.py is stale: run "
        ".venv/bin/python -m kemu.broker.handlers._index"
    )


def test_placeholders_never_replace_loaded_handlers() -> None:
    _index.current()  # imports every handler module
    register_placeholders()
    assert not any(_is_placeholder(spec) for spec in REGISTRY.values())
