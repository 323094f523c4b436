"""The wheel ``pip wheel . --no-deps`` builds carries kemu's data files (Kafka's config
catalogues, the KIP-1289 message schemas): without them an installed kemu cannot describe
configs or serve KIP-1289. Built from a copy of the sources, so the working tree stays clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def data_files() -> set[str]:
    """Every file under kemu/ that is not Python source."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "kemu").rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }


def test_the_wheel_carries_every_data_file(tmp_path: Path) -> None:
    expected = data_files()
    assert {
        "kemu/cluster/kafka_broker_catalogue.json",
        "kemu/cluster/kafka_group_catalogue.json",
        "kemu/cluster/kafka_topic_catalogue.json",
    } <= expected
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "kemu", source / "kemu", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(tmp_path)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip("pip could not fetch setuptools to build the wheel")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("kemu-*.whl")
    assert expected - set(zipfile.ZipFile(wheel).namelist()) == set()
