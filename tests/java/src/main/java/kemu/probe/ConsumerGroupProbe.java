package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KafkaConsumer with subscribe() in a consumer group: {@code --protocol classic} (the default:
 * JoinGroup/SyncGroup) or {@code consumer} (KIP-848 ConsumerGroupHeartbeat).
 *
 * <p>Checks, in order (each one JSON line):
 * <ul>
 *   <li>{@code group_consume}: {@code --records} records produced to a {@code --partitions}
 *       topic are consumed by {@code --consumers} KafkaConsumers in one group, each committing
 *       synchronously after every poll; reports who got what, duplicates and generations,
 *       and each commitSync() that threw (exception, message, and the member's epoch and
 *       assignment right after).</li>
 *   <li>{@code admin_view}: Admin listConsumerGroups, describeConsumerGroups (members and their
 *       assignments while the consumers are still in the group) and listConsumerGroupOffsets
 *       (the committed offsets equal the end offsets).</li>
 *   <li>{@code resume}: after every consumer closed (LeaveGroup), {@code --more} records more are
 *       produced and a new consumer in the group must read exactly those.</li>
 *   <li>{@code admin_offsets}: on the now empty group, Admin deleteConsumerGroupOffsets
 *       (partition 0), alterConsumerGroupOffsets (partition 1 to 7), listConsumerGroupOffsets,
 *       then deleteConsumerGroups and listConsumerGroups.</li>
 * </ul>
 */
public final class ConsumerGroupProbe {
    private ConsumerGroupProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "java-group");
        String group = probe.arg("group", topic + "-group");
        int partitions = probe.intArg("partitions", 6);
        int records = probe.intArg("records", 300);
        int more = probe.intArg("more", 30);
        int consumers = probe.intArg("consumers", 2);
        List<KafkaConsumer<String, String>> members = new ArrayList<>();

        probe.check("group_consume", out -> {
            try (Admin admin = Admin.create(probe.clientConfig())) {
                short replicas = (short) probe.intArg("replication-factor", 3);
                admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
            }
            produce(probe, topic, 0, records);
            for (int i = 0; i < consumers; i++) {
                KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(probe, group));
                consumer.subscribe(List.of(topic));
                members.add(consumer);
            }
            consumeAll(members, records, partitions, out);
        });

        probe.check("admin_view", out -> {
            try (Admin admin = Admin.create(probe.clientConfig())) {
                List<String> listed = new ArrayList<>();
                for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get()) {
                    listed.add(listing.groupId());
                }
                out.put("listed", listed);
                ConsumerGroupDescription description =
                        admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                out.put("state", description.groupState().toString());
                out.put("assignor", description.partitionAssignor());
                out.put("type", description.type().toString());
                List<Integer> assigned = new ArrayList<>();
                description.members().forEach(member ->
                        member.assignment().topicPartitions().forEach(tp -> assigned.add(tp.partition())));
                out.put("members", description.members().size());
                out.put("assigned_partitions", new TreeSet<>(assigned));
                Map<String, Object> committed = new TreeMap<>();
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                        .forEach((tp, offset) -> committed.put(tp.toString(), offset.offset()));
                out.put("committed", committed);
            }
        });

        for (KafkaConsumer<String, String> consumer : members) {
            consumer.close();
        }

        probe.check("resume", out -> {
            produce(probe, topic, records, more);
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(probe, group))) {
                consumer.subscribe(List.of(topic));
                List<String> values = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 60_000;
                while (values.size() < more && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                        values.add(record.value());
                    }
                    consumer.commitSync();
                }
                // Anything left over would be a record read twice.
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    values.add(record.value());
                }
                out.put("values", new TreeSet<>(values.stream().map(Integer::valueOf).toList()));
                out.put("count", values.size());
                out.put("generation", consumer.groupMetadata().generationId());
            }
        });
        probe.check("admin_offsets", out -> {
            try (Admin admin = Admin.create(probe.clientConfig())) {
                TopicPartition first = new TopicPartition(topic, 0);
                TopicPartition second = new TopicPartition(topic, 1);
                admin.deleteConsumerGroupOffsets(group, Set.of(first)).all().get();
                admin.alterConsumerGroupOffsets(group, Map.of(second, new OffsetAndMetadata(7, "by-admin")))
                        .all().get();
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                out.put("has_first", offsets.containsKey(first));
                out.put("second", offsets.get(second).offset());
                out.put("second_metadata", offsets.get(second).metadata());
                admin.deleteConsumerGroups(List.of(group)).all().get();
                List<String> listed = new ArrayList<>();
                for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get()) {
                    listed.add(listing.groupId());
                }
                out.put("listed_after_delete", listed);
            }
        });
        System.exit(probe.exitCode());
    }

    private static Properties consumerProps(Probe probe, String group) {
        Properties props = probe.clientConfig();
        props.put("group.id", group);
        props.put("group.protocol", probe.arg("protocol", "classic"));
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return props;
    }

    private static void produce(Probe probe, String topic, int first, int count) throws Exception {
        Properties props = probe.clientConfig();
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = first; i < first + count; i++) {
                producer.send(new ProducerRecord<>(topic, String.valueOf(i), String.valueOf(i)));
            }
            producer.flush();
        }
    }

    /** A failed commitSync(): the exception (and its cause), the member epoch and assignment as
     * the consumer sees them once it threw, and when (to find it in the broker's log). */
    private static Map<String, Object> describeCommitFailure(KafkaConsumer<String, String> consumer,
            RuntimeException failed) {
        Map<String, Object> failure = new TreeMap<>();
        failure.put("at_ms", System.currentTimeMillis());
        failure.put("exception", failed.getClass().getName());
        failure.put("message", String.valueOf(failed.getMessage()));
        if (failed.getCause() != null) {
            failure.put("cause", failed.getCause().getClass().getName() + ": "
                    + failed.getCause().getMessage());
        }
        failure.put("member_epoch", consumer.groupMetadata().generationId());
        Set<Integer> owned = new TreeSet<>();
        consumer.assignment().forEach(tp -> owned.add(tp.partition()));
        failure.put("assignment", owned);
        return failure;
    }

    /** Every consumer polls on its own thread until the group has read {@code total} records. */
    private static boolean settled(int received, int total, AtomicIntegerArray owning,
            int partitions) {
        int sum = 0;
        for (int i = 0; i < owning.length(); i++) {
            if (owning.get(i) == 0) {
                return false;
            }
            sum += owning.get(i);
        }
        return received >= total && sum == partitions;
    }

    private static void consumeAll(List<KafkaConsumer<String, String>> members, int total,
            int partitions, Map<String, Object> out) throws Exception {
        Map<String, Integer> timesSeen = new ConcurrentHashMap<>();
        AtomicInteger received = new AtomicInteger();
        List<Map<String, Object>> perConsumer = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 90_000;
        // How many partitions each consumer owns: everyone polls (which is what lets a
        // rebalance complete) until all is read and the partitions are spread over all of them.
        AtomicIntegerArray owning = new AtomicIntegerArray(members.size());
        for (KafkaConsumer<String, String> consumer : members) {
            int slot = perConsumer.size();
            Map<String, Object> mine = new HashMap<>();
            perConsumer.add(mine);
            Thread thread = new Thread(() -> {
                int count = 0;
                // Each commitSync() that threw: what, and where the member stood when it did.
                List<Map<String, Object>> commitFailures = new ArrayList<>();
                try {
                    while (!settled(received.get(), total, owning, partitions)
                            && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
                        owning.set(slot, consumer.assignment().size());
                        for (ConsumerRecord<String, String> record : batch) {
                            timesSeen.merge(record.value(), 1, Integer::sum);
                            count++;
                        }
                        received.addAndGet(batch.count());
                        if (!batch.isEmpty()) {
                            try {
                                consumer.commitSync();
                            } catch (RuntimeException failed) {
                                commitFailures.add(describeCommitFailure(consumer, failed));
                            }
                        }
                    }
                    // A last poll so that every member has seen the final generation.
                    consumer.poll(Duration.ofMillis(200));
                    Set<Integer> owned = new TreeSet<>();
                    consumer.assignment().forEach(tp -> owned.add(tp.partition()));
                    mine.put("received", count);
                    mine.put("commit_failures", commitFailures.size());
                    mine.put("commit_failure_details", commitFailures);
                    mine.put("assignment", owned);
                    mine.put("generation", consumer.groupMetadata().generationId());
                    mine.put("member_id", consumer.groupMetadata().memberId());
                } catch (Throwable failure) {
                    synchronized (failures) {
                        failures.add(failure);
                    }
                }
            });
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        out.put("consumers", perConsumer);
        out.put("received", received.get());
        out.put("distinct", timesSeen.size());
        out.put("duplicates", timesSeen.values().stream().filter(n -> n > 1).count());
        if (!failures.isEmpty()) {
            throw new AssertionError("a consumer failed", failures.get(0));
        }
        Map<String, Object> committed = new TreeMap<>();
        Set<TopicPartition> everything = new java.util.HashSet<>();
        members.forEach(consumer -> everything.addAll(consumer.assignment()));
        Map<TopicPartition, OffsetAndMetadata> offsets = members.get(0).committed(everything);
        offsets.forEach((tp, offset) -> committed.put(tp.toString(), offset == null ? null : offset.offset()));
        out.put("committed", committed);
    }
}
