package kemu.probe;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions ended by the coordinator, as kafka-clients 4.4.0 sees them (one JSON line each).
 *
 * <ul>
 *   <li>{@code timeout_commit}: a producer with {@code transaction.timeout.ms} {@code --timeout-ms}
 *       writes a record, waits twice that long (the coordinator aborts the transaction) and
 *       commits; reports the exception class the commit throws and the transaction's state.</li>
 *   <li>{@code force_terminate}: a producer leaves a transaction open; Admin
 *       {@code forceTerminateTransaction} ends it; reports the state and producer epoch
 *       describeTransactions gives before and after.</li>
 *   <li>{@code timeout_send} / {@code timeout_send_offsets}: as {@code timeout_commit}, but the
 *       producer then sends a record (a Produce enlisting the partition) or offsets
 *       (TxnOffsetCommit); reports what that throws, what the abortTransaction after it throws
 *       (none: the error was abortable) and whether a next transaction commits.</li>
 * </ul>
 */
public final class TxnAdminProbe {
    private TxnAdminProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "txn-admin");
        int timeoutMs = probe.intArg("timeout-ms", 1000);
        try (Admin admin = Admin.create(probe.clientConfig())) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            probe.check("timeout_commit", out -> timeoutCommit(probe, admin, topic, timeoutMs, out));
            probe.check("force_terminate", out -> forceTerminate(probe, admin, topic, out));
            probe.check("timeout_send", out -> afterTimeout(probe, admin, topic, timeoutMs, false, out));
            probe.check("timeout_send_offsets",
                    out -> afterTimeout(probe, admin, topic, timeoutMs, true, out));
        }
        System.exit(probe.exitCode());
    }

    private static KafkaProducer<String, String> producer(Probe probe, String id, int timeoutMs) {
        Properties props = probe.clientConfig();
        props.put("transactional.id", id);
        props.put("transaction.timeout.ms", String.valueOf(timeoutMs));
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(props);
    }

    private static TransactionDescription describe(Admin admin, String id) throws Exception {
        return admin.describeTransactions(List.of(id)).description(id).get();
    }

    private static void timeoutCommit(Probe probe, Admin admin, String topic, int timeoutMs,
            Map<String, Object> out) throws Exception {
        String id = topic + "-timeout";
        try (KafkaProducer<String, String> producer = producer(probe, id, timeoutMs)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "v")).get();
            Thread.sleep(2L * timeoutMs + 1000);
            out.put("state_before_commit", describe(admin, id).state().toString());
            try {
                producer.commitTransaction();
                out.put("commit_error", null);
            } catch (Exception e) {
                out.put("commit_error", e.getClass().getSimpleName());
            }
        }
    }

    private static void forceTerminate(Probe probe, Admin admin, String topic,
            Map<String, Object> out) throws Exception {
        String id = topic + "-terminate";
        try (KafkaProducer<String, String> producer = producer(probe, id, 60000)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "v")).get();
            TransactionDescription open = describe(admin, id);
            out.put("state_before", open.state().toString());
            out.put("epoch_before", (int) open.producerEpoch());
            admin.forceTerminateTransaction(id).result().get();
            TransactionDescription ended = describe(admin, id);
            out.put("state_after", ended.state().toString());
            out.put("epoch_after", (int) ended.producerEpoch());
            out.put("same_producer_id", ended.producerId() == open.producerId());
        }
    }

    private static void afterTimeout(Probe probe, Admin admin, String topic, int timeoutMs,
            boolean offsets, Map<String, Object> out) throws Exception {
        String id = topic + (offsets ? "-timeout-offsets" : "-timeout-send");
        try (KafkaProducer<String, String> producer = producer(probe, id, timeoutMs)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "v")).get();
            Thread.sleep(2L * timeoutMs + 1000);
            out.put("state_before", describe(admin, id).state().toString());
            try {
                if (offsets) {
                    producer.sendOffsetsToTransaction(
                            Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1)),
                            new ConsumerGroupMetadata(id + "-group"));
                    producer.commitTransaction();
                } else {
                    producer.send(new ProducerRecord<>(topic, "k", "v2")).get();
                }
                out.put("error", null);
            } catch (Exception e) {
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                out.put("error", cause.getClass().getSimpleName());
            }
            out.put("abort_error", outcome(producer::abortTransaction));
            out.put("next_commit_error", outcome(() -> {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, "k", "v3")).get();
                producer.commitTransaction();
            }));
        }
    }

    private interface Step {
        void run() throws Exception;
    }

    private static String outcome(Step step) {
        try {
            step.run();
            return null;
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }
}
