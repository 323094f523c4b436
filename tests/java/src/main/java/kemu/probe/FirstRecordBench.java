package kemu.probe;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;

/**
 * The Java side of {@code make bench-first-record} (bench/first_record.py): how long a user's
 * test waits on protocol timers, measured inside this JVM with {@link System#nanoTime()}.
 *
 * <p>{@code --kind classic|consumer|share|streams}: records are written to every partition of a
 * fresh topic first (untimed); then
 * <ul>
 * <li>{@code first_record}: member 1 subscribes (Streams: {@code start()}); until its first
 *     record;</li>
 * <li>{@code join}: with a producer writing to every partition every 20 ms, member 2 subscribes;
 *     until member 2's first record (it has partitions, so the rebalance is done);</li>
 * <li>{@code leave}: after {@code --steady-ms} of both consuming, member 2 closes (and leaves);
 *     from the close until member 1 has read a record of every partition member 2 had.</li>
 * </ul>
 * {@code --kind txn}: a read_committed consumer assigned partition 0 waits at its end; a new
 * transactional producer runs initTransactions, one send and commitTransaction; from the
 * producer's creation until the consumer has the record.
 *
 * <p>{@code --client-config key=value,...} sets client configs on every group member (a
 * Streams app's consumers too), e.g. {@code heartbeat.interval.ms=100}.
 *
 * <p>Prints one JSON line per figure: {@code {"measure": name, "us": microseconds}}, and
 * {@code {"error": ...}} (exit code 1) when a wait times out.
 */
public final class FirstRecordBench {
    private static final long PRODUCE_EVERY_MS = 20;

    private final Probe probe;
    private final String kind;
    private final String topic;
    private final String group;
    private final int partitions;
    private final long timeoutNanos;
    private final Map<String, String> memberConfig = new LinkedHashMap<>();
    private final Seen seen = new Seen();

    private FirstRecordBench(Probe probe) {
        this.probe = probe;
        this.kind = probe.arg("kind", "consumer");
        this.topic = probe.arg("topic", "first-record");
        this.group = probe.arg("group", "first-record");
        this.partitions = probe.intArg("partitions", 2);
        this.timeoutNanos = TimeUnit.MILLISECONDS.toNanos(probe.intArg("timeout-ms", 60_000));
        for (String entry : probe.arg("client-config", "").split(",")) {
            if (entry.isBlank()) {
                continue;
            }
            int equals = entry.indexOf('=');
            if (equals <= 0) {
                throw new IllegalArgumentException("--client-config is key=value,...; got " + entry);
            }
            memberConfig.put(entry.substring(0, equals).trim(), entry.substring(equals + 1).trim());
        }
    }

    public static void main(String[] argv) throws Exception {
        FirstRecordBench bench = new FirstRecordBench(new Probe(argv));
        try {
            bench.run();
        } catch (Exception failure) {
            Probe.emit(Probe.map("error", Probe.describe(failure)));
            System.exit(1);
        }
        System.exit(0);
    }

    private void run() throws Exception {
        try (Admin admin = Admin.create(probe.clientConfig())) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            if (kind.equals("share")) {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
                AlterConfigOp earliest = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(resource, List.of(earliest))).all().get();
            }
        }
        try (KafkaProducer<String, String> producer = producer(null)) {
            for (int partition = 0; partition < partitions; partition++) {
                for (int n = 0; n < probe.intArg("records", 10); n++) {
                    producer.send(new ProducerRecord<>(topic, partition, null, value(partition, n))).get();
                }
            }
        }
        if (kind.equals("txn")) {
            transactionRoundTrip();
        } else {
            groupTimes();
        }
    }

    private void groupTimes() throws Exception {
        Member first = member(1);
        first.start();
        long firstAt = seen.await(1, null, 0, timeoutNanos, "member 1's first record");
        report("first_record", firstAt - first.startedAt());
        if (probe.arg("only-first", "false").equals("true")) {
            first.close();
            return;
        }
        AtomicBoolean producing = new AtomicBoolean(true);
        Thread writer = new Thread(() -> keepProducing(producing), "writer");
        writer.start();
        try {
            Member second = member(2);
            second.start();
            long joinedAt = seen.await(2, null, 0, timeoutNanos, "member 2's first record");
            report("join", joinedAt - second.startedAt());
            Thread.sleep(probe.intArg("steady-ms", 1000));
            Set<Integer> given = seen.partitions(2);
            second.close();
            long leftAt = seen.await(1, given, second.closedAt(), timeoutNanos,
                "member 1 reading partitions " + given + " again");
            report("leave", leftAt - second.closedAt());
        } finally {
            producing.set(false);
            writer.join();
            first.close();
        }
    }

    private void transactionRoundTrip() throws Exception {
        Properties props = probe.clientConfig();
        props.put("isolation.level", "read_committed");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        TopicPartition partition = new TopicPartition(topic, 0);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        consumer.assign(List.of(partition));
        consumer.seekToEnd(List.of(partition));
        consumer.position(partition);
        Member reader = new PollingMember(1, consumer::poll, consumer::wakeup, consumer::close);
        reader.start();
        long created = System.nanoTime();
        try (KafkaProducer<String, String> producer = producer(group + "-txn")) {
            producer.initTransactions();
            long initialised = System.nanoTime();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, value(0, -1)));
            producer.commitTransaction();
            long committed = System.nanoTime();
            long readAt = seen.await(1, null, created, timeoutNanos, "the committed record");
            report("init", initialised - created);
            report("commit", committed - initialised);
            report("visible", readAt - committed);
            report("first_record", readAt - created);
        } finally {
            reader.close();
        }
    }

    private void keepProducing(AtomicBoolean producing) {
        try (KafkaProducer<String, String> producer = producer(null)) {
            for (int n = 0; producing.get(); n++) {
                for (int partition = 0; partition < partitions; partition++) {
                    producer.send(new ProducerRecord<>(topic, partition, null, value(partition, n)));
                }
                Thread.sleep(PRODUCE_EVERY_MS);
            }
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private KafkaProducer<String, String> producer(String transactionalId) {
        Properties props = probe.clientConfig();
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("linger.ms", "0");
        if (transactionalId != null) {
            props.put("transactional.id", transactionalId);
        }
        return new KafkaProducer<>(props);
    }

    private static String value(int partition, int n) {
        return "p" + partition + ":" + n;
    }

    private static int partitionOf(String value) {
        return Integer.parseInt(value.substring(1, value.indexOf(':')));
    }

    private void report(String measure, long nanos) {
        Probe.emit(Probe.map("measure", measure, "us", TimeUnit.NANOSECONDS.toMicros(nanos)));
    }

    private Member member(int index) {
        Properties props = probe.clientConfig();
        props.put("client.id", "first-record-" + index);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("group.id", group);
        props.putAll(memberConfig);
        switch (kind) {
            case "classic", "consumer" -> {
                props.put("group.protocol", kind);
                props.put("auto.offset.reset", "earliest");
                KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
                return new PollingMember(index, timeout -> {
                    if (consumer.subscription().isEmpty()) {
                        consumer.subscribe(List.of(topic));
                    }
                    return consumer.poll(timeout);
                }, consumer::wakeup, consumer::close);
            }
            case "share" -> {
                KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
                return new PollingMember(index, timeout -> {
                    if (consumer.subscription().isEmpty()) {
                        consumer.subscribe(List.of(topic));
                    }
                    return consumer.poll(timeout);
                }, consumer::wakeup, consumer::close);
            }
            case "streams" -> {
                return new StreamsMember(index);
            }
            default -> throw new IllegalArgumentException("--kind is classic, consumer, share, "
                + "streams or txn; got " + kind);
        }
    }

    /** When each member read a record of which partition; waits on those events. */
    private static final class Seen {
        private final Map<Integer, List<long[]>> byMember = new LinkedHashMap<>();

        synchronized void record(int member, int partition, long at) {
            byMember.computeIfAbsent(member, m -> new ArrayList<>()).add(new long[] {partition, at});
            notifyAll();
        }

        synchronized Set<Integer> partitions(int member) {
            Set<Integer> found = new HashSet<>();
            for (long[] event : byMember.getOrDefault(member, List.of())) {
                found.add((int) event[0]);
            }
            return found;
        }

        /**
         * The time by which {@code member} had read, at or after {@code after}, a record of every
         * partition in {@code wanted} (any partition when null).
         */
        synchronized long await(int member, Set<Integer> wanted, long after, long timeoutNanos,
                String what) throws InterruptedException, TimeoutException {
            long deadline = System.nanoTime() + timeoutNanos;
            while (true) {
                Set<Integer> missing = wanted == null ? null : new HashSet<>(wanted);
                for (long[] event : byMember.getOrDefault(member, List.of())) {
                    if (event[1] < after) {
                        continue;
                    }
                    if (missing == null) {
                        return event[1];
                    }
                    missing.remove((int) event[0]);
                    if (missing.isEmpty()) {
                        return event[1];
                    }
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new TimeoutException("timed out waiting for " + what);
                }
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
        }
    }

    private interface Member {
        void start() throws Exception;

        long startedAt();

        void close() throws Exception;

        long closedAt();
    }

    @FunctionalInterface
    private interface Poll {
        ConsumerRecords<String, String> poll(Duration timeout);
    }

    @FunctionalInterface
    private interface Action {
        void run() throws Exception;
    }

    /** A consumer (or share consumer) polled by a thread of its own: clients are single-threaded. */
    private final class PollingMember implements Member {
        private final int index;
        private final Poll poll;
        private final Runnable wakeup;
        private final Action closer;
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final Thread thread;
        private volatile long startedAt;
        private volatile long closedAt;
        private volatile Exception failure;

        PollingMember(int index, Poll poll, Runnable wakeup, Action closer) {
            this.index = index;
            this.poll = poll;
            this.wakeup = wakeup;
            this.closer = closer;
            this.thread = new Thread(this::loop, "member-" + index);
        }

        private void loop() {
            startedAt = System.nanoTime();
            try {
                while (running.get()) {
                    ConsumerRecords<String, String> records;
                    try {
                        records = poll.poll(Duration.ofMillis(100));
                    } catch (WakeupException woken) {
                        continue;
                    }
                    long now = System.nanoTime();
                    for (ConsumerRecord<String, String> record : records) {
                        seen.record(index, record.partition(), now);
                    }
                }
                closedAt = System.nanoTime();
                closer.run();
            } catch (Exception error) {
                failure = error;
            }
        }

        @Override
        public void start() {
            thread.start();
            while (startedAt == 0 && thread.isAlive()) {
                Thread.onSpinWait();
            }
        }

        @Override
        public long startedAt() {
            return startedAt;
        }

        @Override
        public void close() throws Exception {
            running.set(false);
            wakeup.run();
            thread.join();
            if (failure != null) {
                throw failure;
            }
        }

        @Override
        public long closedAt() {
            return closedAt;
        }
    }

    /** A Kafka Streams 4.4.0 app (group.protocol=streams) that notes each record it processes. */
    private final class StreamsMember implements Member {
        private final KafkaStreams streams;
        private final Path state;
        private long startedAt;
        private long closedAt;

        StreamsMember(int index) {
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, group);
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, probe.bootstrap());
            props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
            props.put(StreamsConfig.CLIENT_ID_CONFIG, "first-record-" + index);
            try {
                state = Files.createTempDirectory("first-record-streams-");
            } catch (java.io.IOException error) {
                throw new IllegalStateException(error);
            }
            props.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
            props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
            props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
            memberConfig.forEach((key, value) -> props.put(StreamsConfig.consumerPrefix(key), value));
            StreamsBuilder builder = new StreamsBuilder();
            builder.stream(topic, Consumed.with(Serdes.String(), Serdes.String()))
                .foreach((key, value) -> seen.record(index, partitionOf(value), System.nanoTime()));
            streams = new KafkaStreams(builder.build(), props);
        }

        @Override
        public void start() {
            startedAt = System.nanoTime();
            streams.start();
        }

        @Override
        public long startedAt() {
            return startedAt;
        }

        @Override
        public void close() {
            closedAt = System.nanoTime();
            streams.close(CloseOptions.groupMembershipOperation(
                CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(Duration.ofSeconds(30)));
            // the state directory is this run's alone: nothing of it is wanted afterwards
            try (var paths = Files.walk(state)) {
                paths.sorted(java.util.Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
            } catch (java.io.IOException ignored) {
                // a leftover temporary directory is harmless
            }
        }

        @Override
        public long closedAt() {
            return closedAt;
        }
    }
}
