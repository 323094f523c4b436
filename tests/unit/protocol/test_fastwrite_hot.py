"""kemu's fast encoder on the hot responses (Produce, Fetch, Metadata), with more examples per
class than test_fastwrite.py gives every response class (``--hypothesis-profile=deep``: that
profile's ``max_examples`` each). A module of its own so that `make test`'s workers, which take a
module at a time, run the two property runs side by side.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.protocol.test_fastwrite import (
    class_id,
    examples_per_class,
    response_classes,
    same_bytes,
)

HOT_RESPONSES = response_classes([0, 1, 3])


@pytest.mark.slow  # hundreds of generated responses: make test, not make check
@pytest.mark.parametrize("cls", HOT_RESPONSES, ids=class_id)
@settings(
    max_examples=examples_per_class(4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_produce_fetch_metadata_responses_encode_like_kio(
    cls: type[Any], data: st.DataObject
) -> None:
    same_bytes(data.draw(st.from_type(cls)))
