"""``kemu ctl`` and ``kemu decode-share-state`` as a user meets them: a wrong URL or address, a
port that is not the control API, a missing data dir, a reader that stops reading (``| head``):
one clear line on stderr (or none for the closed pipe), never a traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

KEMU = [sys.executable, "-m", "kemu.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KEMU, *args], capture_output=True, text=True, timeout=60)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_ctl_with_something_that_is_not_a_url() -> None:
    result = run("ctl", "--control", "localhost-9192", "health")
    assert result.returncode == 2
    assert one_line(result).startswith("kemu ctl: not a control API URL (http://HOST:PORT): ")


def test_ctl_aimed_at_a_port_that_closes_without_an_http_answer() -> None:
    # What a Kafka listener does with an HTTP request.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def close_each() -> None:
            connection, _ = listener.accept()
            connection.recv(1024)
            connection.close()

        closer = threading.Thread(target=close_each, daemon=True)
        closer.start()
        result = run("ctl", "--control", f"http://127.0.0.1:{port}", "health")
        closer.join(10)
    assert result.returncode == 2
    assert one_line(result).startswith(f"kemu ctl: no HTTP answer from http://127.0.0.1:{port}: ")


@pytest.fixture
def big_answer_url() -> Iterator[str]:
    """An HTTP server answering every GET with 1 MB of JSON (more than a pipe holds)."""
    body = json.dumps({"topics": ["t" * 100] * 10_000}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_ctl_into_a_reader_that_stops_reading_is_quiet(big_answer_url: str) -> None:
    # `kemu ctl state | head` printed a BrokenPipeError traceback.
    process = subprocess.Popen(
        [*KEMU, "ctl", "--control", big_answer_url, "state"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(10) == '{\n  "topic'
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(60) == 1
    assert stderr == ""


def test_decode_share_state_refuses_a_bootstrap_without_a_port() -> None:
    result = run("decode-share-state", "--bootstrap", "localhost")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "kemu decode-share-state: error: argument --bootstrap: expected HOST:PORT, got 'localhost'"
    )


def test_decode_share_state_names_a_missing_data_dir(tmp_path: Path) -> None:
    # It printed nothing and exited 0, as for a data dir without share state.
    result = run("decode-share-state", "--data-dir", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert one_line(result) == f"kemu: no data directory {tmp_path / 'missing'}"
    empty = run("decode-share-state", "--data-dir", str(tmp_path))
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "")


def test_the_control_url_comes_from_the_flag_then_kemu_control_then_the_usual_port() -> None:
    from kemu.control.cli import control_url

    assert control_url("http://h:1", {"KEMU_CONTROL": "http://e:2"}) == ("http://h:1", "--control")
    assert control_url(None, {"KEMU_CONTROL": "http://e:2"}) == (
        "http://e:2",
        "from $KEMU_CONTROL",
    )
    assert control_url(None, {}) == ("http://127.0.0.1:9192", "the default URL")
