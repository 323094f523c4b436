"""KIP-1289 messages kio does not have (yet): Kafka-style JSON definitions next to this file,
and the hand-written kio-style dataclasses made from them.

``SCHEMAS`` maps (api key, version) to the (request, response) classes; ``kemu.protocol.wire``
consults it before kio. Only the PR's final revision of TxnShareAcknowledge (key 95, v0) is
here; the two-RPC variant's AddShareAcknowledgementsToTxn has no known api key (spec §2.4, Q2).
"""

from __future__ import annotations

from typing import Any

from kemu.protocol.kip1289.txn_share_acknowledge_v0 import request as _tsa_request
from kemu.protocol.kip1289.txn_share_acknowledge_v0 import response as _tsa_response

TXN_SHARE_ACKNOWLEDGE_KEY = 95

SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (TXN_SHARE_ACKNOWLEDGE_KEY, 0): (
        _tsa_request.TxnShareAcknowledgeRequest,
        _tsa_response.TxnShareAcknowledgeResponse,
    ),
}

NAMES: dict[int, str] = {TXN_SHARE_ACKNOWLEDGE_KEY: "txn_share_acknowledge"}
