package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Admin client's topic lifecycle, one JSON line per check, in this order:
 * describe_cluster, create_topics, create_existing_topic, list_topics, describe_topics,
 * produce (records with known timestamps into partition 0, one batch each, and into partition 2,
 * all in one batch), list_offsets, list_offsets_in_batch, delete_records,
 * delete_records_out_of_range, describe_configs, delete_topics.
 *
 * <p>Topic {@code --topic} gets {@code --partitions} partitions, replication factor 3 and a few
 * explicit configs; {@code <topic>-defaults} is created with broker defaults.
 */
public final class AdminProbe {
    static final Map<String, String> TOPIC_CONFIGS = Map.of(
            "retention.ms", "123456789",
            "cleanup.policy", "delete",
            "max.message.bytes", "2000000");
    /** Timestamp steps (seconds after the base) of the records produced to partition 0. */
    static final int[] TIMESTAMP_STEPS = {0, 1, 2, 3, 9, 4, 5, 6, 7, 8};
    /** The same, for the records produced to partition 2 as one batch. */
    static final int[] BATCH_TIMESTAMP_STEPS = {20, 21, 25, 22, 23};

    private AdminProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "java-admin");
        String defaultsTopic = topic + "-defaults";
        int partitions = probe.intArg("partitions", 6);
        TopicPartition first = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(probe.clientConfig())) {
            probe.check("describe_cluster", out -> describeCluster(admin, out));
            probe.check("create_topics",
                    out -> createTopics(admin, topic, defaultsTopic, partitions, out));
            probe.check("create_existing_topic", out -> out.put("error", failure(() ->
                    admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get())));
            probe.check("list_topics",
                    out -> out.put("names", new TreeSet<>(admin.listTopics().names().get())));
            probe.check("describe_topics", out -> describeTopics(admin, topic, out));
            long baseTimestamp = (System.currentTimeMillis() / 1000) * 1000 - 60_000;
            probe.check("produce", out -> produce(probe, first, baseTimestamp, out));
            probe.check("list_offsets", out -> listOffsets(admin, topic, baseTimestamp, out));
            probe.check("list_offsets_in_batch",
                    out -> listOffsetsInBatch(admin, topic, baseTimestamp, out));
            probe.check("delete_records", out -> deleteRecords(probe, admin, first, out));
            probe.check("delete_records_out_of_range", out -> out.put("error", failure(() ->
                    admin.deleteRecords(Map.of(first, RecordsToDelete.beforeOffset(1000)))
                            .lowWatermarks().get(first).get())));
            probe.check("describe_configs", out -> describeConfigs(admin, topic, out));
            probe.check("delete_topics", out -> deleteTopics(admin, topic, defaultsTopic, out));
        }
        System.exit(probe.exitCode());
    }

    /** The error an action is expected to fail with, or null when it unexpectedly worked. */
    private static Map<String, Object> failure(Callable<?> action) {
        try {
            action.call();
            return null;
        } catch (Exception error) {
            return Probe.describe(error);
        }
    }

    private static void describeCluster(Admin admin, Map<String, Object> out) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        List<Object> nodes = new ArrayList<>();
        for (Node node : cluster.nodes().get()) {
            nodes.add(node(node));
        }
        out.put("nodes", nodes);
        out.put("controller", node(cluster.controller().get()));
        out.put("cluster_id", cluster.clusterId().get());
    }

    private static Map<String, Object> node(Node node) {
        if (node == null) {
            return null;
        }
        return Probe.map("id", node.id(), "host", node.host(), "port", node.port(),
                "rack", node.rack());
    }

    private static void createTopics(Admin admin, String topic, String defaultsTopic,
            int partitions, Map<String, Object> out) throws Exception {
        NewTopic configured = new NewTopic(topic, partitions, (short) 3).configs(TOPIC_CONFIGS);
        NewTopic defaults = new NewTopic(defaultsTopic, Optional.empty(), Optional.empty());
        CreateTopicsResult created = admin.createTopics(List.of(configured, defaults));
        created.all().get();
        for (String name : List.of(topic, defaultsTopic)) {
            out.put(name, Probe.map(
                    "topic_id", created.topicId(name).get(),
                    "partitions", created.numPartitions(name).get(),
                    "replication_factor", created.replicationFactor(name).get(),
                    "configs", configEntries(created.config(name).get())));
        }
    }

    private static void describeTopics(Admin admin, String topic, Map<String, Object> out)
            throws Exception {
        TopicDescription byName = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : byName.partitions()) {
            partitions.add(Probe.map(
                    "partition", info.partition(),
                    "leader", info.leader() == null ? null : info.leader().id(),
                    "replicas", info.replicas().stream().map(Node::id).toList(),
                    "isr", info.isr().stream().map(Node::id).toList()));
        }
        Uuid topicId = byName.topicId();
        out.putAll(Probe.map("name", byName.name(), "topic_id", topicId,
                "internal", byName.isInternal(), "partitions", partitions));
        TopicDescription byId = admin.describeTopics(TopicCollection.ofTopicIds(List.of(topicId)))
                .allTopicIds().get().get(topicId);
        out.put("name_by_id", byId.name());
    }

    /**
     * Partition 0: one record per batch (send().get() each time), so batch and record timestamps
     * agree. Partition 2: five records in one batch (sent together, lingering), the largest
     * timestamp in the middle.
     */
    private static void produce(Probe probe, TopicPartition partition, long baseTimestamp,
            Map<String, Object> out) throws Exception {
        Properties props = probe.clientConfig();
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("max.block.ms", "30000");
        props.put("delivery.timeout.ms", "60000");
        props.put("linger.ms", "500");
        props = probe.withExtra(props, "producer-props");
        List<Object> written = new ArrayList<>();
        List<Object> batched = new ArrayList<>();
        out.put("base_timestamp", baseTimestamp);
        out.put("records", written);
        out.put("batched_records", batched);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < TIMESTAMP_STEPS.length; i++) {
                long timestamp = baseTimestamp + TIMESTAMP_STEPS[i] * 1000L;
                RecordMetadata metadata = producer.send(new ProducerRecord<>(partition.topic(),
                        partition.partition(), timestamp, ("k" + i).getBytes(),
                        ("v" + i).getBytes())).get();
                written.add(Probe.map("offset", metadata.offset(), "timestamp", metadata.timestamp()));
            }
            List<Future<RecordMetadata>> pending = new ArrayList<>();
            for (int i = 0; i < BATCH_TIMESTAMP_STEPS.length; i++) {
                long timestamp = baseTimestamp + BATCH_TIMESTAMP_STEPS[i] * 1000L;
                pending.add(producer.send(new ProducerRecord<>(partition.topic(), 2, timestamp,
                        ("b" + i).getBytes(), ("w" + i).getBytes())));
            }
            producer.flush();
            for (Future<RecordMetadata> future : pending) {
                RecordMetadata metadata = future.get();
                batched.add(Probe.map("offset", metadata.offset(), "timestamp", metadata.timestamp()));
            }
        }
    }

    private static void listOffsets(Admin admin, String topic, long baseTimestamp,
            Map<String, Object> out) throws Exception {
        TopicPartition first = new TopicPartition(topic, 0);
        TopicPartition empty = new TopicPartition(topic, 1);
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("max_timestamp", OffsetSpec.maxTimestamp());
        // Offset 3 (base+3s) is the first at or after base+2.5s; offset 2 is stamped base+2s.
        specs.put("for_timestamp", OffsetSpec.forTimestamp(baseTimestamp + 2500));
        specs.put("for_timestamp_exact", OffsetSpec.forTimestamp(baseTimestamp + 2000));
        // Only offset 4 (base+9s) is at or after base+8.5s, though later offsets follow it.
        specs.put("for_timestamp_late", OffsetSpec.forTimestamp(baseTimestamp + 8500));
        specs.put("for_future_timestamp", OffsetSpec.forTimestamp(baseTimestamp + 3_600_000));
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            out.put(spec.getKey(), offsetInfo(admin, first, spec.getValue()));
        }
        out.put("empty_earliest", offsetInfo(admin, empty, OffsetSpec.earliest()));
        out.put("empty_latest", offsetInfo(admin, empty, OffsetSpec.latest()));
        out.put("empty_max_timestamp", offsetInfo(admin, empty, OffsetSpec.maxTimestamp()));
    }

    /** Lookups that land inside the multi-record batch of partition 2. */
    private static void listOffsetsInBatch(Admin admin, String topic, long baseTimestamp,
            Map<String, Object> out) throws Exception {
        TopicPartition batched = new TopicPartition(topic, 2);
        out.put("max_timestamp", offsetInfo(admin, batched, OffsetSpec.maxTimestamp()));
        out.put("for_timestamp",
                offsetInfo(admin, batched, OffsetSpec.forTimestamp(baseTimestamp + 20_500)));
    }

    private static Map<String, Object> offsetInfo(Admin admin, TopicPartition partition,
            OffsetSpec spec) throws Exception {
        ListOffsetsResultInfo info = admin.listOffsets(Map.of(partition, spec))
                .partitionResult(partition).get();
        return Probe.map("offset", info.offset(), "timestamp", info.timestamp(),
                "leader_epoch", info.leaderEpoch());
    }

    private static void deleteRecords(Probe probe, Admin admin, TopicPartition partition,
            Map<String, Object> result) throws Exception {
        long lowWatermark = admin.deleteRecords(Map.of(partition, RecordsToDelete.beforeOffset(4)))
                .lowWatermarks().get(partition).get().lowWatermark();
        result.put("low_watermark", lowWatermark);
        result.put("earliest_after", offsetInfo(admin, partition, OffsetSpec.earliest()));
        result.put("latest_after", offsetInfo(admin, partition, OffsetSpec.latest()));

        Properties props = probe.clientConfig();
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        List<Long> offsets = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            result.put("consumer_position", consumer.position(partition));
            long deadline = System.currentTimeMillis() + 20_000;
            while (offsets.size() < 6 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    offsets.add(record.offset());
                }
            }
        }
        result.put("consumed_offsets", offsets);
    }

    private static void describeConfigs(Admin admin, String topic, Map<String, Object> out)
            throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin.describeConfigs(List.of(resource),
                new DescribeConfigsOptions().includeSynonyms(true)).all().get().get(resource);
        Map<String, Object> synonyms = new TreeMap<>();
        for (ConfigEntry entry : config.entries()) {
            if (TOPIC_CONFIGS.containsKey(entry.name())) {
                synonyms.put(entry.name(), entry.synonyms().stream()
                        .map(s -> Probe.map("name", s.name(), "value", s.value(),
                                "source", s.source().name()))
                        .toList());
            }
        }
        out.put("configs", configEntries(config));
        out.put("synonyms", synonyms);
    }

    private static Map<String, Object> configEntries(Config config) {
        Map<String, Object> entries = new TreeMap<>();
        for (ConfigEntry entry : config.entries()) {
            entries.put(entry.name(), Probe.map(
                    "value", entry.value(),
                    "source", entry.source().name(),
                    "read_only", entry.isReadOnly(),
                    "sensitive", entry.isSensitive(),
                    // CreateTopics answers carry no config types.
                    "type", entry.type() == null ? null : entry.type().name()));
        }
        return entries;
    }

    private static void deleteTopics(Admin admin, String topic, String defaultsTopic,
            Map<String, Object> out) throws Exception {
        admin.deleteTopics(List.of(topic, defaultsTopic)).all().get();
        Set<String> remaining = Set.of();
        long deadline = System.currentTimeMillis() + 10_000;
        do {
            remaining = admin.listTopics().names().get();
            if (!remaining.contains(topic) && !remaining.contains(defaultsTopic)) {
                break;
            }
            Thread.sleep(200);
        } while (System.currentTimeMillis() < deadline);
        out.put("topics_after", new TreeSet<>(remaining));
        out.put("describe_after_error",
                failure(() -> admin.describeTopics(List.of(topic)).allTopicNames().get()));
    }
}
