"""Start-up as a user meets it (``kemu serve`` in a subprocess): a data directory in use, a port in
use, a damaged data file and bad or unknown configs each end in one clear line on stderr and a
non-zero exit, never a traceback; unknown configs are only warned about unless
``--strict-config`` is given."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kemu.testing.plugin import KemuProcess, free_port_block

pytestmark = pytest.mark.process

LOCK_REFUSAL = "Failed to acquire lock on file .lock in {}."


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``kemu serve`` expecting it to refuse to start."""
    command = [sys.executable, "-m", "kemu.cli", "serve", "--brokers", "1", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_locked_data_dir_refuses_a_second_process_until_the_first_is_killed(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = kemu_factory(brokers=1, data_dir=data_dir).start()

    refused = serve("--port", str(free_port_block(1)), "--data-dir", str(data_dir))
    assert refused.returncode != 0
    line = one_line(refused.stderr)
    assert line.startswith("kemu: " + LOCK_REFUSAL.format(data_dir.resolve())), line
    assert "another process" in line
    assert "kemu ready" not in refused.stdout

    first.kill()  # SIGKILL: the kernel drops the flock with the process
    second = kemu_factory(brokers=1, data_dir=data_dir).start()
    assert second.bootstrap
    assert (data_dir / ".lock").read_text().strip() == str(second.process.pid)  # type: ignore[union-attr]


def test_a_data_dir_is_free_again_after_a_clean_stop(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = kemu_factory(brokers=1, data_dir=data_dir).start()
    first.stop()  # SIGTERM
    assert first.process is not None and first.process.returncode == 0
    assert kemu_factory(brokers=1, data_dir=data_dir).start().bootstrap


def test_a_port_in_use_is_named_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = serve("--port", str(port))
    assert refused.returncode != 0
    line = one_line(refused.stderr)
    assert line == (
        f"kemu: Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
    )


def test_a_port_in_use_by_a_later_broker_is_named_too() -> None:
    first = free_port_block(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first + 2))
        taken.listen()
        command = [sys.executable, "-m", "kemu.cli", "serve", "--brokers", "3"]
        refused = subprocess.run(
            [*command, "--port", str(first)], capture_output=True, text=True, timeout=60
        )
    assert refused.returncode != 0
    assert f"127.0.0.1:{first + 2}: Address already in use." in one_line(refused.stderr)


def test_unknown_configs_are_warned_about_once_each(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\nlog.retention.hour=1\n")
    process = kemu_factory(
        brokers=1,
        overrides=[
            "group.share.record.lock.duration=5000",  # a typo of ...duration.ms
            "group.share.record.lock.duration=6000",
            "group.max.size=10",  # read by the group coordinator: known
            "log.retention.minutes=5",  # a synonym: known
            "kemu.log.flush=always",  # kemu's own: known
        ],
        extra_args=["--config", str(properties)],
    ).start()
    process.stop()
    assert process.log_path is not None
    log = process.log_path.read_text()
    warned = [line for line in log.splitlines() if "isn't a known config" in line]
    assert len(warned) == 2, log
    assert any(
        "The configuration 'group.share.record.lock.duration' was supplied but isn't a known "
        "config." in line
        for line in warned
    )
    assert any("'log.retention.hour'" in line for line in warned)
    # the nearest known name, when one is near (difflib)
    assert any("Did you mean 'group.share.record.lock.duration.ms'?" in line for line in warned)
    assert any("Did you mean 'log.retention.hours'?" in line for line in warned)


def test_the_kip1289_flag_turns_the_preview_on_and_the_ready_line_says_so(
    kemu_factory: type[KemuProcess],
) -> None:
    process = kemu_factory(brokers=1, with_control=True, extra_args=["--kip1289"]).start()
    assert process.control.call("health")  # the control= field is still read
    process.stop()
    assert process.log_path is not None
    log = process.log_path.read_text()
    # the last line is the shutdown line, after the brokers closed
    lines = log.strip().splitlines()
    assert "stopped" in lines[-1] and "signal=SIGTERM" in lines[-1], log
    command = [sys.executable, "-m", "kemu.cli", "serve", "--brokers", "1", "--port", "0"]
    for extra, previews in (["--kip1289"], " previews=kip1289"), ([], ""):
        started = subprocess.Popen([*command, *extra], stdout=subprocess.PIPE, text=True)
        assert started.stdout is not None
        ready = started.stdout.readline().strip()
        started.terminate()
        started.wait(30)
        assert ready.startswith("kemu ready bootstrap=127.0.0.1:"), ready
        assert ready.endswith(previews) and ready.count("previews=") == len(extra), ready


def test_strict_config_refuses_unknown_configs_in_one_line(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("log.retention.hour=1\n")
    refused = serve(
        "--port",
        str(free_port_block(1)),
        "--strict-config",
        "--config",
        str(properties),
        "--override",
        "group.share.record.lock.duration=5000",
        "--override",
        "num.partitions=3",
    )
    assert refused.returncode != 0
    line = one_line(refused.stderr)
    assert line.startswith("kemu: --strict-config: "), line
    assert "'log.retention.hour'" in line and "'group.share.record.lock.duration'" in line
    assert "num.partitions" not in line


def test_strict_config_starts_with_known_configs(kemu_factory: type[KemuProcess]) -> None:
    process = kemu_factory(
        brokers=1,
        overrides=["num.partitions=3", "group.max.size=10", "kemu.log.flush=always"],
        extra_args=["--strict-config"],
    ).start()
    assert process.bootstrap


def test_a_bad_value_of_a_known_config_fails_with_kafkas_message() -> None:
    refused = serve(
        "--port", str(free_port_block(1)), "--override", "num.partitions=many", "--strict-config"
    )
    assert refused.returncode != 0
    assert one_line(refused.stderr) == (
        "kemu: Invalid value many for configuration num.partitions: Not a number of type INT"
    )


def test_a_bad_per_listener_listen_backlog_fails_with_kafkas_message() -> None:
    # Kafka 4.4.0 parses listener.name.<l>.socket.listen.backlog.size at start-up too (and then
    # listens with the broker-wide value: tests/unit/config/test_listen_backlog.py).
    refused = serve(
        "--port",
        str(free_port_block(1)),
        "--override",
        "listener.name.plaintext.socket.listen.backlog.size=0",
        "--strict-config",
    )
    assert refused.returncode != 0
    assert one_line(refused.stderr) == (
        "kemu: Invalid value 0 for configuration socket.listen.backlog.size: Value must be at "
        "least 1"
    )
    assert "kemu ready" not in refused.stdout


def usage_error(refused: subprocess.CompletedProcess[str]) -> str:
    """argparse's refusal: exit 2, the usage, then one ``error:`` line; no traceback."""
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "kemu ready" not in refused.stdout
    return refused.stderr.strip().splitlines()[-1]


def test_an_override_without_a_key_and_a_value_is_a_usage_error() -> None:
    # It used to start, warning about an unknown config named 'num.partitions3'.
    port = str(free_port_block(1))
    for bad in ("num.partitions3", "=3"):
        line = usage_error(serve("--port", port, "--override", bad))
        assert line == f"kemu serve: error: argument --override: expected KEY=VALUE, got '{bad}'"


def test_ports_and_broker_counts_out_of_range_are_usage_errors() -> None:
    # --port 70000 used to start and print bootstrap=127.0.0.1:70000; --brokers 0 an empty one.
    assert usage_error(serve("--port", "70000")).endswith("70000 is not a TCP port (0-65535)")
    assert usage_error(serve("--port", "-1")).endswith("-1 is not a TCP port (0-65535)")
    zero = usage_error(serve("--port", str(free_port_block(1)), "--brokers", "0"))
    assert zero.endswith("argument --brokers: at least 1 broker, not 0")
    assert usage_error(serve("--log-level", "loud")).startswith(
        "kemu serve: error: argument --log-level: invalid choice: 'loud'"
    )
    command = [sys.executable, "-m", "kemu.cli", "serve", "--brokers", "3", "--port", "65535"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert one_line(refused.stderr) == "kemu: --port 65535 leaves no room for 3 brokers"


def test_a_data_dir_that_cannot_be_used_is_named_in_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("")
    port = str(free_port_block(1))
    # It used to say "[Errno 17] File exists": true, and no help.
    refused = serve("--port", port, "--data-dir", str(a_file))
    assert refused.returncode == 1
    assert one_line(refused.stderr) == (
        f"kemu: --data-dir {a_file}: a file, not a directory (give a directory; kemu creates it "
        "when it is missing)"
    )
    refused = serve("--port", port, "--data-dir", str(a_file / "data" / "deeper"))
    assert refused.returncode == 1
    assert one_line(refused.stderr) == (
        f"kemu: --data-dir {a_file / 'data' / 'deeper'}: {a_file} is a file, not a directory"
    )


def test_a_missing_config_file_names_the_flag(tmp_path: Path) -> None:
    port = str(free_port_block(1))
    refused = serve("--port", port, "--config", str(tmp_path / "nope.properties"))
    assert refused.returncode == 2
    missing = tmp_path / "nope.properties"
    assert one_line(refused.stderr) == f"kemu: --config {missing}: no such file"
    refused = serve("--port", port, "--config", str(tmp_path))
    assert one_line(refused.stderr) == (
        f"kemu: --config {tmp_path}: a directory, not a properties file"
    )


def test_a_misspelt_flag_is_answered_with_the_nearest_one() -> None:
    line = usage_error(serve("--data_dir", "x"))
    assert line == (
        "kemu serve: error: unrecognized arguments: --data_dir x (did you mean --data-dir?)"
    )
    line = usage_error(serve("--controlport=3"))
    assert line.endswith("(did you mean --control-port?)"), line
    assert usage_error(serve("--zzz")) == "kemu serve: error: unrecognized arguments: --zzz"


def test_a_control_port_in_use_is_reported_before_the_brokers_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = serve("--port", str(free_port_block(1)), "--control-port", str(port))
    assert refused.returncode == 1
    # one line: no "started" line before it, as if the brokers had served
    assert one_line(refused.stderr) == (
        f"kemu: Control API failed to bind to 127.0.0.1:{port}: Address already in use."
    )


def test_self_signed_certificates_in_a_data_dir_that_cannot_hold_them(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "tls").write_text("")  # where the certificates would go: a file
    refused = serve(
        "--port", str(free_port_block(1)), "--tls-self-signed", "--data-dir", str(data_dir)
    )
    assert refused.returncode == 1
    line = one_line(refused.stderr)
    assert line.startswith("kemu: --tls-self-signed: [Errno "), line
    assert str(data_dir / "tls") in line


def test_a_control_port_out_of_range_is_a_usage_error() -> None:
    # --control-port 70000 used to serve the control API on port 4464 (70000 - 65536).
    line = usage_error(serve("--port", str(free_port_block(1)), "--control-port", "70000"))
    assert line == "kemu serve: error: argument --control-port: 70000 is not a TCP port (0-65535)"


def test_a_config_file_that_is_not_text_is_named_in_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "server.properties"
    binary.write_bytes(b"num.partitions=3\n\xd0\xff\n")
    refused = serve("--port", str(free_port_block(1)), "--config", str(binary))
    assert refused.returncode == 2
    line = one_line(refused.stderr)
    assert line.startswith(f"kemu: --config {binary} is not a UTF-8 properties file: "), line


def test_kafkas_shipped_kraft_file_serves_no_controller_and_keeps_data_in_log_dirs(
    kemu_factory: type[KemuProcess], tmp_path: Path
) -> None:
    # The KRaft lines of Kafka 4.4.0's config/server.properties, on free ports and a temp dir.
    properties = tmp_path / "server.properties"
    properties.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://:0,CONTROLLER://:0\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n"
        f"log.dirs={tmp_path / 'kraft-combined-logs'}\n"
    )
    process = kemu_factory(brokers=1, extra_args=["--config", str(properties)]).start()
    assert (tmp_path / "kraft-combined-logs" / ".lock").exists()
    process.stop()
    assert process.log_path is not None
    log = process.log_path.read_text()
    assert "data_dir_from_log_dirs" in log
    ignored = [line for line in log.splitlines() if "controller_listener_ignored" in line]
    assert len(ignored) == 1 and "listener=CONTROLLER" in ignored[0], log


# Settings that used to start a broker that did not work as configured; Kafka 4.4.0 refuses each
# (its message, where it has one, checked against KafkaConfig.fromProps of the 4.4.0 jars).
REFUSED_OVERRIDES = {
    # 'alice' without a password was dropped silently: alice then just failed to log in
    "sasl user without a password": (
        ["listeners=SASL_PLAINTEXT://:0", "kemu.sasl.users=bob:pw,alice"],
        "kemu: Invalid value bob:pw,alice for configuration kemu.sasl.users: 'alice' is not "
        "user:password (entries are separated by commas)",
    ),
    # 'bogus' (no 'User:') started with nobody a super user
    "super user not a principal": (
        [
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=bogus",
        ],
        "kemu: Invalid value bogus for configuration super.users: expected a string in format "
        "principalType:principalName but got bogus",
    ),
    # started when 'listeners' was not set
    "advertised listeners that do not parse": (
        ["advertised.listeners=garbage"],
        "kemu: Invalid value garbage for configuration advertised.listeners: Error creating "
        "broker listeners from 'garbage': Unable to parse garbage to a broker endpoint",
    ),
    "share heartbeat interval below its minimum": (
        ["group.share.heartbeat.interval.ms=50"],  # --timing fast: 100 ms minimum
        "kemu: group.share.heartbeat.interval.ms must be greater than or equal to "
        "group.share.min.heartbeat.interval.ms",
    ),
    # an internal config of Kafka's share coordinator (not in the catalogue)
    "cold partition snapshot interval below 1": (
        ["share.coordinator.cold.partition.snapshot.interval.ms=0"],
        "kemu: Invalid value 0 for configuration "
        "share.coordinator.cold.partition.snapshot.interval.ms: Value must be at least 1",
    ),
    # started a listener no client could log in to
    "sasl mechanism kemu does not implement": (
        ["listeners=SASL_PLAINTEXT://:0", "sasl.enabled.mechanisms=GSSAPI"],
        "kemu: Invalid value GSSAPI for configuration sasl.enabled.mechanisms: GSSAPI is not "
        "implemented by kemu (listener SASL_PLAINTEXT; kemu supports PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512, OAUTHBEARER)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_OVERRIDES))
def test_a_setting_kafka_refuses_is_refused_in_one_line(case: str) -> None:
    overrides, message = REFUSED_OVERRIDES[case]
    arguments = ["--port", str(free_port_block(1))]
    for override in overrides:
        arguments += ["--override", override]
    refused = serve(*arguments)
    assert refused.returncode == 2
    assert one_line(refused.stderr) == message


@pytest.mark.parametrize(
    ("file_name", "remedy"),
    [
        ("kemu-group-configs.json", "remove it to start with every group on the broker's defaults"),
        ("kemu-metadata.json", "(removing it would lose every topic and its records)"),
    ],
)
def test_a_damaged_data_file_is_named_in_one_line(
    kemu_factory: type[KemuProcess], tmp_path: Path, file_name: str, remedy: str
) -> None:
    data_dir = tmp_path / "data"
    kemu_factory(brokers=1, data_dir=data_dir).start().stop()  # a data dir kemu has used
    path = data_dir / file_name
    path.write_text('{"g": {"share.auto.offset.reset": "earl')  # torn
    refused = serve("--port", str(free_port_block(1)), "--data-dir", str(data_dir))
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("kemu: ")]
    assert errors == [refused.stderr.strip().splitlines()[-1]], refused.stderr  # info logs before
    assert errors[0].startswith(f"kemu: {path} is damaged: not JSON (Unterminated string"), errors
    assert errors[0].endswith(remedy)
    assert "kemu ready" not in refused.stdout
