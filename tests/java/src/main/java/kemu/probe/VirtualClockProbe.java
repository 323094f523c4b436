package kemu.probe;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java clients connected to a kemu started with {@code --clock virtual}; the probe moves kemu's
 * clock itself through the control API ({@code --control URL}, POST /clock/advance).
 *
 * <ul>
 *   <li>{@code lock_expiry}: share consumer A (group {@code --group}, a 60 s lock) acquires the
 *       one record of {@code --share-topic} and holds it; B gets nothing; after advancing 59 s B
 *       still gets nothing, after 2 s more B gets the record (its delivery count reported).</li>
 *   <li>{@code txn_timeout}: a transactional producer ({@code transaction.timeout.ms} 15 min)
 *       sends a record to {@code --topic} and does not commit; kemu's clock advances 16 min; the
 *       commit then fails (the coordinator aborted and fenced it), and a read_committed consumer
 *       sees no record.</li>
 * </ul>
 */
public final class VirtualClockProbe {
    private VirtualClockProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String control = probe.arg("control", "");
        probe.check("lock_expiry", out -> lockExpiry(probe, control, out));
        probe.check("txn_timeout", out -> txnTimeout(probe, control, out));
        System.exit(probe.exitCode());
    }

    private static String advance(String control, String duration) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(control + "/clock/advance"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"duration\": \"" + duration + "\"}"))
                .build();
        HttpResponse<String> answer = HttpClient.newHttpClient()
                .send(request, HttpResponse.BodyHandlers.ofString());
        if (answer.statusCode() != 200) {
            throw new IllegalStateException("advance " + duration + ": " + answer.body());
        }
        return answer.body();
    }

    private static KafkaShareConsumer<byte[], byte[]> shareConsumer(Probe probe, String group) {
        Properties props = probe.clientConfig();
        props.put("group.id", group);
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(
                props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.subscribe(List.of(probe.arg("share-topic", "vc-share")));
        return consumer;
    }

    /** Poll for up to {@code seconds}; the delivery counts of the records that came. */
    private static List<Integer> pollFor(KafkaShareConsumer<byte[], byte[]> consumer, int seconds) {
        List<Integer> counts = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
        while (counts.isEmpty() && System.nanoTime() < deadline) {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                counts.add(record.deliveryCount().orElse((short) -1) & 0xffff);
            }
        }
        return counts;
    }

    private static void lockExpiry(Probe probe, String control, Map<String, Object> out)
            throws Exception {
        String group = probe.arg("group", "vc-group");
        try (KafkaShareConsumer<byte[], byte[]> first = shareConsumer(probe, group);
                KafkaShareConsumer<byte[], byte[]> second = shareConsumer(probe, group)) {
            List<Integer> held = pollFor(first, 30);
            out.put("first", held);
            if (held.isEmpty()) {
                throw new IllegalStateException("the first consumer got nothing");
            }
            out.put("second_before", pollFor(second, 3));
            advance(control, "59s");
            out.put("second_after_59s", pollFor(second, 2));
            advance(control, "2s");
            out.put("second_after_61s", pollFor(second, 30));
        }
    }

    private static void txnTimeout(Probe probe, String control, Map<String, Object> out)
            throws Exception {
        String topic = probe.arg("topic", "vc-txn");
        Properties props = probe.clientConfig();
        props.put("transactional.id", "vc-slow-tx");
        props.put("transaction.timeout.ms", "900000");
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "never")).get();
            producer.flush();
            out.put("advance", advance(control, "16m"));
            try {
                producer.commitTransaction();
                out.put("commit", "committed");
            } catch (Exception failure) {
                out.put("commit", failure.getClass().getSimpleName());
            }
        }
        Properties consumerProps = probe.clientConfig();
        consumerProps.put("isolation.level", "read_committed");
        consumerProps.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                consumerProps, new StringDeserializer(), new StringDeserializer())) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            int seen = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(3).toNanos();
            while (System.nanoTime() < deadline) {
                seen += consumer.poll(Duration.ofMillis(200)).count();
            }
            out.put("read_committed", seen);
            out.put("position", consumer.position(partition));
        }
    }
}
