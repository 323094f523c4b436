"""KIP-1289 messages kio does not have (yet): Kafka-style JSON definitions next to this file,
and the kio-style dataclasses ``python -m kemu.protocol.codegen`` generates from them.

``schemas.SCHEMAS`` maps (api key, version) to the (request, response) classes;
``kemu.protocol.wire`` consults it before kio, importing it on the first lookup of one of its
keys (this package itself holds only the keys and names, so that importing it costs nothing at
start-up). The keys here are kemu's defaults: the draft PR's final revision of
TxnShareAcknowledge (95, v0) and the two-RPC form's AddShareAcknowledgementsToTxn (96, v0, spec
§2.7). A broker configured to serve them at other keys decodes those frames as these keys
(``wire.decode_request(frame, api_key)``).
"""

from __future__ import annotations

TXN_SHARE_ACKNOWLEDGE_KEY = 95
ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY = 96

NAMES: dict[int, str] = {
    TXN_SHARE_ACKNOWLEDGE_KEY: "txn_share_acknowledge",
    ADD_SHARE_ACKNOWLEDGEMENTS_TO_TXN_KEY: "add_share_acknowledgements_to_txn",
}
