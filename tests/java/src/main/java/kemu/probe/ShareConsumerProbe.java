package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaShareConsumer (ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v2) in one JVM, one
 * JSON line per check. Every check uses its own share group, {@code <prefix>-<name>}, whose
 * configs ({@code share.auto.offset.reset=earliest}, short lock durations, delivery limits) the
 * Python test set beforehand, as it produced the records. Records are reported as
 * "partition:offset" or "offset#deliveryCount".
 *
 * <p>Topics: {@code --topic} (3 partitions, {@code --records} records), {@code --single-topic}
 * (1 partition, {@code --single-records} records in one batch) and {@code --batched-topic}
 * (1 partition, {@code --batched-records} one-record batches).
 *
 * <ul>
 *   <li>consume_all / nothing_left (group implicit): implicit mode polls everything, commits
 *       and closes; a new consumer then gets nothing for 3 s.
 *   <li>close_all / close_nothing_left (group close): the same, closing without commitSync:
 *       close acknowledges nothing in implicit mode, so the last poll's records are released
 *       (their delivery counted, as Kafka 4.4.0 does) and the next consumer gets them.
 *   <li>explicit_release / explicit_nothing_left (group explicit): RELEASE offset 0, REJECT
 *       offset 1, ACCEPT the rest, until the released ones come back; then nothing is left.
 *   <li>record_limit (group limit): {@code share.acquire.mode=record_limit} with
 *       {@code max.poll.records=3} on the single topic: the size of every poll.
 *   <li>batch_optimized (group batch): the same with the default acquire mode.
 *   <li>shared_partition (group shared): three explicit consumers in threads ACCEPT the batched
 *       topic's records; what each got.
 *   <li>renew (group renew, lock {@code --renew-lock-ms}): consumer A holds its records for
 *       {@code --renew-hold-ms} (past the lock) by RENEWing every {@code --renew-every-ms}, then
 *       ACCEPTs; consumer B polls the same group meanwhile.
 *   <li>lock_expiry (group expiry, a short lock): A polls and holds without acknowledging; B
 *       polls until it has ACCEPTed every record of the topic, A's among them once their locks
 *       expired; then A's late ACCEPT is committed.
 *   <li>delivery_limit (group dlimit, share.delivery.count.limit 2): every delivery RELEASEd
 *       until nothing more comes.
 *   <li>resubscribe (group resubscribe): record_limit 5 on the single topic for one poll, then
 *       subscribed to the batched topic instead, consumed whole.
 *   <li>share_group_offsets: Admin.listShareGroupOffsets of every group above.
 * </ul>
 */
public final class ShareConsumerProbe {
    private static final Duration POLL = Duration.ofMillis(100);

    private ShareConsumerProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "share-java");
        String single = probe.arg("single-topic", "share-java-single");
        String batched = probe.arg("batched-topic", "share-java-batched");
        String prefix = probe.arg("prefix", "share-java");
        int records = probe.intArg("records", 30);
        int partitions = probe.intArg("partitions", 3);
        int singleRecords = probe.intArg("single-records", 20);
        int batchedRecords = probe.intArg("batched-records", 60);
        Set<String> only = Set.of(probe.arg("checks", "").split(","));
        ShareConsumerProbe runner = new ShareConsumerProbe();
        Map<String, String> groups = new LinkedHashMap<>();
        for (String name : List.of("implicit", "close", "explicit", "limit", "batch", "shared",
                "renew", "expiry", "dlimit", "resubscribe")) {
            groups.put(name, prefix + "-" + name);
        }

        if (wanted(only, "implicit")) {
            probe.check("consume_all", out -> runner.consumeAll(
                    probe, groups.get("implicit"), topic, records, true, out));
            probe.check("nothing_left", out -> out.put("records",
                    runner.drain(probe, groups.get("implicit"), topic, 3_000)));
        }
        if (wanted(only, "close")) {
            probe.check("close_all", out -> runner.consumeAll(
                    probe, groups.get("close"), topic, records, false, out));
            probe.check("close_nothing_left", out -> out.put("records",
                    runner.drain(probe, groups.get("close"), topic, 3_000)));
        }
        if (wanted(only, "explicit")) {
            probe.check("explicit_release", out -> runner.explicitRelease(
                    probe, groups.get("explicit"), topic, partitions, out));
            probe.check("explicit_nothing_left", out -> out.put("records",
                    runner.drain(probe, groups.get("explicit"), topic, 3_000)));
        }
        if (wanted(only, "limit")) {
            probe.check("record_limit", out -> runner.pollSizes(
                    probe, groups.get("limit"), single, singleRecords, "record_limit", out));
        }
        if (wanted(only, "batch")) {
            probe.check("batch_optimized", out -> runner.pollSizes(
                    probe, groups.get("batch"), single, singleRecords, "batch_optimized", out));
        }
        if (wanted(only, "shared")) {
            probe.check("shared_partition", out -> runner.sharedPartition(
                    probe, groups.get("shared"), batched, batchedRecords, 3, out));
        }
        if (wanted(only, "renew")) {
            probe.check("renew", out -> runner.renew(probe, groups.get("renew"), single,
                    probe.intArg("renew-every-ms", 700), probe.intArg("renew-hold-ms", 4_500),
                    out));
        }
        if (wanted(only, "expiry")) {
            probe.check("lock_expiry", out -> runner.lockExpiry(
                    probe, groups.get("expiry"), single, singleRecords, out));
        }
        if (wanted(only, "dlimit")) {
            probe.check("delivery_limit", out -> runner.deliveryLimit(
                    probe, groups.get("dlimit"), single, singleRecords, out));
        }
        if (wanted(only, "resubscribe")) {
            probe.check("resubscribe", out -> runner.resubscribe(probe,
                    groups.get("resubscribe"), single, batched, batchedRecords, out));
        }
        if (wanted(only, "offsets")) {
            probe.check("share_group_offsets", out -> {
                try (Admin admin = Admin.create(probe.clientConfig())) {
                    for (Map.Entry<String, String> group : groups.entrySet()) {
                        out.put(group.getKey(), offsets(admin, group.getValue()));
                    }
                }
            });
        }
        System.exit(probe.exitCode());
    }

    private static boolean wanted(Set<String> only, String name) {
        return only.contains("") || only.contains(name);
    }

    // --- checks -------------------------------------------------------------------------------

    /** Implicit mode: poll until {@code expected} records came, then commitSync or just close. */
    void consumeAll(Probe probe, String group, String topic, int expected, boolean commit,
            Map<String, Object> out) {
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, "implicit")) {
            consumer.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            Map<String, Object> counts = new TreeMap<>();
            List<Integer> polls = new ArrayList<>();
            List<String> last = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                if (!batch.isEmpty()) {
                    polls.add(batch.count());
                    last.clear();
                }
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    String key = record.partition() + ":" + record.offset();
                    got.add(key);
                    last.add(key);
                    counts.put(key, deliveryCount(record));
                }
            }
            out.put("records", got);
            out.put("delivery_counts", counts);
            out.put("polls", polls);
            out.put("last_poll", last);
            if (commit) {
                out.put("commit_errors", errors(consumer.commitSync()));
            }
        }
    }

    /**
     * A new implicit-mode consumer of the group polls for {@code millis}: what it got. It commits
     * before closing, which (unlike close) accepts the last poll's records.
     */
    List<String> drain(Probe probe, String group, String topic, long millis) {
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, "implicit")) {
            consumer.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + millis;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    got.add(record.partition() + ":" + record.offset() + "#"
                            + deliveryCount(record));
                }
            }
            consumer.commitSync();
            return got;
        }
    }

    void explicitRelease(Probe probe, String group, String topic, int partitions,
            Map<String, Object> out) {
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, "explicit")) {
            consumer.subscribe(List.of(topic));
            List<String> first = new ArrayList<>();
            List<String> second = new ArrayList<>();
            Map<String, Object> commitErrors = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (second.size() < partitions && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    String key = record.partition() + ":" + record.offset();
                    int delivery = deliveryCount(record);
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
                commitErrors.putAll(errors(consumer.commitSync()));
            }
            out.put("first", first);
            out.put("second", second);
            out.put("commit_errors", commitErrors);
        }
    }

    /** Implicit mode with {@code max.poll.records=3} in the given acquire mode. */
    void pollSizes(Probe probe, String group, String topic, int expected, String mode,
            Map<String, Object> out) {
        Properties extra = new Properties();
        extra.put("share.acquire.mode", mode);
        extra.put("max.poll.records", "3");
        try (KafkaShareConsumer<byte[], byte[]> consumer =
                consumer(probe, group, "implicit", extra)) {
            consumer.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            List<Integer> polls = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                if (!batch.isEmpty()) {
                    polls.add(batch.count());
                }
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    got.add(record.offset() + "#" + deliveryCount(record));
                }
            }
            out.put("records", got);
            out.put("polls", polls);
            out.put("commit_errors", errors(consumer.commitSync()));
        }
    }

    /** {@code count} explicit-mode consumers in threads ACCEPT records of one partition. */
    void sharedPartition(Probe probe, String group, String topic, int expected, int count,
            Map<String, Object> out) throws Exception {
        Set<Long> union = ConcurrentHashMap.newKeySet();
        ExecutorService pool = Executors.newFixedThreadPool(count);
        List<Future<Map<String, Object>>> results = new ArrayList<>();
        try {
            for (int index = 0; index < count; index++) {
                results.add(pool.submit(() -> {
                    Properties extra = new Properties();
                    extra.put("max.poll.records", "4");
                    List<String> got = new ArrayList<>();
                    Map<String, Object> result = new LinkedHashMap<>();
                    try (KafkaShareConsumer<byte[], byte[]> consumer =
                            consumer(probe, group, "explicit", extra)) {
                        consumer.subscribe(List.of(topic));
                        Map<String, Object> commitErrors = new TreeMap<>();
                        long deadline = System.currentTimeMillis() + 30_000;
                        while (union.size() < expected && System.currentTimeMillis() < deadline) {
                            ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                            for (ConsumerRecord<byte[], byte[]> record : batch) {
                                got.add(record.offset() + "#" + deliveryCount(record));
                                consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                            }
                            if (!batch.isEmpty()) {
                                commitErrors.putAll(errors(consumer.commitSync()));
                                batch.forEach(record -> union.add(record.offset()));
                                Thread.sleep(30); // "processing": leaves the others a turn
                            }
                        }
                        result.put("records", got);
                        result.put("commit_errors", commitErrors);
                    }
                    return result;
                }));
            }
            List<Object> consumers = new ArrayList<>();
            for (Future<Map<String, Object>> result : results) {
                consumers.add(result.get(60, TimeUnit.SECONDS));
            }
            out.put("consumers", consumers);
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * A holds its first poll's records past the lock duration by RENEWing them; B, another
     * member of the group, polls all the while and must not get them. A then ACCEPTs.
     */
    void renew(Probe probe, String group, String topic, int everyMs, int holdMs,
            Map<String, Object> out) throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        List<String> otherGot = Collections.synchronizedList(new ArrayList<>());
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (KafkaShareConsumer<byte[], byte[]> holder = consumer(probe, group, "explicit")) {
            holder.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> held = pollUntilSome(holder, 30_000);
            long acquired = System.currentTimeMillis();
            out.put("held", keys(held));
            out.put("lock_ms", holder.acquisitionLockTimeoutMs().orElse(null));
            Future<?> other = pool.submit(() -> {
                try (KafkaShareConsumer<byte[], byte[]> consumer =
                        consumer(probe, group, "implicit")) {
                    consumer.subscribe(List.of(topic));
                    while (!stop.get()) {
                        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                            otherGot.add(record.offset() + "#" + deliveryCount(record));
                        }
                    }
                }
                return null;
            });
            List<Object> rounds = new ArrayList<>();
            while (System.currentTimeMillis() - acquired + everyMs < holdMs) {
                Thread.sleep(everyMs);
                for (ConsumerRecord<byte[], byte[]> record : held) {
                    holder.acknowledge(record, AcknowledgeType.RENEW);
                }
                // the renewed records come back to the application once the broker answered
                List<ConsumerRecord<byte[], byte[]>> back = pollUntilSome(holder, 5_000);
                rounds.add(Probe.map("at_ms", System.currentTimeMillis() - acquired,
                        "back", keys(back)));
                if (back.isEmpty()) {
                    break; // nothing left to renew or accept: the test reports it
                }
                held = back;
            }
            Thread.sleep(Math.max(0, holdMs - (System.currentTimeMillis() - acquired)));
            for (ConsumerRecord<byte[], byte[]> record : held) {
                holder.acknowledge(record, AcknowledgeType.ACCEPT);
            }
            out.put("accepted", keys(held));
            out.put("accepted_at_ms", System.currentTimeMillis() - acquired);
            out.put("rounds", rounds);
            out.put("commit_errors", errors(holder.commitSync()));
            Thread.sleep(1_000); // B keeps polling: the accepted records must not reach it
            stop.set(true);
            other.get(30, TimeUnit.SECONDS);
            out.put("other", new ArrayList<>(otherGot));
        } finally {
            stop.set(true);
            pool.shutdownNow();
        }
    }

    /** A holds without acknowledging; B gets A's records once their locks expire. */
    void lockExpiry(Probe probe, String group, String topic, int expected,
            Map<String, Object> out) throws Exception {
        try (KafkaShareConsumer<byte[], byte[]> holder = consumer(probe, group, "explicit");
                KafkaShareConsumer<byte[], byte[]> other = consumer(probe, group, "explicit")) {
            holder.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> held = pollUntilSome(holder, 30_000);
            out.put("held", keys(held));
            out.put("lock_ms", holder.acquisitionLockTimeoutMs().orElse(null));
            // B takes everything: A's records (once their locks expired) and the rest
            Set<Long> wanted = ConcurrentHashMap.newKeySet();
            for (long offset = 0; offset < expected; offset++) {
                wanted.add(offset);
            }
            other.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (!wanted.isEmpty() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : other.poll(POLL)) {
                    got.add(record.offset() + "#" + deliveryCount(record));
                    wanted.remove(record.offset());
                    other.acknowledge(record, AcknowledgeType.ACCEPT);
                }
            }
            out.put("other", got);
            out.put("other_commit_errors", errors(other.commitSync()));
            for (ConsumerRecord<byte[], byte[]> record : held) {
                holder.acknowledge(record, AcknowledgeType.ACCEPT);
            }
            out.put("late_commit_errors", errors(holder.commitSync()));
        }
    }

    /** RELEASE every delivery until 3 s pass without any. */
    void deliveryLimit(Probe probe, String group, String topic, int expected,
            Map<String, Object> out) {
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(probe, group, "explicit")) {
            consumer.subscribe(List.of(topic));
            List<String> got = new ArrayList<>();
            Map<String, Object> commitErrors = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 30_000;
            long quietSince = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline
                    && (got.isEmpty() || System.currentTimeMillis() - quietSince < 3_000)) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    got.add(record.offset() + "#" + deliveryCount(record));
                    consumer.acknowledge(record, AcknowledgeType.RELEASE);
                }
                if (!batch.isEmpty()) {
                    quietSince = System.currentTimeMillis();
                    commitErrors.putAll(errors(consumer.commitSync()));
                }
            }
            out.put("records", got);
            out.put("commit_errors", commitErrors);
        }
    }

    /**
     * Implicit mode, {@code record_limit} 5: a few records of {@code first}, then the
     * subscription moves to {@code second} (the share session forgets the first topic) and
     * everything of it is consumed.
     */
    void resubscribe(Probe probe, String group, String first, String second, int expected,
            Map<String, Object> out) {
        Properties extra = new Properties();
        extra.put("share.acquire.mode", "record_limit");
        extra.put("max.poll.records", "5");
        try (KafkaShareConsumer<byte[], byte[]> consumer =
                consumer(probe, group, "implicit", extra)) {
            consumer.subscribe(List.of(first));
            List<String> before = keys(pollUntilSome(consumer, 30_000));
            consumer.subscribe(List.of(second));
            Map<String, List<String>> after = new TreeMap<>();
            int count = 0;
            long deadline = System.currentTimeMillis() + 30_000;
            while (count < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    after.computeIfAbsent(record.topic(), t -> new ArrayList<>())
                            .add(record.offset() + "#" + deliveryCount(record));
                    if (record.topic().equals(second)) {
                        count++;
                    }
                }
            }
            out.put("before", before);
            out.put("after", after);
            out.put("commit_errors", errors(consumer.commitSync()));
        }
    }

    // --- helpers ------------------------------------------------------------------------------

    private static List<ConsumerRecord<byte[], byte[]>> pollUntilSome(
            KafkaShareConsumer<byte[], byte[]> consumer, long millis) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + millis;
        while (got.isEmpty() && System.currentTimeMillis() < deadline) {
            consumer.poll(POLL).forEach(got::add);
        }
        return got;
    }

    private static List<String> keys(List<ConsumerRecord<byte[], byte[]>> records) {
        List<String> keys = new ArrayList<>();
        records.forEach(record -> keys.add(record.offset() + "#" + deliveryCount(record)));
        return keys;
    }

    private static int deliveryCount(ConsumerRecord<byte[], byte[]> record) {
        return record.deliveryCount().map(Short::intValue).orElse(-1);
    }

    private static KafkaShareConsumer<byte[], byte[]> consumer(
            Probe probe, String group, String mode) {
        return consumer(probe, group, mode, new Properties());
    }

    private static KafkaShareConsumer<byte[], byte[]> consumer(
            Probe probe, String group, String mode, Properties extra) {
        Properties props = probe.clientConfig();
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", mode);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putAll(extra);
        return new KafkaShareConsumer<>(probe.withExtra(props, "consumer-props"));
    }

    private static Map<String, Object> errors(
            Map<TopicIdPartition, Optional<KafkaException>> results) {
        Map<String, Object> errors = new TreeMap<>();
        results.forEach((partition, error) -> error.ifPresent(
                failure -> errors.put(partition.topicPartition().toString(),
                        failure.getClass().getSimpleName() + ": " + failure.getMessage())));
        return errors;
    }

    /** The group's share offsets: partition -> {start, lag}. */
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
}
