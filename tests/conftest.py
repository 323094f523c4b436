"""kemu's own test tiers (docs/testing.md).

Every collected test gets exactly one tier marker:
- ``unit``: tests/unit, no subprocess and no socket (``make check``);
- ``client``: real client libraries against a kemu (the default in tests/integration);
- ``process``: needs kemu as a real process: CLI, SIGKILL, data-dir restarts, crash points
  (a module says so with ``pytestmark``);
- ``parity``: compares with a real Kafka 4.4.0 (a module says so with ``pytestmark``).

``heavy`` marks opt-in suites (Kafka Streams apps, minutes each) that have their own make target:
they are deselected, not skipped, unless ``--heavy`` is given.

With ``KEMU_REQUIRE_ALL=1`` (``.ci/run``), a test that skips fails instead: on CI every
prerequisite is there, so a skip means something went missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings
from xdist.scheduler import LoadScopeScheduling

# ``pytest --hypothesis-profile=deep`` (make test-deep): property tests that leave max_examples to
# the profile draw twice hypothesis's default, and the generated-frame modules (test_fastwrite*)
# draw this many messages per response class instead of the few of a usual run.
settings.register_profile("deep", max_examples=200)

# the kemu plugin (kemu_factory, ...) is registered through its pytest11 entry point
pytest_plugins = ["kemu.testing.inprocess", "kemu.testing.kafka"]

TIERS = ("unit", "client", "process", "parity")

# Modules that take minutes, longest first (the sum of their tests' --durations=0 in a make test
# run; a Kafka JVM, a long scenario or thousands of generated frames each), run first: make test
# hands out whole files to its workers in collection order (--no-loadscope-reorder), and a long
# file handed out last would leave the other workers idle while it runs. Paths from the checkout's
# root: basenames repeat across the package directories.
LONG_MODULES = (
    "tests/unit/protocol/test_guard.py",
    "tests/unit/protocol/test_fastwrite.py",
    "tests/unit/protocol/test_fastwrite_hot.py",
    "tests/integration/kip1289/test_kip1289_scenarios.py",
    "tests/integration/share/test_share_dlq.py",
    "tests/integration/quotas/test_connection_quotas_clients.py",
    "tests/integration/control/test_control_api.py",
    "tests/integration/quotas/test_mutation_quota_java.py",
    "tests/integration/kip1289/test_kip1289_two_rpc.py",
    "tests/unit/cli/test_startup_errors.py",
    "tests/integration/clients/test_java_clients.py",
    "tests/integration/storage/test_log_cleaner.py",
    "tests/integration/storage/test_restart_durability.py",
    "tests/integration/share/test_share_durability.py",
    "tests/integration/security/test_acl_command_kafka.py",
    "tests/integration/groups/test_assignment_interval_kafka.py",
    "tests/integration/share/test_share_close_java.py",
    "tests/integration/control/test_control_share.py",
    "tests/integration/clients/test_client_kafka.py",
    "tests/integration/txn/test_txn_endings_java.py",
    "tests/integration/groups/test_consumer_groups.py",
    "tests/unit/testing/test_sim.py",
    "tests/unit/testing/test_sim_eos.py",
    "tests/unit/testing/test_sim_finds.py",
    "tests/integration/tools/test_soak_short.py",
    "tests/integration/tools/test_doc_long_commands.py",
    "tests/integration/tools/test_doc_control.py",
    "tests/integration/tools/test_doc_blocks.py",
)


# Modules comparing with one configuration of the session's Kafka (kemu/testing/kafka.py), by
# that configuration's name, paths from the checkout's root as in LONG_MODULES: each group runs
# on one worker, one module after the other, so that the Kafka JVM starts once for all of them
# (a Kafka start costs a worker 10-30 s).
SHARED_KAFKA_MODULES = {
    "kafka": (
        "tests/integration/config/test_broker_catalogue_kafka.py",
        "tests/integration/groups/test_group_catalogue_kafka.py",
        "tests/integration/groups/test_group_config_bounds_kafka.py",
        "tests/integration/config/test_topic_catalogue_kafka.py",
        "tests/integration/groups/test_assignment_interval_kafka.py",
        "tests/integration/groups/test_offset_commit_epochs_kafka.py",
        "tests/integration/groups/test_group_topic_changes_kafka.py",
        "tests/integration/groups/test_static_leave_kafka.py",
        "tests/integration/groups/test_static_rejoin_java.py",
        "tests/integration/share/test_share_topic_changes_kafka.py",
        "tests/integration/groups/test_deleted_topic_admin_kafka.py",
        "tests/integration/share/test_share_deleted_topic_state_kafka.py",
        "tests/integration/share/test_share_deleted_topic_acks_kafka.py",
        "tests/integration/share/test_share_acks_below_start_kafka.py",
        "tests/integration/share/test_share_offsets_new_group_kafka.py",
        "tests/integration/share/test_share_added_partitions_kafka.py",
        "tests/integration/groups/test_group_record_order_kafka.py",
        "tests/integration/groups/test_unknown_group_kafka.py",
        "tests/integration/groups/test_consumer_heartbeat_validation_kafka.py",
        "tests/integration/quotas/test_mutation_quota_java.py",
    ),
    "kafka-group-max-size": (
        "tests/integration/groups/test_group_max_size_kafka.py",
        "tests/integration/groups/test_streams_group_max_size_kafka.py",
    ),
    "kafka-share": (
        "tests/integration/share/test_share_close_java.py",
        "tests/integration/clients/test_client_kafka.py",
        "tests/integration/txn/test_txn_endings_java.py",
        "tests/integration/txn/test_end_txn_retry_parity.py",
        "tests/integration/txn/test_marker_refused_kafka.py",
        "tests/integration/txn/test_unstable_offsets_kafka.py",
    ),
}
KAFKA_GROUP_OF = {
    module: group for group, modules in SHARED_KAFKA_MODULES.items() for module in modules
}


class ModuleOrKafkaGroupScheduling(LoadScopeScheduling):
    """``--dist loadfile``, except that the modules of a ``SHARED_KAFKA_MODULES`` group go to
    one worker together (xdist's own ``--dist loadgroup`` cannot: with pytest 9 its node-id
    suffix is lost, and it spreads unmarked tests one by one)."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return KAFKA_GROUP_OF.get(path, path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadfile":
        return ModuleOrKafkaGroupScheduling(config, log)
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--heavy",
        action="store_true",
        default=False,
        help="also run the opt-in suites marked heavy (make test-streams)",
    )


def pytest_configure(config: pytest.Config) -> None:
    moved = [
        path for path in (*LONG_MODULES, *KAFKA_GROUP_OF) if not (config.rootpath / path).is_file()
    ]
    if moved:
        raise pytest.UsageError(f"tests/conftest.py: a module list names no file at {moved}")
    for tier, what in (
        ("unit", "tests/unit: no subprocess, no socket"),
        ("client", "real clients against a kemu (the default of tests/integration)"),
        ("process", "needs kemu as a real process: CLI, SIGKILL, restarts, crash points"),
        ("parity", "compares with a real Kafka 4.4.0 (bench/.cache/lib)"),
        ("heavy", "opt-in suite with its own make target; deselected without --heavy"),
    ):
        config.addinivalue_line("markers", f"{tier}: {what}")


def tier_of(item: pytest.Item) -> str:
    """The test's tier: its own marker (the most demanding one), else its directory's default:
    tests/unit is unit, anything else client."""
    for tier in ("parity", "process", "client", "unit"):
        if item.get_closest_marker(tier) is not None:
            return tier
    return "unit" if "unit" in item.path.parts else "client"


def _start_rank(item: pytest.Item) -> int:
    """Long modules first, then the parity and process tiers (JVMs, restarts), then the rest."""
    path = item.path.relative_to(item.config.rootpath).as_posix()
    if path in LONG_MODULES:
        return LONG_MODULES.index(path)
    return len(LONG_MODULES) + ("parity", "process", "client", "unit").index(tier_of(item))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(tier)
    module_rank: dict[object, int] = {}
    for item in items:
        module_rank[item.path] = min(module_rank.get(item.path, 1 << 30), _start_rank(item))
    # the modules sharing a session's Kafka (run on one worker one after the other) start
    # first: together they take as long as a long module
    for item in items:
        if item.path.relative_to(config.rootpath).as_posix() in KAFKA_GROUP_OF:
            module_rank[item.path] = -1
    # stable, and by module: a module's tests keep pytest's order (module fixtures set up once)
    items.sort(key=lambda item: module_rank[item.path])
    if config.getoption("--heavy"):
        return
    heavy = [item for item in items if item.get_closest_marker("heavy") is not None]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if item.get_closest_marker("heavy") is None]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if os.environ.get("KEMU_REQUIRE_ALL") != "1" or not report.skipped:
        return
    if hasattr(report, "wasxfail"):
        return  # an expected failure is not a missing prerequisite
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under KEMU_REQUIRE_ALL=1 (a prerequisite is missing): {reason}"
