"""A small blocking client of the control API (standard library only), used by ``kemu ctl`` and
by the pytest plugin's ``KemuProcess.control``.

Every verb is one row of the verb table (``kemu/control/table.py``): HTTP method, path (with
``{placeholders}`` filled from the positional arguments in order) and whether it takes a JSON
body. ``ControlClient`` has a method per verb: ``call`` under the row's Python name (positional
arguments fill the path, keyword arguments are the body), or one below with a friendlier
signature.
"""

from __future__ import annotations

import functools
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from kemu.control.table import VERBS, Verb

__all__ = ["VERBS", "ControlClient", "ControlError", "Verb", "ctl_main", "parse_fields"]


class ControlError(Exception):
    """The control API refused a call (``status`` 4xx) or could not be reached (0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class ControlClient:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def call(self, verb: str, *args: Any, body: Any = None, **fields: Any) -> Any:
        """Run a verb: positional ``args`` fill its path, ``body`` or keyword ``fields`` are
        its JSON body."""
        found = VERBS.get(verb)
        if found is None:
            raise ControlError(0, f"unknown verb {verb!r} (verbs: {', '.join(VERBS)})")
        params = found.params
        if len(args) != len(params):
            usage = " ".join(f"<{p}>" for p in params) or "no arguments"
            raise ControlError(0, f"{verb} takes {usage}")
        path = found.path
        for name, value in zip(params, args, strict=True):
            path = path.replace("{" + name + "}", urllib.parse.quote(str(value), safe=""))
        if body is None and fields:
            body = fields
        return self.request(found.method, path, body)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        # Here, not at the top: ``kemu serve`` imports this module (for its --help) and would
        # load urllib.request's http and email modules for nothing.
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        from http.client import HTTPException  # urllib.request has loaded it

        try:
            request = urllib.request.Request(
                self.url + path,
                data=data,
                method=method,
                headers={"Content-Type": "application/json"} if data is not None else {},
            )
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read()
                if answer.headers.get_content_type() != "application/json":
                    return raw.decode()  # /metrics: Prometheus text
                return json.loads(raw or b"null")
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode(errors="replace") or str(error)
            raise ControlError(error.code, message) from None
        except urllib.error.URLError as error:
            raise ControlError(0, f"cannot reach {self.url}: {error.reason}") from None
        except json.JSONDecodeError as error:
            raise ControlError(0, f"{self.url} answered something not JSON: {error}") from None
        except ValueError as error:  # urllib's "unknown url type"
            raise ControlError(0, f"not a control API URL (http://HOST:PORT): {error}") from None
        except (HTTPException, OSError) as error:
            # e.g. a Kafka port, which closes the connection on an HTTP request
            reason = str(error) or type(error).__name__
            raise ControlError(0, f"no HTTP answer from {self.url}: {reason}") from None

    # --- the verbs as methods ------------------------------------------------------------------

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Every verb of the table under its Python name, e.g. ``health()``, ``broker_down(2)``,
        ``abort_transaction("tid")``: ``call`` with the verb's name."""
        verb = _BY_METHOD.get(name)
        if verb is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return functools.partial(self.call, verb.name)

    def add_fault(self, **rule: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.call("add-fault", body=rule)
        return result

    def broker_start(self, node_id: int, *, elect_preferred: bool = False) -> dict[str, Any]:
        """Start a stopped broker again, as a follower; ``elect_preferred`` then gives it back
        the partitions it is the preferred leader of (a preferred-leader election)."""
        result: dict[str, Any] = self.call(
            "broker-start", node_id, body={"elect_preferred": elect_preferred}
        )
        return result

    def move_leader(self, topic: str, partition: int, broker: int) -> dict[str, Any]:
        result: dict[str, Any] = self.call("move-leader", topic, partition, broker=broker)
        return result

    def expire_locks(
        self, group: str, topic: str, partition: int, member_id: str | None = None
    ) -> dict[str, Any]:
        body = {} if member_id is None else {"member_id": member_id}
        result: dict[str, Any] = self.call("expire-locks", group, topic, partition, body=body)
        return result

    def release(
        self, group: str, topic: str, partition: int, first: int, last: int
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.call(
            "release", group, topic, partition, first_offset=first, last_offset=last
        )
        return result

    def archive(
        self, group: str, topic: str, partition: int, first: int, last: int
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.call(
            "archive", group, topic, partition, first_offset=first, last_offset=last
        )
        return result

    def advance(self, duration: str | int) -> dict[str, Any]:
        """Move the virtual clock: ``"15m"``, ``"60s"`` or milliseconds."""
        body = {"ms": duration} if isinstance(duration, int) else {"duration": duration}
        result: dict[str, Any] = self.call("advance", body=body)
        return result


_BY_METHOD = {verb.method_name: verb for verb in VERBS.values()}


def parse_fields(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs as a JSON object (a value that parses as JSON is taken as such)."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ControlError(0, f"expected key=value, got {pair!r}")
        try:
            fields[key] = json.loads(value)
        except ValueError:
            fields[key] = value
    return fields


def ctl_main(
    url: str, verb: str, words: list[str], body_json: str | None, *, source: str = "--control"
) -> int:
    """``kemu ctl``: print the verb's JSON answer; exit 1 when refused, 2 on bad usage.
    ``source`` says where ``url`` came from, for the message when nothing answers there."""
    import sys

    if verb == "broker" and words and words[0] in ("stop", "start"):
        verb, words = f"broker-{words[0]}", words[1:]  # kemu ctl broker stop N
    found = VERBS.get(verb)
    if found is None:
        print(f"kemu ctl: unknown verb {verb!r}; verbs:", file=sys.stderr)
        for name, known in VERBS.items():
            usage = " ".join(f"<{p}>" for p in known.params)
            print(f"  {name} {usage}".rstrip() + f"  — {known.summary}", file=sys.stderr)
        return 2
    count = len(found.params)
    args, pairs = words[:count], words[count:]
    try:
        body: Any = None
        if body_json is not None:
            try:
                body = json.loads(body_json)
            except ValueError as error:
                raise ControlError(0, f"--json is not JSON: {error}") from None
        elif pairs:
            body = parse_fields(pairs)
        if body is not None and not found.body and found.method != "POST":
            raise ControlError(0, f"{verb} takes no body")
        answer = ControlClient(url).call(verb, *args, body=body)
    except ControlError as error:
        where = ""
        unreachable = error.message.startswith(("cannot reach", "no HTTP answer"))
        if not error.status and unreachable and source != "--control":
            where = (
                f" ({source}: start kemu with --control-port 9192, or give "
                "KEMU_CONTROL=URL or --control URL)"
            )
        print(f"kemu ctl: {error}{where}", file=sys.stderr)
        return 1 if error.status else 2
    print(answer if isinstance(answer, str) else json.dumps(answer, indent=2, default=str))
    return 0
