"""Broker, topic and internal config definitions, and the one path a config's value resolves by.

``definitions.py``: kemu's definitions and ``BrokerConfig`` / ``TopicConfig``, whose ``get``
resolves dynamic -> static -> kemu's definition -> Kafka's generated catalogue
(``broker_catalogue.py``, ``catalogues.py``, the JSON files beside them) -> Kafka's internal
configs (``internal.py``). ``types.py``: the vocabulary (types, sources, validation). This layer
sits below ``kemu.cluster`` and imports no other kemu layer.
"""
