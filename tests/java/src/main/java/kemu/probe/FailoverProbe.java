package kemu.probe;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka 4.4.0 clients across one broker's stop and start ({@code --control URL}, POST
 * /brokers/{node}/stop and /start with a preferred-leader election).
 *
 * <p>{@code failover}: a transactional producer writes {@code --topic} (3 partitions, RF 3) in
 * transactions of 10 records, a plain producer writes {@code --share-topic}; a read_committed
 * KIP-848 consumer (group {@code --group}) commits its offsets after every poll, an implicit-mode
 * share consumer (group {@code --share-group}) reads the share topic. Three rounds of 10 records:
 * before broker {@code --stop} stops, while it is stopped, after it started again. Reported: the
 * distinct values each consumer saw (30 expected, nothing lost), how many it saw twice, and the
 * committed offsets a new consumer of the group finds (their sum is 30: the group coordinator's
 * state survived its move).
 */
public final class FailoverProbe {
    private static final int PER_ROUND = 10;
    private static final int ROUND_SECONDS = 60;

    private FailoverProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        probe.check("failover", out -> failover(probe, out));
        System.exit(probe.exitCode());
    }

    private static String post(String url, String body) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(url))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8))
                .build();
        HttpResponse<String> answer = HttpClient.newHttpClient()
                .send(request, HttpResponse.BodyHandlers.ofString());
        if (answer.statusCode() != 200) {
            throw new IllegalStateException(url + ": " + answer.body());
        }
        return answer.body();
    }

    private static void failover(Probe probe, Map<String, Object> out) throws Exception {
        String control = probe.arg("control", "");
        int stop = probe.intArg("stop", 2);
        String topic = probe.arg("topic", "fo-data");
        String shareTopic = probe.arg("share-topic", "fo-share");

        Properties txnProps = probe.clientConfig();
        txnProps.put("transactional.id", probe.arg("transactional-id", "fo-tx"));
        Properties plainProps = probe.clientConfig();
        Properties consumerProps = probe.clientConfig();
        consumerProps.put("group.id", probe.arg("group", "fo-group"));
        consumerProps.put("group.protocol", "consumer");
        consumerProps.put("isolation.level", "read_committed");
        consumerProps.put("auto.offset.reset", "earliest");
        consumerProps.put("enable.auto.commit", "false");
        Properties shareProps = probe.clientConfig();
        shareProps.put("group.id", probe.arg("share-group", "fo-share-group"));

        Set<String> consumed = new HashSet<>();
        Set<String> shared = new HashSet<>();
        int[] twice = new int[2];
        try (KafkaProducer<String, String> txn =
                        new KafkaProducer<>(txnProps, new StringSerializer(), new StringSerializer());
                KafkaProducer<String, String> plain =
                        new KafkaProducer<>(plainProps, new StringSerializer(), new StringSerializer());
                KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                        consumerProps, new StringDeserializer(), new StringDeserializer());
                KafkaShareConsumer<String, String> share = new KafkaShareConsumer<>(
                        shareProps, new StringDeserializer(), new StringDeserializer())) {
            txn.initTransactions();
            consumer.subscribe(List.of(topic));
            share.subscribe(List.of(shareTopic));
            for (int round = 0; round < 3; round++) {
                if (round == 1) {
                    out.put("stopped", post(control + "/brokers/" + stop + "/stop", "{}"));
                } else if (round == 2) {
                    out.put("started", post(control + "/brokers/" + stop + "/start",
                            "{\"elect_preferred\": true}"));
                }
                txn.beginTransaction();
                for (int i = 0; i < PER_ROUND; i++) {
                    String value = "r" + round + "-" + i;
                    txn.send(new ProducerRecord<>(topic, value, value));
                    plain.send(new ProducerRecord<>(shareTopic, value, value));
                }
                txn.commitTransaction();
                plain.flush();
                int wanted = (round + 1) * PER_ROUND;
                long deadline = System.nanoTime() + Duration.ofSeconds(ROUND_SECONDS).toNanos();
                while ((consumed.size() < wanted || shared.size() < wanted)
                        && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                        if (!consumed.add(record.value())) {
                            twice[0]++;
                        }
                    }
                    consumer.commitSync();
                    for (ConsumerRecord<String, String> record : share.poll(Duration.ofMillis(200))) {
                        if (!shared.add(record.value())) {
                            twice[1]++;
                        }
                    }
                }
                out.put("round" + round, Probe.map(
                        "consumed", consumed.size(), "shared", shared.size()));
            }
            share.commitSync();
        }
        out.put("consumed", consumed.size());
        out.put("consumed_twice", twice[0]);
        out.put("shared", shared.size());
        out.put("shared_twice", twice[1]);
        try (KafkaConsumer<String, String> again = new KafkaConsumer<>(
                consumerProps, new StringDeserializer(), new StringDeserializer())) {
            Set<TopicPartition> partitions = new HashSet<>();
            for (int p = 0; p < 3; p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            long committed = 0;
            for (OffsetAndMetadata offset : again.committed(partitions).values()) {
                committed += offset == null ? 0 : offset.offset();
            }
            // a partition's committed offset counts its records and its transactions' markers:
            // all consumed, it is the partition's end offset
            out.put("committed_offsets", committed);
            long end = 0;
            for (Long offset : again.endOffsets(partitions).values()) {
                end += offset;
            }
            out.put("end_offsets", end);
        }
        if (consumed.size() != 3 * PER_ROUND || shared.size() != 3 * PER_ROUND) {
            throw new IllegalStateException("records lost across the failover");
        }
    }
}
