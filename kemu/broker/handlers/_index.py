"""Which module serves which API key, and its versions: what ``register_placeholders`` serves
from before the handler modules are imported.

Regenerate after adding a handler or changing its versions::

    .venv/bin/python -m kemu.broker.handlers._index

``tests/unit/broker/handlers/test_handler_index.py`` fails until the table matches the decorators.
"""

from __future__ import annotations

from pathlib import Path

# fmt: off
HANDLERS: dict[int, tuple[str, int, int]] = {
    # generated: begin
    0: ("kemu.broker.handlers.produce", 3, 13),
    1: ("kemu.broker.handlers.fetch", 4, 18),
    2: ("kemu.broker.handlers.list_offsets", 1, 11),
    3: ("kemu.broker.handlers.metadata", 0, 13),
    8: ("kemu.broker.handlers.offset_commit", 2, 10),
    9: ("kemu.broker.handlers.offset_fetch", 1, 10),
    10: ("kemu.broker.handlers.find_coordinator", 0, 6),
    11: ("kemu.broker.handlers.join_group", 0, 9),
    12: ("kemu.broker.handlers.heartbeat", 0, 4),
    13: ("kemu.broker.handlers.leave_group", 0, 5),
    14: ("kemu.broker.handlers.sync_group", 0, 5),
    15: ("kemu.broker.handlers.describe_groups", 0, 6),
    16: ("kemu.broker.handlers.list_groups", 0, 5),
    17: ("kemu.broker.handlers.sasl_handshake", 0, 1),
    18: ("kemu.broker.handlers.api_versions", 0, 5),
    19: ("kemu.broker.handlers.create_topics", 2, 7),
    20: ("kemu.broker.handlers.delete_topics", 1, 6),
    21: ("kemu.broker.handlers.delete_records", 0, 2),
    22: ("kemu.broker.handlers.init_producer_id", 0, 5),
    23: ("kemu.broker.handlers.offset_for_leader_epoch", 2, 4),
    24: ("kemu.broker.handlers.add_partitions_to_txn", 0, 5),
    25: ("kemu.broker.handlers.add_offsets_to_txn", 0, 4),
    26: ("kemu.broker.handlers.end_txn", 0, 5),
    27: ("kemu.broker.handlers.write_txn_markers", 1, 2),
    28: ("kemu.broker.handlers.txn_offset_commit", 0, 6),
    29: ("kemu.broker.handlers.describe_acls", 1, 3),
    30: ("kemu.broker.handlers.create_acls", 1, 3),
    31: ("kemu.broker.handlers.delete_acls", 1, 3),
    32: ("kemu.broker.handlers.describe_configs", 1, 4),
    33: ("kemu.broker.handlers.alter_configs", 0, 2),
    35: ("kemu.broker.handlers.describe_log_dirs", 1, 5),
    36: ("kemu.broker.handlers.sasl_authenticate", 0, 2),
    37: ("kemu.broker.handlers.create_partitions", 0, 3),
    42: ("kemu.broker.handlers.delete_groups", 0, 3),
    43: ("kemu.broker.handlers.elect_leaders", 0, 2),
    44: ("kemu.broker.handlers.incremental_alter_configs", 0, 1),
    45: ("kemu.broker.handlers.alter_partition_reassignments", 0, 1),
    46: ("kemu.broker.handlers.list_partition_reassignments", 0, 0),
    47: ("kemu.broker.handlers.offset_delete", 0, 0),
    48: ("kemu.broker.handlers.describe_client_quotas", 0, 1),
    49: ("kemu.broker.handlers.alter_client_quotas", 0, 1),
    50: ("kemu.broker.handlers.describe_user_scram_credentials", 0, 0),
    51: ("kemu.broker.handlers.alter_user_scram_credentials", 0, 0),
    55: ("kemu.broker.handlers.describe_quorum", 0, 2),
    60: ("kemu.broker.handlers.describe_cluster", 0, 2),
    61: ("kemu.broker.handlers.describe_producers", 0, 0),
    65: ("kemu.broker.handlers.describe_transactions", 0, 0),
    66: ("kemu.broker.handlers.list_transactions", 0, 2),
    68: ("kemu.broker.handlers.consumer_group_heartbeat", 0, 1),
    69: ("kemu.broker.handlers.consumer_group_describe", 0, 1),
    71: ("kemu.broker.handlers.get_telemetry_subscriptions", 0, 0),
    72: ("kemu.broker.handlers.push_telemetry", 0, 0),
    74: ("kemu.broker.handlers.list_config_resources", 0, 1),
    75: ("kemu.broker.handlers.describe_topic_partitions", 0, 0),
    76: ("kemu.broker.handlers.share_group_heartbeat", 1, 1),
    77: ("kemu.broker.handlers.share_group_describe", 1, 1),
    78: ("kemu.broker.handlers.share_fetch", 1, 2),
    79: ("kemu.broker.handlers.share_acknowledge", 1, 2),
    83: ("kemu.broker.handlers.initialize_share_group_state", 0, 0),
    84: ("kemu.broker.handlers.read_share_group_state", 0, 0),
    85: ("kemu.broker.handlers.write_share_group_state", 0, 1),
    86: ("kemu.broker.handlers.delete_share_group_state", 0, 0),
    87: ("kemu.broker.handlers.read_share_group_state_summary", 0, 1),
    88: ("kemu.broker.handlers.streams_group_heartbeat", 0, 1),
    89: ("kemu.broker.handlers.streams_group_describe", 0, 1),
    90: ("kemu.broker.handlers.describe_share_group_offsets", 0, 1),
    91: ("kemu.broker.handlers.alter_share_group_offsets", 0, 0),
    92: ("kemu.broker.handlers.delete_share_group_offsets", 0, 0),
    95: ("kemu.broker.handlers.txn_share_acknowledge", 0, 0),
    96: ("kemu.broker.handlers.add_share_acknowledgements_to_txn", 0, 0),
    # generated: end
}
# fmt: on

_BEGIN = "    # generated: begin\n"
_END = "    # generated: end\n"


def current() -> dict[int, tuple[str, int, int]]:
    """The table the handler decorators produce once every module is imported."""
    from kemu.broker.handlers import _is_placeholder, load_handlers

    return {
        key: (spec.module, spec.min_version, spec.max_version)
        for key, spec in sorted(load_handlers().items())
        if not _is_placeholder(spec)
    }


def regenerate() -> None:
    path = Path(__file__)
    text = path.read_text()
    head, _, rest = text.partition(_BEGIN)
    _, _, tail = rest.partition(_END)
    rows = "".join(
        f'    {key}: ("{module}", {low}, {high}),\n'
        for key, (module, low, high) in current().items()
    )
    path.write_text(head + _BEGIN + rows + _END + tail)


if __name__ == "__main__":
    regenerate()
