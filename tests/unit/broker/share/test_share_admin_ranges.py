"""The control API's release/archive of a range (kemu/broker/share/admin.py): what it says when
the range is outside the in-flight window, empty or not."""

import pytest

from kemu.broker.share.admin import AdminError, set_range
from kemu.broker.share.partition import SharePartitionConfig, SharePartitionCore
from kemu.broker.share.states import RecordState
from kemu.coordinator.share.persister import PersistedState
from tests.unit.share_helpers import FakeLog, acquire


def core_at(start: int) -> SharePartitionCore:
    core, _ = SharePartitionCore.from_persisted(
        PersistedState(0, start), SharePartitionConfig(), reset_offset=start
    )
    return core


def test_an_empty_window_is_named_as_such() -> None:
    core = core_at(30)
    with pytest.raises(AdminError) as refused:
        set_range(core, 10, 19, RecordState.AVAILABLE)
    assert str(refused.value) == (
        "[10, 19] is not inside the in-flight window: it is empty, at offset 30 (no record "
        "fetched and not yet done)"
    )


def test_a_range_past_a_window_names_the_window() -> None:
    log = FakeLog()
    log.append(5)
    core = core_at(0)
    acquire(core, log, "m1", now=0)
    with pytest.raises(AdminError) as refused:
        set_range(core, 3, 9, RecordState.ARCHIVED)
    assert str(refused.value) == "[3, 9] is not inside the in-flight window [0, 4]"
    moved, _ = set_range(core, 0, 4, RecordState.ARCHIVED)
    assert moved == 5
