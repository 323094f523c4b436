// The consumer-group exactly-once cycle `make bench` compares kemu's KIP-1289 share cycle with
// (bench/client_phases.py): poll a batch, produce each record transformed, hand the batch's
// offsets to the transaction with sendOffsetsToTransaction, commit. Run in source-file mode
// (`java -cp 'bench/.cache/lib/*' bench/java/EosCycle.java ...`), so Maven builds nothing.
// Prints one line: RESULT {"records":..,"transactions":..,"elapsed_s":..,"p50_ms":..,"p99_ms":..}
// A cycle's latency runs from the moment its batch of records was there to the end of its commit.

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class EosCycle {
    public static void main(String[] args) {
        if (args.length != 7) {
            System.err.println("usage: EosCycle BOOTSTRAP SOURCE SINK GROUP RECORDS BATCH TIMEOUT_S");
            System.exit(2);
        }
        String bootstrap = args[0];
        String source = args[1];
        String sink = args[2];
        String group = args[3];
        long records = Long.parseLong(args[4]);
        int batch = Integer.parseInt(args[5]);
        long deadline = System.nanoTime() + Long.parseLong(args[6]) * 1_000_000_000L;

        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerProps.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(batch));
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + "-cycle");

        List<Double> latencies = new ArrayList<>();
        long done = 0;
        long started = System.nanoTime();
        long ended;
        try (KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                KafkaProducer<byte[], byte[]> producer =
                        new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer())) {
            consumer.subscribe(List.of(source));
            producer.initTransactions();
            // A poll returns at most max.poll.records, often fewer (what one fetch brought):
            // records are queued so that every transaction holds `batch` of them, as kemu's
            // record_limit share fetch gives, unless no more come within 100 ms.
            ArrayDeque<ConsumerRecord<byte[], byte[]>> queue = new ArrayDeque<>();
            while (done < records && System.nanoTime() < deadline) {
                while (queue.size() < batch && done + queue.size() < records
                        && System.nanoTime() < deadline) {
                    ConsumerRecords<byte[], byte[]> polled =
                            consumer.poll(Duration.ofMillis(queue.isEmpty() ? 1000 : 100));
                    if (polled.isEmpty() && !queue.isEmpty()) {
                        break;
                    }
                    polled.forEach(queue::add);
                }
                if (queue.isEmpty()) {
                    continue;
                }
                long cycleStart = System.nanoTime();
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                int taken = 0;
                while (taken < batch && !queue.isEmpty()) {
                    ConsumerRecord<byte[], byte[]> record = queue.poll();
                    producer.send(new ProducerRecord<>(sink, record.key(), lowerAscii(record.value())));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    taken++;
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                producer.commitTransaction();
                latencies.add((System.nanoTime() - cycleStart) / 1e6);
                done += taken;
            }
            ended = System.nanoTime();
        }
        double[] sorted = latencies.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        System.out.printf(Locale.ROOT,
                "RESULT {\"elapsed_s\": %.6f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"records\": %d, \"transactions\": %d}%n",
                (ended - started) / 1e9, percentile(sorted, 0.5), percentile(sorted, 0.99), done, latencies.size());
        System.exit(done >= records ? 0 : 1);
    }

    /** Nearest rank, as bench.client_phases.percentile. */
    static double percentile(double[] sorted, double fraction) {
        if (sorted.length == 0) {
            return 0.0;
        }
        int rank = Math.max(1, (int) Math.ceil(fraction * sorted.length));
        return sorted[rank - 1];
    }

    static byte[] lowerAscii(byte[] value) {
        if (value == null) {
            return new byte[0];
        }
        byte[] out = Arrays.copyOf(value, value.length);
        for (int i = 0; i < out.length; i++) {
            if (out[i] >= 'A' && out[i] <= 'Z') {
                out[i] = (byte) (out[i] + 32);
            }
        }
        return out;
    }
}
