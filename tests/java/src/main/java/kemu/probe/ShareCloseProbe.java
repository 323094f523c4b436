package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * What closing an explicit-mode KafkaShareConsumer does to the records it holds, and what
 * Admin.listShareGroupOffsets reports once everything is acknowledged. Run against kemu and a
 * real Kafka 4.4.0 with the same arguments; one JSON line per check.
 *
 * <p>The topic ({@code --topic}) has one partition holding {@code --records} records in one
 * batch; the group ({@code --group}) reads from the earliest offset (set by the caller).
 *
 * <ul>
 *   <li>close_half: a consumer with {@code max.poll.records=--poll-records} polls once (the
 *       fetch acquires the whole batch; the application gets the first records), ACCEPTs the
 *       first {@code --accept} of them, leaves the rest of the poll unacknowledged and closes.
 *   <li>after_close: a second consumer ACCEPTs everything left, reporting "offset#deliveryCount"
 *       per record, then commits and closes.
 *   <li>offsets_after_ack: listShareGroupOffsets of the group: partition -> {start, lag}.
 * </ul>
 */
public final class ShareCloseProbe {
    private static final Duration POLL = Duration.ofMillis(100);

    private ShareCloseProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "share-close");
        String group = probe.arg("group", "share-close");
        int records = probe.intArg("records", 20);
        int pollRecords = probe.intArg("poll-records", 6);
        int accept = probe.intArg("accept", 3);
        probe.check("close_half", out -> closeHalf(probe, group, topic, pollRecords, accept, out));
        probe.check("after_close", out -> drain(probe, group, topic, records, out));
        probe.check("offsets_after_ack", out -> {
            try (Admin admin = Admin.create(probe.clientConfig())) {
                out.put("offsets", offsets(admin, group));
            }
        });
        System.exit(probe.exitCode());
    }

    static void closeHalf(Probe probe, String group, String topic, int pollRecords, int accept,
            Map<String, Object> out) {
        Properties extra = new Properties();
        extra.put("max.poll.records", Integer.toString(pollRecords));
        List<String> polled = new ArrayList<>();
        List<String> accepted = new ArrayList<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, extra)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (polled.isEmpty() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    String key = record.offset() + "#" + deliveryCount(record);
                    polled.add(key);
                    if (accepted.size() < accept) {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                        accepted.add(key);
                    }
                }
            }
        }
        out.put("polled", polled);
        out.put("accepted", accepted);
    }

    static void drain(Probe probe, String group, String topic, int records,
            Map<String, Object> out) {
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer =
                consumer(probe, group, new Properties())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            // until every offset not accepted before came, then one more quiet second
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    got.add(record.offset() + "#" + deliveryCount(record));
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                if (!batch.isEmpty()) {
                    consumer.commitSync();
                    if (quietUntil == Long.MAX_VALUE) {
                        quietUntil = System.currentTimeMillis() + 3_000;
                    }
                }
            }
            consumer.commitSync();
        }
        out.put("records", got);
    }

    private static Map<String, Object> offsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, SharePartitionOffsetInfo> found = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group)
                .get();
        Map<String, Object> result = new TreeMap<>();
        found.forEach((tp, info) -> result.put(tp.toString(), info == null ? null : Probe.map(
                "start", info.startOffset(), "lag", info.lag().orElse(null))));
        return result;
    }

    private static int deliveryCount(ConsumerRecord<byte[], byte[]> record) {
        return record.deliveryCount().map(Short::intValue).orElse(-1);
    }

    private static KafkaShareConsumer<byte[], byte[]> consumer(
            Probe probe, String group, Properties extra) {
        Properties props = probe.clientConfig();
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putAll(extra);
        return new KafkaShareConsumer<>(probe.withExtra(props, "consumer-props"));
    }
}
