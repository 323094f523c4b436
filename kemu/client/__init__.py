"""kemu.client: an asyncio Kafka client for share groups (KIP-932) and transactions, including
KIP-1289's transactional share acknowledgements, built on ``kemu.protocol`` alone.

See docs/client.md for a share -> transform -> transactional produce loop.
"""

from __future__ import annotations

from kemu.client.admin import Admin, SharePartitionOffset
from kemu.client.backoff import Backoff
from kemu.client.cluster import TopicIdPartition
from kemu.client.consumer import Consumer, ConsumerRecord
from kemu.client.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
)
from kemu.client.group_consumer import GroupConsumer
from kemu.client.idempotent_producer import IdempotentProducer
from kemu.client.producer import ONE_RPC, TWO_RPC, RecordMetadata, TransactionalProducer
from kemu.client.rebalance import RebalanceListener
from kemu.client.share_consumer import ShareConsumer
from kemu.client.share_types import (
    AcknowledgeType,
    ShareAcknowledgementBatch,
    ShareAcknowledgements,
    ShareGroupMetadata,
    ShareRecord,
)
from kemu.client.txn_offsets import ConsumerGroupMetadata

__all__ = [
    "ONE_RPC",
    "TWO_RPC",
    "AcknowledgeType",
    "Admin",
    "Backoff",
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "GroupConsumer",
    "IdempotentProducer",
    "IllegalStateError",
    "KafkaError",
    "ProducerFencedError",
    "RebalanceListener",
    "RecordMetadata",
    "ShareAcknowledgementBatch",
    "ShareAcknowledgements",
    "ShareConsumer",
    "ShareGroupMetadata",
    "SharePartitionOffset",
    "ShareRecord",
    "TopicIdPartition",
    "TransactionAbortableError",
    "TransactionalProducer",
]
