"""Every field name kemu's code gives a response class exists in some version of that class.

``wire.build`` drops fields a version lacks (that is how one description serves every version),
and raises for a name no version has. This test finds such names without running the handler:
it reads each ``ctx.make("Class", field=...)`` and ``ctx.respond(field=...)`` in ``kemu/`` and
checks the field against the union, over every version of every API, of that class's fields.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from collections import defaultdict
from functools import cache
from pathlib import Path

from kio.schema.index import api_key_map

from kemu.protocol import wire

KEMU = Path(wire.__file__).resolve().parents[1]


@cache
def fields_by_class_name() -> dict[str, frozenset[str]]:
    """Class name -> the union of its fields over every version of every API kemu can decode."""
    found: dict[str, set[str]] = defaultdict(set)
    keys = set(api_key_map) | {key for key, _ in wire.KEMU_SCHEMA_PACKAGES}
    for api_key in keys:
        versions = wire.known_versions(api_key)
        assert versions is not None
        for version in range(versions[0], versions[1] + 1):
            for module_of in (wire.request_module, wire.response_module):
                try:
                    module = module_of(api_key, version)
                except Exception:  # a gap in the version range
                    continue
                for name, value in vars(module).items():
                    if isinstance(value, type) and dataclasses.is_dataclass(value):
                        found[name].update(f.name for f in dataclasses.fields(value))
    return {name: frozenset(names) for name, names in found.items()}


def response_class_name(module_path: Path) -> str | None:
    """The top-level response class of a handler module, from its API_KEY."""
    relative = module_path.relative_to(KEMU.parent).with_suffix("")
    module = importlib.import_module(".".join(relative.parts))
    api_key = getattr(module, "API_KEY", None)
    if not isinstance(api_key, int):
        return None
    versions = wire.known_versions(api_key)
    assert versions is not None
    return wire.response_schema(api_key, versions[1]).__name__


def literal_calls(tree: ast.AST, method: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "ctx"
    ]


def unknown_fields() -> list[str]:
    classes = fields_by_class_name()
    problems: list[str] = []
    for path in sorted(KEMU.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for call in literal_calls(tree, "make"):
            if not call.args or not isinstance(call.args[0], ast.Constant):
                continue
            class_name = call.args[0].value
            names = classes.get(class_name)
            if names is None:
                problems.append(f"{path.name}:{call.lineno}: no API has a class {class_name}")
                continue
            for keyword in call.keywords:
                if keyword.arg is not None and keyword.arg not in names:
                    problems.append(f"{path.name}:{call.lineno}: {class_name}.{keyword.arg}")
        responds = literal_calls(tree, "respond")
        top = response_class_name(path) if responds else None
        for call in responds if top else ():
            for keyword in call.keywords:
                if keyword.arg is not None and keyword.arg not in classes[top]:
                    problems.append(f"{path.name}:{call.lineno}: {top}.{keyword.arg}")
    return problems


def test_every_literal_response_field_exists_in_some_version() -> None:
    assert unknown_fields() == []


def test_the_check_sees_a_misspelt_field() -> None:
    classes = fields_by_class_name()
    assert "leader_epoch" in classes["MetadataResponsePartition"]
    assert "leader_epoc" not in classes["MetadataResponsePartition"]
