"""The KIP-1289 message classes by (api key, version), for ``kemu.protocol.wire``."""

from __future__ import annotations

from typing import Any

from kemu.protocol.kip1289 import ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY, TXN_SHARE_ACKNOWLEDGE_KEY
from kemu.protocol.kip1289.add_share_acknowledgements_to_txn_v0 import request as _add_request
from kemu.protocol.kip1289.add_share_acknowledgements_to_txn_v0 import response as _add_response
from kemu.protocol.kip1289.txn_share_acknowledge_v0 import request as _tsa_request
from kemu.protocol.kip1289.txn_share_acknowledge_v0 import response as _tsa_response

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
