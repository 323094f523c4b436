"""kemu's fast encoder on the hot responses (Produce, Fetch, Metadata), with more examples.

Beside test_fastwrite.py (every response class), in a module of its own so that `make test`'s
workers, which take a module at a time, run the two long property runs side by side.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.protocol.test_fastwrite import response_classes, same_bytes

HOT_RESPONSES = response_classes([0, 1, 3])


@pytest.mark.slow  # hundreds of generated responses: make test, not make check
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_produce_fetch_metadata_responses_encode_like_kio(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(HOT_RESPONSES))
    same_bytes(data.draw(st.from_type(cls)))
