"""The process's services behind typed keys (kemu/cluster/services.py), and the ports a lower
layer declares for a higher one (the group coordinator's SHARE_LEADERS)."""

from __future__ import annotations

import ast

import pytest

from kemu.cluster.context import Runtime
from kemu.cluster.model import BrokerNode, Cluster
from kemu.cluster.services import Service
from kemu.config.definitions import BrokerConfig
from kemu.coordinator.group.ports import SHARE_LEADERS
from kemu.storage.log import MemoryLog
from tests import REPO_ROOT

KEMU = REPO_ROOT / "kemu"


def runtime() -> Runtime:
    nodes = {1: BrokerNode(1, "127.0.0.1", 19090)}
    cluster = Cluster(
        cluster_id="services",
        nodes=nodes,
        config=BrokerConfig(),
        log_factory=lambda topic, index: MemoryLog(),
    )
    return Runtime(cluster=cluster)


def test_a_service_is_built_once_on_first_use() -> None:
    built: list[Runtime] = []

    def build(rt: Runtime) -> list[int]:
        built.append(rt)
        return [1]

    numbers = Service("numbers", build)
    rt = runtime()
    assert rt.services.built(numbers) is None and built == []
    first = rt.services.get(numbers)
    assert rt.services.get(numbers) is first and built == [rt]
    assert rt.services.built(numbers) is first
    rt.services.discard(numbers)
    assert rt.services.get(numbers) is not first


def test_a_port_nobody_provided_is_none_or_a_clear_error() -> None:
    rt = runtime()
    assert rt.services.built(SHARE_LEADERS) is None
    with pytest.raises(LookupError, match="nothing provides share_leaders"):
        rt.services.get(SHARE_LEADERS)


async def test_the_share_partition_manager_provides_the_group_coordinators_port() -> None:
    from kemu.broker.share.manager import share_partitions

    rt = runtime()
    manager = share_partitions(rt)
    assert rt.services.built(SHARE_LEADERS) is manager


def _service_lookups_by_string(tree: ast.Module) -> list[int]:
    """Lines that index ``....services[...]``, call ``....service(...)`` (the string locator
    this replaced) or pass a string to ``services.get``/``built``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("services"):
            found.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value)
            if node.func.attr == "service" and receiver.endswith("runtime"):
                found.append(node.lineno)
            literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
            if receiver.endswith("services") and literal:
                found.append(node.lineno)
    return found


def test_no_service_is_looked_up_by_a_string() -> None:
    found = {
        str(path.relative_to(KEMU.parent)): lines
        for path in sorted(KEMU.rglob("*.py"))
        if (lines := _service_lookups_by_string(ast.parse(path.read_text())))
    }
    assert found == {}
