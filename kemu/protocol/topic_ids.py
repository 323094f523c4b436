"""The zero UUID, Kafka's "no topic id" (``Uuid.ZERO_UUID``, never assigned to a topic).

kio decodes sixteen zero bytes as ``None``, so the request views type every topic id
``UUID | None``. A handler turns that ``None`` back into the zero UUID where it first reads a
topic id (``wire_topic_id``): keys and caches then hold a ``UUID``, the zero id is looked up
like any other and found nowhere (UNKNOWN_TOPIC_ID, as Kafka answers), and a response echoes
it as the same sixteen zero bytes.

``ZERO_UUID`` is kemu's one zero-UUID constant: handlers also use it for the other ids Kafka
leaves zero (a telemetry client instance id not yet assigned, a topic id an error answer lacks).
"""

from __future__ import annotations

import uuid

ZERO_UUID = uuid.UUID(int=0)


def wire_topic_id(decoded: uuid.UUID | None) -> uuid.UUID:
    """The topic id a request carried: the zero UUID where kio decoded it as ``None``."""
    return ZERO_UUID if decoded is None else decoded
