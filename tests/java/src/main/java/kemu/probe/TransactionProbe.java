package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KafkaProducer with {@code transactional.id} and a read_committed KafkaConsumer.
 *
 * <p>Checks (one JSON line each):
 * <ul>
 *   <li>{@code commit_abort}: on topic {@code --topic} ({@code --partitions}), one transaction of
 *       {@code --records} records is committed, one of as many aborted, one more committed with
 *       {@code sendOffsetsToTransaction} for group {@code --topic}-group; a read_committed
 *       consumer (assign, from the beginning) reports what it saw, a read_uncommitted one its
 *       count, and the group's committed offsets are reported, and the producer epoch
 *       afterwards (transaction version 2 bumps it with every EndTxn).</li>
 *   <li>{@code fencing}: a second producer with the same transactional id calls
 *       initTransactions while the first has a transaction open; the first's late record gets
 *       INVALID_PRODUCER_EPOCH (as from Kafka's partition leader), so its commit throws
 *       InvalidProducerEpochException; the second commits, and read_committed sees only its
 *       record.</li>
 *   <li>{@code eos_loop} (once per group protocol in {@code --protocols}, default
 *       classic,consumer): a read_committed consumer subscribed in a group reads 60 records of a
 *       3-partition source topic and a transactional producer copies each poll to a sink topic,
 *       sending the consumer's positions with {@code groupMetadata()} (generation or member
 *       epoch checked by TxnOffsetCommit); reports records copied, the group's committed offsets
 *       and what read_committed sees in the sink.</li>
 *   <li>{@code admin_view}: with a transaction open on {@code --topic}-admin partition 0, Admin
 *       listTransactions, describeTransactions and describeProducers report it (state,
 *       producer, partitions, the open transaction's first offset);
 *       after the abort describeTransactions reports CompleteAbort.</li>
 * </ul>
 */
public final class TransactionProbe {
    private TransactionProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "java-txn");
        int partitions = probe.intArg("partitions", 3);
        int records = probe.intArg("records", 30);
        probe.check("commit_abort", out -> {
            createTopic(probe, topic, partitions);
            commitAbort(probe, topic, partitions, records, out);
        });
        probe.check("fencing", out -> {
            createTopic(probe, topic + "-fence", 1);
            fencing(probe, topic + "-fence", out);
        });
        for (String protocol : probe.arg("protocols", "classic,consumer").split(",")) {
            probe.check("eos_loop", out -> {
                out.put("protocol", protocol);
                eosLoop(probe, topic + "-eos-" + protocol, protocol, 60, out);
            });
        }
        probe.check("admin_view", out -> {
            createTopic(probe, topic + "-admin", 1);
            adminView(probe, topic + "-admin", out);
        });
        System.exit(probe.exitCode());
    }

    private static void eosLoop(Probe probe, String source, String protocol, int count,
            Map<String, Object> out) throws Exception {
        String sink = source + "-sink";
        String group = source + "-group";
        createTopic(probe, source, 3);
        createTopic(probe, sink, 3);
        Properties plainProps = probe.clientConfig();
        plainProps.put("key.serializer", StringSerializer.class.getName());
        plainProps.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(plainProps)) {
            for (int i = 0; i < count; i++) {
                plain.send(new ProducerRecord<>(source, i % 3, null, "in-" + i));
            }
        }
        int copied = 0;
        int generation = -1;
        Properties consumerProps = probe.clientConfig();
        consumerProps.put("group.id", group);
        consumerProps.put("group.protocol", protocol);
        consumerProps.put("isolation.level", "read_committed");
        consumerProps.put("enable.auto.commit", "false");
        consumerProps.put("auto.offset.reset", "earliest");
        consumerProps.put("key.deserializer", StringDeserializer.class.getName());
        consumerProps.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps);
                KafkaProducer<String, String> producer = producer(probe, source + "-tid")) {
            producer.initTransactions();
            consumer.subscribe(List.of(source));
            long deadline = System.currentTimeMillis() + 60_000;
            while (copied < count && System.currentTimeMillis() < deadline) {
                var records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new java.util.HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    producer.send(new ProducerRecord<>(sink, record.partition(), null,
                            record.value()));
                    offsets.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    copied++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                generation = consumer.groupMetadata().generationId();
            }
        }
        out.put("copied", copied);
        out.put("generation", generation);
        try (Admin admin = Admin.create(probe.clientConfig())) {
            long committed = 0;
            for (OffsetAndMetadata offset : admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get().values()) {
                committed += offset.offset();
            }
            out.put("committed", committed);
        }
        out.put("sink_committed", readAll(probe, sink, 3, "read_committed", count).size());
    }

    private static void adminView(Probe probe, String topic, Map<String, Object> out)
            throws Exception {
        String transactionalId = topic + "-tid";
        try (KafkaProducer<String, String> producer = producer(probe, transactionalId);
                Admin admin = Admin.create(probe.clientConfig())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "open")).get();
            List<String> listed = new ArrayList<>();
            for (var listing : admin.listTransactions().all().get()) {
                if (listing.transactionalId().equals(transactionalId)) {
                    listed.add(listing.state().toString());
                }
            }
            out.put("listed", listed);
            var open = admin.describeTransactions(List.of(transactionalId)).all().get()
                    .get(transactionalId);
            out.put("state", open.state().toString());
            out.put("producer_epoch", open.producerEpoch());
            out.put("timeout_ms", open.transactionTimeoutMs());
            out.put("has_start", open.transactionStartTimeMs().isPresent());
            List<String> partitions = new ArrayList<>();
            for (TopicPartition tp : open.topicPartitions()) {
                partitions.add(tp.toString());
            }
            out.put("partitions", partitions);
            TopicPartition tp = new TopicPartition(topic, 0);
            List<Object> producers = new ArrayList<>();
            for (var state : admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                    .activeProducers()) {
                producers.add(Probe.map("producer_id", state.producerId(),
                        "epoch", state.producerEpoch(),
                        "txn_start", state.currentTransactionStartOffset().orElse(-1)));
            }
            out.put("producers", producers);
            producer.abortTransaction();
            out.put("after_abort", admin.describeTransactions(List.of(transactionalId)).all().get()
                    .get(transactionalId).state().toString());
        }
    }

    private static void createTopic(Probe probe, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(probe.clientConfig())) {
            short replicas = (short) probe.intArg("replication-factor", 3);
            admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
        }
    }

    private static KafkaProducer<String, String> producer(Probe probe, String transactionalId) {
        Properties props = probe.clientConfig();
        props.put("transactional.id", transactionalId);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("max.block.ms", "20000");
        return new KafkaProducer<>(props);
    }

    private static KafkaConsumer<String, String> consumer(Probe probe, String isolation,
            String group) {
        Properties props = probe.clientConfig();
        props.put("isolation.level", isolation);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        if (group != null) {
            props.put("group.id", group);
        }
        return new KafkaConsumer<>(props);
    }

    private static List<String> readAll(Probe probe, String topic, int partitions,
            String isolation, int expected) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = consumer(probe, isolation, null)) {
            List<TopicPartition> assigned = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                assigned.add(new TopicPartition(topic, p));
            }
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            long deadline = System.currentTimeMillis() + 30_000;
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < deadline
                    && System.currentTimeMillis() < quietUntil) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                }
                if (values.size() >= expected && quietUntil == Long.MAX_VALUE) {
                    quietUntil = System.currentTimeMillis() + 1500;
                }
            }
        }
        return values;
    }

    private static void commitAbort(Probe probe, String topic, int partitions, int count,
            Map<String, Object> out) throws Exception {
        String group = topic + "-group";
        try (KafkaProducer<String, String> producer = producer(probe, topic + "-tid")) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, "commit-" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, "abort-" + i));
            }
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "last"));
            try (KafkaConsumer<String, String> groupConsumer = consumer(probe, "read_committed",
                    group)) {
                producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(7)),
                        groupConsumer.groupMetadata());
            }
            producer.commitTransaction();
        }
        try (Admin admin = Admin.create(probe.clientConfig())) {
            // Transaction version 2 bumps the epoch with every EndTxn: 3 after three transactions.
            out.put("epoch_after", admin.describeTransactions(List.of(topic + "-tid")).all().get()
                    .get(topic + "-tid").producerEpoch());
        }
        List<String> committed = readAll(probe, topic, partitions, "read_committed", count + 1);
        out.put("committed_count", committed.size());
        out.put("committed_aborted_seen", committed.stream().filter(v -> v.startsWith("abort-"))
                .count());
        out.put("committed_has_last", committed.contains("last"));
        out.put("uncommitted_count",
                readAll(probe, topic, partitions, "read_uncommitted", 2 * count + 1).size());
        try (KafkaConsumer<String, String> groupConsumer = consumer(probe, "read_committed",
                group)) {
            OffsetAndMetadata offset = groupConsumer.committed(
                    java.util.Set.of(new TopicPartition(topic, 0))).get(new TopicPartition(topic, 0));
            out.put("group_offset", offset == null ? null : offset.offset());
        }
    }

    private static void fencing(Probe probe, String topic, Map<String, Object> out)
            throws Exception {
        String transactionalId = topic + "-tid";
        KafkaProducer<String, String> first = producer(probe, transactionalId);
        try (KafkaProducer<String, String> second = producer(probe, transactionalId)) {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
            second.initTransactions();
            try {
                first.send(new ProducerRecord<>(topic, 0, null, "late"));
                first.commitTransaction();
                out.put("first_outcome", "committed");
            } catch (ProducerFencedException fenced) {
                out.put("first_outcome", "ProducerFencedException");
            } catch (Exception other) {
                Throwable root = Probe.unwrap(other);
                out.put("first_outcome", root.getClass().getSimpleName() + ": " + root.getMessage());
            }
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, null, "fresh"));
            second.commitTransaction();
        } finally {
            first.close(Duration.ofSeconds(5));
        }
        out.put("committed", readAll(probe, topic, 1, "read_committed", 1));
    }
}
