"""The control API as a user reaches it: ``kemu serve --control-port`` prints its URL in the ready
line, ``/openapi.json`` describes every route, ``kemu ctl`` wraps every verb, and bad input
(unknown verb, bad JSON, unknown names, impossible values) gets a 4xx with a message and
changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

from kemu.control.client import VERBS
from kemu.testing.plugin import KemuProcess

pytestmark = [pytest.mark.integration, pytest.mark.process]


@pytest.fixture
def kemu(kemu_factory: type[KemuProcess]) -> KemuProcess:
    return kemu_factory(brokers=2, with_control=True).start()


def http(kemu: KemuProcess, method: str, path: str, raw: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(kemu.control_url + path, data=raw, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ctl(kemu: KemuProcess, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kemu.cli", "ctl", "--control", kemu.control_url, *words],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ready_line_and_openapi(kemu: KemuProcess) -> None:
    assert kemu.control_url.startswith("http://127.0.0.1:")
    assert kemu.bootstrap.count(",") == 1  # the bootstrap list is parsed as before
    status, spec = http(kemu, "GET", "/openapi.json")
    assert status == 200 and spec["openapi"].startswith("3.")
    described = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    for verb in VERBS.values():
        assert (verb.method, verb.path) in described, verb


def test_root_leads_to_the_dashboard(kemu: KemuProcess) -> None:
    with urllib.request.urlopen(kemu.control_url + "/", timeout=10) as answer:
        assert answer.url == kemu.control_url + "/dashboard"
        assert answer.headers["Content-Type"].startswith("text/html")
        assert b"<title>kemu dashboard</title>" in answer.read()


def test_ctl_wraps_the_verbs(kemu: KemuProcess) -> None:
    added = ctl(kemu, "add-fault", "api=produce", "error=NOT_LEADER_OR_FOLLOWER", "count=3")
    assert added.returncode == 0, added.stderr
    rule = json.loads(added.stdout)
    assert (rule["api_key"], rule["error_code"], rule["count"]) == (0, 6, 3)
    listed = ctl(kemu, "faults")
    assert [r["id"] for r in json.loads(listed.stdout)] == [rule["id"]]
    body = ctl(kemu, "add-fault", "--json", '{"api": "fetch", "kind": "torn"}')
    assert body.returncode == 0, body.stderr
    assert json.loads(ctl(kemu, "clear-faults").stdout) == {"removed": 2}
    health = json.loads(ctl(kemu, "health").stdout)
    assert health["brokers"] == [1, 2] and health["clock"] == "real"
    down = ctl(kemu, "broker-down", "2")
    assert json.loads(down.stdout)["down"] is True
    assert json.loads(ctl(kemu, "broker-up", "2").stdout)["down"] is False


def test_ctl_bad_usage(kemu: KemuProcess) -> None:
    unknown = ctl(kemu, "explode")
    assert unknown.returncode == 2 and "unknown verb 'explode'" in unknown.stderr
    assert "add-fault" in unknown.stderr  # the verbs are listed
    refused = ctl(kemu, "add-fault", "api=produce", "error=NO_SUCH_ERROR")
    assert refused.returncode == 1 and "400: unknown error 'NO_SUCH_ERROR'" in refused.stderr
    bad_json = ctl(kemu, "add-fault", "--json", "{nope")
    assert bad_json.returncode == 2 and "--json is not JSON" in bad_json.stderr
    missing = ctl(kemu, "broker-down")
    assert missing.returncode == 2 and "broker-down takes <node>" in missing.stderr
    real = ctl(kemu, "advance", "duration=1m")
    assert real.returncode == 1 and "--clock virtual" in real.stderr
    assert json.loads(ctl(kemu, "faults").stdout) == []


@pytest.mark.parametrize(
    ("method", "path", "raw", "status", "message"),
    [
        ("GET", "/no-such-verb", None, 404, "unknown verb: GET /no-such-verb"),
        ("PUT", "/faults", None, 405, "PUT is not allowed on /faults"),
        ("POST", "/faults", b"{not json", 400, "the body is not JSON"),
        ("POST", "/faults", b'"a string"', 400, "a rule is a JSON object"),
        ("POST", "/brokers/9/down", None, 404, "no broker 9"),
        ("POST", "/brokers/x/down", None, 400, "broker must be an integer"),
        ("POST", "/partitions/missing/0/leader", b'{"broker": 1}', 404, "unknown topic"),
        ("GET", "/share-groups/g/missing/0", None, 404, "unknown topic"),
        ("POST", "/transactions/none/abort", None, 404, "unknown transactional id"),
        ("POST", "/clock/advance", b'{"duration": "1m"}', 409, "the clock is real"),
        ("DELETE", "/faults/77", None, 404, "no fault rule 77"),
    ],
)
def test_bad_input_is_a_4xx_with_a_message(
    kemu: KemuProcess, method: str, path: str, raw: bytes | None, status: int, message: str
) -> None:
    answer_status, answer = http(kemu, method, path, raw)
    assert answer_status == status
    assert message in answer["error"]
    assert http(kemu, "GET", "/faults") == (200, [])
    assert [b["down"] for b in http(kemu, "GET", "/brokers")[1]] == [False, False]


def test_the_last_broker_cannot_go_down(kemu: KemuProcess) -> None:
    assert http(kemu, "POST", "/brokers/1/down")[0] == 200
    status, answer = http(kemu, "POST", "/brokers/2/down")
    assert status == 409 and "at least one broker" in answer["error"]
    assert http(kemu, "POST", "/brokers/1/up")[0] == 200


def test_without_control_port_nothing_listens(kemu_factory: type[KemuProcess]) -> None:
    plain = kemu_factory(brokers=1).start()
    assert plain.control_url == "" and "," not in plain.bootstrap
    with pytest.raises(RuntimeError, match="with_control=True"):
        _ = plain.control


def test_ctl_finds_the_control_api_in_kemu_control_or_at_the_usual_port(
    kemu: KemuProcess,
) -> None:
    import os

    command = [sys.executable, "-m", "kemu.cli", "ctl", "health"]
    environment = {**os.environ, "KEMU_CONTROL": kemu.control_url}
    found = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["brokers"] == [1, 2]
    # without either, http://127.0.0.1:9192; the message says where the URL came from
    environment = {**os.environ, "KEMU_CONTROL": "http://127.0.0.1:1"}
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)
    assert refused.returncode == 2
    assert refused.stderr.startswith("kemu ctl: cannot reach http://127.0.0.1:1: "), refused.stderr
    assert "(from $KEMU_CONTROL: start kemu with --control-port 9192" in refused.stderr
