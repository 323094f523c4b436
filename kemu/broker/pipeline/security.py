"""The security stage: a frame on a SASL listener before (or between) authentications.

After SaslHandshake v0 the client sends bare SASL tokens, answered bare; otherwise only the
requests the session allows pass on (``SecuritySession.refusal``), and a refusal closes the
connection once the answer is out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from kemu.protocol import wire
from kemu.protocol.wire import MalformedFrame

if TYPE_CHECKING:
    from kemu.broker.connection import Connection
    from kemu.broker.security.session import SecuritySession

log = structlog.get_logger("kemu.connection")


class SecurityStage:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def accept(
        self, frame: bytes, session: SecuritySession, accept_request: Callable[[bytes], bool]
    ) -> bool:
        """False means the connection must close; ``accept_request`` is the rest of the
        pipeline."""
        connection = self.connection
        now_ms = connection.runtime.clock_ms()
        if session.raw:  # after SaslHandshake v0: a bare SASL token, answered bare
            reply = session.raw_token(frame, now_ms)
            if reply is None:
                return False
            connection.slots.append(reply)
            return True
        try:
            api_key = wire.peek_header(frame)[0]
        except MalformedFrame as malformed:
            log.warning("malformed_frame", peer=connection.peer, reason=str(malformed))
            return False
        reason = session.refusal(api_key, wire.api_name(api_key), now_ms)
        if reason is not None:
            log.warning(
                "sasl_request_refused",
                peer=connection.peer,
                listener=session.listener.name,
                api=wire.api_name(api_key),
                reason=reason,
            )
            return False
        # The SASL handlers answer at once; a refusal closes once the answer is out.
        return accept_request(frame) and not session.close_requested
