"""Kafka error codes (re-exported from kio so nothing outside ``kemu.protocol`` imports kio)."""

from __future__ import annotations

import ast
import inspect
from functools import cache

import kio.schema.errors
from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "default_message"]


@cache
def _default_messages() -> dict[str, str]:
    """Kafka's default message per error, read from the docstrings kio generates after each
    member (they are not kept at run time, so the source is parsed once)."""
    try:
        tree = ast.parse(inspect.getsource(kio.schema.errors))
    except (OSError, TypeError):  # installed without sources: no messages, still correct codes
        return {}
    messages: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name != "ErrorCode":
            continue
        for member, doc in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(member, ast.Assign)
                and isinstance(member.targets[0], ast.Name)
                and isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)
            ):
                messages[member.targets[0].id] = doc.value.value
    return messages


def default_message(code: ErrorCode) -> str | None:
    """What a Kafka broker puts in an error_message field when it has nothing more specific."""
    if code is ErrorCode.none:
        return None
    return _default_messages().get(code.name)
