"""``GET /metrics``: Prometheus text built with prometheus_client from kemu's own state at scrape
time (a custom collector on a private registry, so two kemus in one process never share one).

Names follow Kafka's JMX metrics where Kafka has one (``kafka_network_requests_total`` for
RequestsPerSec, ``kafka_server_bytes_in_total`` for BytesInPerSec, ...):

- ``kafka_network_requests_total{api, version}``, ``kafka_network_request_errors_total{api,
  error}`` (top-level and Produce partition error codes, injected faults included),
  ``kafka_network_request_latency_seconds{api}`` (Produce, Fetch, ShareFetch, ShareAcknowledge);
- ``kafka_server_bytes_in_total``, ``kafka_server_bytes_out_total``,
  ``kafka_server_connections{broker}``, ``kafka_server_connections_accepted_total``;
- ``kafka_share_records{group, topic, state}``: in-flight records of loaded share partitions by
  state (AVAILABLE, ACQUIRED, TX_PENDING, ARCHIVING; terminal ones leave the window);
- ``kafka_share_acquisition_lock_expiries_total{group, topic}``, ``kafka_share_delivery_limit_
  archives_total{group, topic}``: records released by lock expiry, and archived (or sent to
  the dead-letter queue) because their delivery count reached the limit;
- ``kafka_transactions{state}``: transactions known to the coordinator by state;
- ``kafka_log_log_logstartoffset{topic, partition}``, ``kafka_log_log_logendoffset{topic,
  partition}``: Kafka's ``kafka.log:type=Log,name=LogStartOffset|LogEndOffset`` MBeans as the
  Prometheus JMX exporter's Kafka rules name them (kemu's log end offset is its high watermark);
- ``kafka_consumergroup_current_offset{consumergroup, topic, partition}``,
  ``kafka_consumergroup_lag{consumergroup, topic, partition}``: a group's committed offset and
  ``log end - committed``, named as kafka_exporter (the usual Prometheus exporter of Kafka's
  group lag; Kafka's brokers have no lag MBean) names them;
- ``kafka_sharegroup_start_offset{sharegroup, topic, partition}`` (SPSO) and
  ``kafka_sharegroup_lag{sharegroup, topic, partition}`` (``high watermark - SPSO - records
  finished above it``, as ``kafka-share-groups.sh --describe``), named after the two above, for
  the share partitions loaded on their leader;
- ``kemu_fault_rules``, ``kemu_faults_injected_total{kind}``, ``kemu_clock_now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kemu.broker.faults import fault_table
from kemu.broker.share.manager import share_partitions
from kemu.broker.share.states import RecordState
from kemu.broker.stats import BUCKETS_S, request_stats
from kemu.cluster.context import Runtime
from kemu.control.lag import consumer_lags, share_lags
from kemu.protocol import wire
from kemu.protocol.errors import ErrorCode

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


class KemuCollector(Collector):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        stats = request_stats(runtime)
        requests = CounterMetricFamily(
            "kafka_network_requests", "Requests answered", labels=["api", "version"]
        )
        for (key, version), count in sorted(stats.requests.items()):
            requests.add_metric([wire.api_name(key), str(version)], count)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_request_errors", "Error codes answered", labels=["api", "error"]
        )
        for (key, code), count in sorted(stats.errors.items()):
            errors.add_metric([wire.api_name(key), _error_name(code)], count)
        yield errors
        latency = HistogramMetricFamily(
            "kafka_network_request_latency_seconds",
            "Time from a request's dispatch to its answer",
            labels=["api"],
        )
        for key, histogram in sorted(stats.latency.items()):
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip((*BUCKETS_S, float("inf")), histogram.counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            latency.add_metric([wire.api_name(key)], buckets, histogram.total_ns / 1e9)
        yield latency
        yield CounterMetricFamily("kafka_server_bytes_in", "Bytes received", value=stats.bytes_in)
        yield CounterMetricFamily("kafka_server_bytes_out", "Bytes sent", value=stats.bytes_out)
        yield CounterMetricFamily(
            "kafka_server_connections_accepted",
            "Client connections accepted",
            value=stats.connections_accepted,
        )
        faults = fault_table(runtime)
        connections = GaugeMetricFamily(
            "kafka_server_connections", "Open client connections", labels=["broker"]
        )
        for node_id in sorted(runtime.cluster.nodes):
            connections.add_metric([str(node_id)], len(faults.of_node(node_id)))
        yield connections
        yield self._share_records()
        yield from self._share_counters()
        yield self._transactions()
        yield from self._log_offsets()
        yield from self._lags()
        yield GaugeMetricFamily("kemu_fault_rules", "Installed fault rules", len(faults.rules()))
        injected = CounterMetricFamily(
            "kemu_faults_injected", "Faults injected by rules", labels=["kind"]
        )
        for kind, count in sorted(faults.injected.items()):
            injected.add_metric([kind], count)
        yield injected
        yield GaugeMetricFamily("kemu_clock_now_ms", "kemu's clock", runtime.clock_ms())

    def _share_records(self) -> Metric:
        family = GaugeMetricFamily(
            "kafka_share_records",
            "In-flight records of loaded share partitions by state",
            labels=["group", "topic", "state"],
        )
        totals: dict[tuple[str, str, str], int] = {}
        topics = self.runtime.cluster.topics_by_id
        for key, actor in share_partitions(self.runtime).actors.items():
            core = actor.core
            if core is None:
                continue
            topic = topics.get(key.topic_id)
            name = topic.name if topic is not None else str(key.topic_id)
            for state in RecordState:
                if not state.is_terminal:
                    totals.setdefault((key.group_id, name, state.name), 0)
            for span in core.window._spans.spans:
                label = (key.group_id, name, span.state.name)
                totals[label] = totals.get(label, 0) + span.size
        for labels, count in sorted(totals.items()):
            family.add_metric(list(labels), count)
        return family

    def _share_counters(self) -> Iterator[Metric]:
        expiries = CounterMetricFamily(
            "kafka_share_acquisition_lock_expiries",
            "Records whose acquisition lock expired",
            labels=["group", "topic"],
        )
        archives = CounterMetricFamily(
            "kafka_share_delivery_limit_archives",
            "Records archived because their delivery count reached the limit",
            labels=["group", "topic"],
        )
        totals: dict[tuple[str, str], tuple[int, int]] = {}
        topics = self.runtime.cluster.topics_by_id
        for key, actor in share_partitions(self.runtime).actors.items():
            topic = topics.get(key.topic_id)
            labels = (key.group_id, topic.name if topic is not None else str(key.topic_id))
            expired, archived = actor.counters()
            before = totals.get(labels, (0, 0))
            totals[labels] = (before[0] + expired, before[1] + archived)
        for labels, (expired, archived) in sorted(totals.items()):
            expiries.add_metric(list(labels), expired)
            archives.add_metric(list(labels), archived)
        yield expiries
        yield archives

    def _log_offsets(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "First offset in the partition's log", labels=labels
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset",
            "Offset the partition's next record gets (its high watermark)",
            labels=labels,
        )
        for name, topic in sorted(self.runtime.cluster.topics.items()):
            for partition in topic.partitions:
                index = str(partition.index)
                start.add_metric([name, index], partition.log_start_offset)
                end.add_metric([name, index], partition.high_watermark)
        yield start
        yield end

    def _lags(self) -> Iterator[Metric]:
        consumer = ["consumergroup", "topic", "partition"]
        committed = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "A group's committed offset", labels=consumer
        )
        consumer_lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Log end offset minus the group's committed offset",
            labels=consumer,
        )
        for found in consumer_lags(self.runtime):
            labels = [found.group, found.topic, str(found.partition)]
            committed.add_metric(labels, found.committed_offset)
            consumer_lag.add_metric(labels, found.lag)
        share = ["sharegroup", "topic", "partition"]
        start = GaugeMetricFamily(
            "kafka_sharegroup_start_offset",
            "A share partition's start offset (SPSO)",
            labels=share,
        )
        share_lag = GaugeMetricFamily(
            "kafka_sharegroup_lag",
            "High watermark minus SPSO minus the records finished above SPSO",
            labels=share,
        )
        for window in share_lags(self.runtime):
            labels = [window.group, window.topic, str(window.partition)]
            start.add_metric(labels, window.start_offset)
            share_lag.add_metric(labels, window.lag)
        yield from (committed, consumer_lag, start, share_lag)

    def _transactions(self) -> Metric:
        from kemu.coordinator.transaction.coordinator import STATE_NAMES
        from kemu.coordinator.transaction.service import TRANSACTION_COORDINATOR

        family = GaugeMetricFamily(
            "kafka_transactions", "Transactional ids by transaction state", labels=["state"]
        )
        service = self.runtime.services.built(TRANSACTION_COORDINATOR)
        counts = dict.fromkeys(STATE_NAMES.values(), 0)
        if service is not None:
            for meta in service.coordinator.transactions.values():
                counts[STATE_NAMES[meta.state]] += 1
        for state, count in counts.items():
            family.add_metric([state], count)
        return family


def metrics_registry(runtime: Runtime) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KemuCollector(runtime))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
