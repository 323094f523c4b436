"""docker/entrypoint.sh, the image's entry point and HEALTHCHECK, run outside a container (no
Docker daemon is needed): the environment variables become ``kemu serve`` options, the brokers
and the control API listen on every interface, the data dir is used, ``healthcheck`` answers 0
while kemu serves and non-zero once it stopped. The Dockerfile is checked for what the image
promises (non-root user, data volume, control port, HEALTHCHECK through the same script)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kemu.testing.plugin import free_port_block
from tests import REPO_ROOT

ROOT = REPO_ROOT
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def environment(**settings: str) -> dict[str, str]:
    """This venv's ``kemu`` first on PATH, as the image's pip install puts it."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "PYTHONUNBUFFERED": "1", **settings}


def healthcheck(env: dict[str, str]) -> int:
    ran = subprocess.run(
        ["sh", str(ENTRYPOINT), "healthcheck"], env=env, capture_output=True, timeout=60
    )
    return ran.returncode


def test_the_entry_point_serves_what_the_environment_says(tmp_path: Path) -> None:
    port = free_port_block(2)
    control = free_port_block(1)
    data_dir = tmp_path / "data"
    env = environment(
        KEMU_BROKERS="2",
        KEMU_PORT=str(port),
        KEMU_ADVERTISED_HOST="kemu.example",
        KEMU_CONTROL_PORT=str(control),
        KEMU_DATA_DIR=str(data_dir),
        KEMU_KIP1289="true",
    )
    assert healthcheck(env) != 0  # nothing serves yet
    process = subprocess.Popen(
        ["sh", str(ENTRYPOINT), "--override", "num.partitions=2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().strip()
        assert ready == (
            f"kemu ready bootstrap=kemu.example:{port},kemu.example:{port + 1} "
            f"control=http://0.0.0.0:{control} previews=kip1289"
        ), ready
        assert (data_dir / ".lock").exists()
        assert healthcheck(env) == 0  # the control API answers on 127.0.0.1 too
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr  # exec: kemu itself got the SIGTERM
    assert "Traceback" not in stderr
    assert "stopped" in stderr.strip().splitlines()[-1]
    assert healthcheck(env) != 0


def test_a_bad_setting_is_one_line() -> None:
    refused = subprocess.run(
        ["sh", str(ENTRYPOINT)],
        env=environment(KEMU_KIP1289="maybe", KEMU_PORT=str(free_port_block(3))),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip() == "kemu: KEMU_KIP1289 is true or false, not 'maybe'"


@pytest.mark.parametrize(
    "line",
    [
        r"^USER kemu$",  # not root
        r"^VOLUME /var/lib/kemu$",
        r"^EXPOSE 9092 9093 9094 9192$",
        r'CMD \["kemu-entrypoint", "healthcheck"\]$',
        r'^ENTRYPOINT \["kemu-entrypoint"\]$',
        r"KEMU_CONTROL_HOST=0\.0\.0\.0",
        r"KEMU_DATA_DIR=/var/lib/kemu",
        r"^COPY docker/entrypoint\.sh /usr/local/bin/kemu-entrypoint$",
    ],
)
def test_the_dockerfile_uses_the_entry_point_and_promises_what_docs_say(line: str) -> None:
    assert re.search(line, DOCKERFILE.read_text(), re.MULTILINE), line


def test_every_variable_the_image_sets_is_one_the_entry_point_reads() -> None:
    image = set(re.findall(r"(KEMU_[A-Z0-9_]+)=", DOCKERFILE.read_text()))
    script = set(re.findall(r"\$\{(KEMU_[A-Z0-9_]+)[:=]", ENTRYPOINT.read_text()))
    assert image and image <= script, image - script
