package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Round trip through a multi-partition topic, once per compression codec.
 *
 * <p>For each codec in {@code --codecs} (default none,gzip,snappy,lz4,zstd): create topic
 * {@code <prefix>-<codec>} with {@code --partitions} partitions (Admin), produce {@code --records}
 * records with a KafkaProducer at default settings (idempotent, acks=all) plus that
 * compression.type, then read them back with a KafkaConsumer using assign() and
 * seekToBeginning(). Prints one {"check": "produce_consume", "codec": ...} line per codec with
 * what was sent (as RecordMetadata placed it), what was received, and the differences.
 *
 * <p>Records cover the awkward cases: a null key, a null value, an empty value, a 64 KiB
 * incompressible value, repeated/empty/null header values, and non-monotonic timestamps.
 */
public final class ProduceConsume {
    private ProduceConsume() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String prefix = probe.arg("topic-prefix", "java-roundtrip");
        int partitions = probe.intArg("partitions", 3);
        int records = probe.intArg("records", 40);
        String[] codecs = probe.arg("codecs", "none,gzip,snappy,lz4,zstd").split(",");
        for (String codec : codecs) {
            String topic = prefix + "-" + codec;
            probe.check("produce_consume", out -> {
                out.put("codec", codec);
                out.put("topic", topic);
                createTopic(probe, topic, partitions);
                roundTrip(probe, topic, partitions, records, codec, out);
            });
        }
        System.exit(probe.exitCode());
    }

    private static void createTopic(Probe probe, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(probe.clientConfig())) {
            short replicas = (short) probe.intArg("replication-factor", 3);
            admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
        }
    }

    private static void roundTrip(Probe probe, String topic, int partitions, int count,
            String codec, Map<String, Object> result) throws Exception {
        long baseTimestamp = (System.currentTimeMillis() / 1000) * 1000 - 60_000;
        List<ProducerRecord<byte[], byte[]>> outgoing = new ArrayList<>();
        Random random = new Random(codec.hashCode());
        for (int i = 0; i < count; i++) {
            outgoing.add(record(topic, i % partitions, i, count, baseTimestamp, random));
        }

        Properties producerProps = probe.clientConfig();
        producerProps.put("key.serializer", ByteArraySerializer.class.getName());
        producerProps.put("value.serializer", ByteArraySerializer.class.getName());
        producerProps.put("max.block.ms", "30000");
        producerProps.put("delivery.timeout.ms", "60000");
        if (!codec.equals("none")) {
            producerProps.put("compression.type", codec);
        }
        producerProps = probe.withExtra(producerProps, "producer-props");
        ProducerConfig effective = new ProducerConfig(producerProps);
        result.put("idempotence", effective.getBoolean("enable.idempotence"));
        result.put("acks", effective.getString("acks"));

        List<Map<String, Object>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
            int seen = producer.partitionsFor(topic).size();
            result.put("partitions_seen", seen);
            if (seen != partitions) {
                throw new AssertionError(topic + " has " + seen + " partitions, not " + partitions);
            }
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> record : outgoing) {
                futures.add(producer.send(record));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata metadata = futures.get(i).get();
                ProducerRecord<byte[], byte[]> record = outgoing.get(i);
                Map<String, Object> entry = describe(metadata.partition(), metadata.offset(),
                        metadata.timestamp(), record.key(), record.value(), record.headers());
                entry.put("requested_partition", record.partition());
                entry.put("requested_timestamp", record.timestamp());
                sent.add(entry);
            }
        }
        result.put("sent", sent);

        Properties consumerProps = probe.clientConfig();
        consumerProps.put("key.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps.put("value.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps = probe.withExtra(consumerProps, "consumer-props");
        List<Map<String, Object>> received = new ArrayList<>();
        List<String> timestampTypes = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps)) {
            List<TopicPartition> assigned = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                assigned.add(new TopicPartition(topic, p));
            }
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            long deadline = System.currentTimeMillis() + 30_000;
            while (received.size() < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    received.add(describe(record.partition(), record.offset(), record.timestamp(),
                            record.key(), record.value(), record.headers()));
                    timestampTypes.add(record.timestampType().name);
                }
            }
            result.put("beginning_offsets", byPartition(consumer.beginningOffsets(assigned)));
            result.put("end_offsets", byPartition(consumer.endOffsets(assigned)));
        }
        result.put("received", received);
        result.put("timestamp_types", timestampTypes.stream().distinct().toList());
        List<String> mismatches = compare(sent, received);
        result.put("mismatches", mismatches);
        if (!mismatches.isEmpty()) {
            throw new AssertionError("round trip differs: " + mismatches);
        }
        if (!timestampTypes.stream().allMatch(TimestampType.CREATE_TIME.name::equals)) {
            throw new AssertionError("timestamp types " + timestampTypes);
        }
    }

    private static ProducerRecord<byte[], byte[]> record(String topic, int partition, int i,
            int count, long baseTimestamp, Random random) {
        byte[] key = i == 5 ? null : ("key-" + i).getBytes();
        byte[] value;
        if (i == 7) {
            value = null;
        } else if (i == 8) {
            value = new byte[0];
        } else if (i == count - 1) {
            value = new byte[64 * 1024];
            random.nextBytes(value);
        } else {
            value = ("value-" + i + "-").repeat(1 + i % 9).getBytes();
        }
        List<Header> headers = new ArrayList<>();
        headers.add(new RecordHeader("trace", ("id-" + i).getBytes()));
        headers.add(new RecordHeader("multi", "a".getBytes()));
        headers.add(new RecordHeader("multi", "b".getBytes()));
        if (i % 4 == 0) {
            headers.add(new RecordHeader("empty", new byte[0]));
        }
        if (i % 5 == 0) {
            headers.add(new RecordHeader("null", (byte[]) null));
        }
        // Every third record steps back in time: timestamps need not grow with offsets.
        long timestamp = baseTimestamp + i * 10L - (i % 3 == 2 ? 25 : 0);
        return new ProducerRecord<>(topic, partition, timestamp, key, value, headers);
    }

    private static Map<String, Object> describe(int partition, long offset, long timestamp,
            byte[] key, byte[] value, Iterable<Header> headers) {
        List<Object> headerList = new ArrayList<>();
        for (Header header : headers) {
            headerList.add(Arrays.asList(header.key(), header.value()));
        }
        return Probe.map("partition", partition, "offset", offset, "timestamp", timestamp,
                "key", key, "value", value, "headers", headerList);
    }

    private static Map<String, Object> byPartition(Map<TopicPartition, Long> offsets) {
        Map<String, Object> result = new TreeMap<>();
        offsets.forEach((tp, offset) -> result.put(String.valueOf(tp.partition()), offset));
        return result;
    }

    /** Differences between what RecordMetadata reported and what the consumer read. */
    private static List<String> compare(List<Map<String, Object>> sent,
            List<Map<String, Object>> received) {
        List<String> problems = new ArrayList<>();
        Map<String, Map<String, Object>> byPosition = new HashMap<>();
        for (Map<String, Object> record : received) {
            String position = record.get("partition") + "@" + record.get("offset");
            if (byPosition.put(position, record) != null) {
                problems.add("received twice: " + position);
            }
        }
        for (Map<String, Object> expected : sent) {
            String position = expected.get("partition") + "@" + expected.get("offset");
            if (!Objects.equals(expected.get("partition"), expected.get("requested_partition"))) {
                problems.add("sent to another partition: " + position);
            }
            if (!Objects.equals(expected.get("timestamp"), expected.get("requested_timestamp"))) {
                problems.add("metadata timestamp differs: " + position);
            }
            Map<String, Object> actual = byPosition.remove(position);
            if (actual == null) {
                problems.add("missing: " + position);
                continue;
            }
            for (String field : List.of("timestamp", "key", "value", "headers")) {
                if (!Probe.Json.write(expected.get(field)).equals(Probe.Json.write(actual.get(field)))) {
                    problems.add(field + " differs at " + position);
                }
            }
        }
        for (String extra : byPosition.keySet()) {
            problems.add("unexpected: " + extra);
        }
        return problems;
    }
}
