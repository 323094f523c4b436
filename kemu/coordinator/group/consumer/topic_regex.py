"""A KIP-848 SubscribedTopicRegex as Kafka's group coordinator reads it: RE2J's syntax
(``com.google.re2j``, 1.8 in Kafka 4.4.0), matched against whole topic names. Sans-IO.

Kafka compiles the pattern with RE2J when a member brings one no member subscribes with yet
(``Utils.throwIfRegularExpressionIsInvalid``): a pattern RE2J rejects is answered
INVALID_REGULAR_EXPRESSION with "SubscribedTopicRegex `<pattern>` is not a valid regular
expression: <RE2J's description>.". Its resolutions keep the topics whose whole name matches.

kemu compiles with RE2 itself (the ``google-re2`` package), whose syntax RE2J ports. Measured
against re2j 1.8 (a Java program compiling some 130 patterns with both), they differ in:

- ``\\C`` (any byte): RE2 takes it, RE2J does not (invalid escape sequence): refused here;
- a backslash before a non-ASCII character: RE2J reads the character, RE2 refuses it: the
  backslash is dropped before RE2 compiles the pattern;
- a capture group name given twice: RE2J refuses it (duplicate capture group name), RE2 does
  not: refused here;
- nested counted repetitions multiplying past 1000 (``(a{999}){999}``): RE2J takes them, RE2
  does not; kemu answers "invalid repeat count" there, and a pattern past RE2's memory budget
  (``MAX_MEM``) likewise "pattern too large", where Kafka accepts both;
- the wording of errors: RE2J's descriptions (``DESCRIPTIONS``) stand for RE2's; an unmatched
  ``)`` is RE2J 1.8's "regexp/syntax: internal error".

Python's ``re`` differs far more: it takes backreferences, lookarounds, possessive quantifiers
and ``\\Z``, which RE2J refuses; it refuses ``\\pL``, ``\\z``, ``\\Q...\\E`` and ``(?U)``, which
RE2J takes; and it reads ``x{,2}`` as up to two x, where RE2J reads the text ``x{,2}``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType

# RE2's memory budget for one compiled pattern (its default is 8 MiB); RE2J has none.
MAX_MEM = 64 << 20

# RE2's error kinds (the text before ": " in its error) and RE2J's description of each; the
# longer of two kinds sharing a start comes first.
DESCRIPTIONS = (
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "regexp/syntax: internal error"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("invalid repetition size", "invalid repeat count"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid named capture group", "invalid named capture"),
    ("pattern too large", "pattern too large"),
)


class InvalidTopicRegex(ValueError):
    """A pattern RE2J does not compile; ``description`` is RE2J's words for why."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


@dataclass(frozen=True, slots=True)
class TopicRegex:
    pattern: str
    _compiled: object

    def matches(self, topic: str) -> bool:
        """Whether the whole of ``topic`` matches (RE2J's ``Matcher.matches``)."""
        return self._compiled.fullmatch(topic) is not None  # type: ignore[attr-defined]


@functools.cache
def _re2() -> ModuleType:
    """google-re2, imported on first use: a checkout whose environment predates the dependency
    fails only where regexes are used, saying what to do."""
    try:
        import re2
    except ImportError as missing:
        raise ImportError(
            "kemu needs google-re2 for regex subscriptions: run `make install` "
            "(or pip install google-re2)"
        ) from missing
    module: ModuleType = re2
    return module


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> TopicRegex:
    """``pattern`` compiled as RE2J reads it; raises ``InvalidTopicRegex``."""
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern on stderr
    options.max_mem = MAX_MEM
    try:
        compiled = re2.compile(_as_re2(pattern), options)
    except re2.error as error:
        raise InvalidTopicRegex(_description(error.args[0] if error.args else "")) from None
    return TopicRegex(pattern, compiled)


def check(pattern: str) -> None:
    """Raises ``InvalidTopicRegex`` if RE2J would not compile ``pattern``."""
    compile_topic_regex(pattern)


def _description(error: str | bytes) -> str:
    """RE2J's description of RE2's error (the binding passes RE2's text as bytes)."""
    text = error.decode(errors="replace") if isinstance(error, bytes) else error
    for kind, description in DESCRIPTIONS:
        if text.startswith(kind):
            if kind == "invalid perl operator" and text[len(kind) :].startswith(": (?<"):
                return "invalid named capture"  # RE2J reads "(?<" as a named group's start
            return description
    return text


def _as_re2(pattern: str) -> str:
    """``pattern`` as RE2 reads what RE2J reads in it (escaped non-ASCII characters without
    their backslash); raises ``InvalidTopicRegex`` for what only RE2J refuses."""
    out: list[str] = []
    names: set[str] = set()
    i, end = 0, len(pattern)
    quoted = in_class = False
    while i < end:
        char = pattern[i]
        if quoted:  # \Q...\E: literal text
            if pattern.startswith("\\E", i):
                quoted = False
                out.append("\\E")
                i += 2
            else:
                out.append(char)
                i += 1
            continue
        if char == "\\" and i + 1 < end:
            escaped = pattern[i + 1]
            if escaped == "C":
                raise InvalidTopicRegex("invalid escape sequence")
            if escaped == "Q" and not in_class:
                quoted = True
            out.append(escaped if ord(escaped) > 0x7F else char + escaped)
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i) and (close := pattern.find(":]", i + 2)) != -1:
                out.append(pattern[i : close + 2])
                i = close + 2
                continue
            in_class = char != "]"
        elif char == "[":
            in_class = True
            start = i + 1
            start += pattern.startswith("^", start)
            start += pattern.startswith("]", start)  # a leading ] is a literal
            out.append(pattern[i:start])
            i = start
            continue
        elif char == "(":
            name = _group_name(pattern, i)
            if name is not None:
                if name in names:
                    raise InvalidTopicRegex("duplicate capture group name")
                names.add(name)
        out.append(char)
        i += 1
    return "".join(out)


def _group_name(pattern: str, at: int) -> str | None:
    """The name of the capture group opening at ``at`` (``(?P<name>`` or ``(?<name>``)."""
    for opening in ("(?P<", "(?<"):
        if pattern.startswith(opening, at):
            close = pattern.find(">", at + len(opening))
            name = pattern[at + len(opening) : close] if close != -1 else ""
            return name if name and (name[0] not in "=!") else None
    return None
