"""KIP-1289 messages kio does not have (yet): Kafka-style JSON definitions next to this file,
and the hand-written kio-style dataclasses made from them.

``SCHEMAS`` maps (api key, version) to the (request, response) classes; ``kemu.protocol.wire``
consults it before kio. The keys here are kemu's defaults: the draft PR's final revision of
TxnShareAcknowledge (95, v0) and the two-RPC form's AddShareAcknowledgementsToTxn (96, v0, spec
§2.7). A broker configured to serve them at other keys decodes those frames as these keys
(``wire.decode_request(frame, api_key)``).
"""

from __future__ import annotations

from typing import Any

from kemu.protocol.kip1289.add_share_acknowledgements_to_txn_v0 import request as _add_request
from kemu.protocol.kip1289.add_share_acknowledgements_to_txn_v0 import response as _add_response
from kemu.protocol.kip1289.txn_share_acknowledge_v0 import request as _tsa_request
from kemu.protocol.kip1289.txn_share_acknowledge_v0 import response as _tsa_response

TXN_SHARE_ACKNOWLEDGE_KEY = 95
ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY = 96

SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (TXN_SHARE_ACKNOWLEDGE_KEY, 0): (
        _tsa_request.TxnShareAcknowledgeRequest,
        _tsa_response.TxnShareAcknowledgeResponse,
    ),
    (ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY, 0): (
        _add_request.AddShareAcknowledgementsToTxnRequest,
        _add_response.AddShareAcknowledgementsToTxnResponse,
    ),
}

NAMES: dict[int, str] = {
    TXN_SHARE_ACKNOWLEDGE_KEY: "txn_share_acknowledge",
    ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY: "add_share_acknowledgements_to_txn",
}
