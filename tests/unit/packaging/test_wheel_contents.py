"""The wheel ``pip wheel . --no-deps`` builds carries kemu's data files (Kafka's config
catalogues, the KIP-1289 message schemas): without them an installed kemu cannot describe
configs or serve KIP-1289. Its metadata (version, license, classifiers, the ``kemu`` console
script) makes ``pip install kemu-<version>.whl`` give a working ``kemu``. Built from a copy of
the sources, so the working tree stays clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests import REPO_ROOT

pytestmark = pytest.mark.process

ROOT = REPO_ROOT


def data_files() -> set[str]:
    """Every file under kemu/ that is not Python source."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "kemu").rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "kemu", source / "kemu", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", str(tmp_path)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip("pip could not fetch setuptools to build the wheel")
    assert built.returncode == 0, built.stderr
    # no build warnings (setuptools' license and editable-install warnings used to show)
    assert "warning" not in (built.stdout + built.stderr).lower(), built.stdout + built.stderr
    (found,) = tmp_path.glob("kemu-*.whl")
    return found


def test_the_wheel_carries_every_data_file(wheel: Path) -> None:
    expected = data_files()
    assert {
        "kemu/config/kafka_broker_catalogue.json",
        "kemu/config/kafka_group_catalogue.json",
        "kemu/config/kafka_topic_catalogue.json",
        "kemu/protocol/kafka_releases.json",
        "kemu/py.typed",
    } <= expected
    assert expected - set(zipfile.ZipFile(wheel).namelist()) == set()


def test_the_wheel_metadata_installs_a_working_kemu(wheel: Path, tmp_path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    version = project["version"]
    assert wheel.name == f"kemu-{version}-py3-none-any.whl"
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(f"kemu-{version}.dist-info/METADATA").decode()
    assert f"Version: {version}\n" in metadata
    assert "License-Expression: Apache-2.0\n" in metadata
    assert "Classifier: Framework :: Pytest\n" in metadata
    assert "Requires-Python: >=3.11\n" in metadata
    entry_points = archive.read(f"kemu-{version}.dist-info/entry_points.txt").decode()
    assert "kemu = kemu.entry:main" in entry_points  # the console script
    assert "kemu = kemu.testing.plugin" in entry_points  # the pytest plugin
    # test tools are extras, never what `pip install kemu` pulls in
    runtime = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    for tool in ("pytest", "confluent-kafka", "playwright", "mypy", "ruff", "py-spy"):
        assert not any(tool in line and "extra ==" not in line for line in runtime), tool
    # installed (the dependencies are this venv's), the console script's function runs
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel],
        check=True,
        timeout=300,
    )
    script = "import sys, kemu.entry; sys.argv = ['kemu', '--version']; kemu.entry.main()"
    ran = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
    )
    assert ran.stdout.strip() == f"kemu {version}", ran.stderr


# What the test and dev extras bring; kemu serve, kemu ctl and kemu.client must not need them.
TEST_ONLY = ("pytest", "confluent_kafka", "kafka", "aiokafka", "hypothesis", "playwright", "PIL")

RUNTIME_IMPORTS = """
import importlib, sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {refused!r}:
            raise ImportError(f"{{name}} is a test extra")
        return None

sys.meta_path.insert(0, Refuse())
import kemu.cli, kemu.client, kemu.control.http, kemu.coordinator.share.decode
from kemu.broker.handlers import handler_module_names
for name in handler_module_names():
    importlib.import_module(name)
print("ok")
"""


def test_kemu_runs_on_its_runtime_dependencies_alone() -> None:
    """`make serve` and `pip install kemu` install no test extras: nothing kemu serves with
    imports one (the pytest plugin, kemu.testing, is loaded by pytest only)."""
    ran = subprocess.run(
        [sys.executable, "-c", RUNTIME_IMPORTS.format(refused=set(TEST_ONLY))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.stdout.strip() == "ok", ran.stderr
