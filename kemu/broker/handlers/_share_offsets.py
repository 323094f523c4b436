"""What AlterShareGroupOffsets (key 91) and DeleteShareGroupOffsets (key 92) have in common: an
empty group id gets INVALID_GROUP_ID and a principal without ``operation`` on the group
GROUP_AUTHORIZATION_FAILED, for the whole request (``refusal``).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.authorization import AclOperation, ResourceType, authorize
from kemu.cluster.context import RequestContext
from kemu.protocol.errors import ErrorCode, default_message


def refusal(ctx: RequestContext, group_id: str, operation: AclOperation) -> Any | None:
    """The response refusing the whole request (an empty group id, ``operation`` on the group
    not allowed), or None."""
    if not group_id:
        return ctx.respond(error_code=ErrorCode.invalid_group_id, responses=())
    if not authorize(ctx, operation, ResourceType.GROUP, group_id):
        denied = ErrorCode.group_authorization_failed
        return ctx.respond(error_code=denied, error_message=default_message(denied), responses=())
    return None
