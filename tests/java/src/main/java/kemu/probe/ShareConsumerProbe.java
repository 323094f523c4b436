package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaShareConsumer (ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v2), one JSON line
 * per check, in this order:
 *
 * <ul>
 *   <li>consume_all: an implicit-mode consumer of {@code --group} polls until it has
 *       {@code --records} records, commits and closes; reports each record as
 *       "partition:offset" with its delivery count.
 *   <li>nothing_left: a new consumer of the same group polls for 3 s; reports what it got.
 *   <li>explicit_release: an explicit-mode consumer of {@code --explicit-group} RELEASEs the
 *       records at offset 0, REJECTs those at offset 1 and ACCEPTs the rest, commits, and polls
 *       until the released ones come back; reports first and second deliveries.
 * </ul>
 *
 * <p>The topic, its records and the groups' {@code share.auto.offset.reset=earliest} are set up
 * by the Python test.
 */
public final class ShareConsumerProbe {
    private ShareConsumerProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "share-java");
        String group = probe.arg("group", "share-java-group");
        String explicitGroup = probe.arg("explicit-group", "share-java-explicit");
        int records = probe.intArg("records", 30);
        int partitions = probe.intArg("partitions", 3);

        probe.check("consume_all", out -> {
            try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, "implicit")) {
                consumer.subscribe(List.of(topic));
                List<String> got = new ArrayList<>();
                Map<String, Object> counts = new TreeMap<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (got.size() < records && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        String key = record.partition() + ":" + record.offset();
                        got.add(key);
                        counts.put(key, record.deliveryCount().map(Short::intValue).orElse(-1));
                    }
                }
                out.put("records", got);
                out.put("delivery_counts", counts);
                out.put("commit_errors", errors(consumer.commitSync()));
            }
        });

        probe.check("nothing_left", out -> {
            try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, "implicit")) {
                consumer.subscribe(List.of(topic));
                List<String> got = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 3_000;
                while (System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        got.add(record.partition() + ":" + record.offset());
                    }
                }
                out.put("records", got);
            }
        });

        probe.check("explicit_release", out -> {
            try (KafkaShareConsumer<byte[], byte[]> consumer =
                    consumer(probe, explicitGroup, "explicit")) {
                consumer.subscribe(List.of(topic));
                List<String> first = new ArrayList<>();
                List<String> second = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (second.size() < partitions && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        String key = record.partition() + ":" + record.offset();
                        int delivery = record.deliveryCount().map(Short::intValue).orElse(-1);
                        if (delivery == 1) {
                            first.add(key);
                        } else {
                            second.add(key + "#" + delivery);
                        }
                        AcknowledgeType type = AcknowledgeType.ACCEPT;
                        if (delivery == 1 && record.offset() == 0) {
                            type = AcknowledgeType.RELEASE;
                        } else if (delivery == 1 && record.offset() == 1) {
                            type = AcknowledgeType.REJECT;
                        }
                        consumer.acknowledge(record, type);
                    }
                    out.put("commit_errors", errors(consumer.commitSync()));
                }
                out.put("first", first);
                out.put("second", second);
            }
        });
        System.exit(probe.exitCode());
    }

    private static KafkaShareConsumer<byte[], byte[]> consumer(
            Probe probe, String group, String mode) {
        Properties props = probe.clientConfig();
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", mode);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaShareConsumer<>(probe.withExtra(props, "consumer-props"));
    }

    private static Map<String, Object> errors(
            Map<TopicIdPartition, Optional<KafkaException>> results) {
        Map<String, Object> errors = new TreeMap<>();
        results.forEach((partition, error) -> error.ifPresent(
                failure -> errors.put(partition.toString(), failure.toString())));
        return errors;
    }
}
