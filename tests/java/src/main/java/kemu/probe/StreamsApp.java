package kemu.probe;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams 4.4.0 application for tests/integration/groups/test_streams_java.py.
 *
 * <p>{@code --mode upper}: stateless, each value upper-cased from input to output.
 * {@code --mode count}: re-keys each record by its value (a repartition topic) and counts per
 * word in a state store backed by a changelog topic, writing "word" -> "count" to the output.
 * Exactly-once (v2) unless {@code --guarantee at_least_once}; {@code --protocol streams} (the
 * default) uses KIP-1071's broker-side rebalance protocol, {@code classic} the old one.
 *
 * <p>Prints one JSON line per state change ({@code {"state": "RUNNING"}}) and runs until its
 * stdin closes (or SIGTERM), then closes the application cleanly.
 */
public final class StreamsApp {
    private StreamsApp() {
    }

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String mode = probe.arg("mode", "upper");
        String input = probe.arg("input", "streams-in");
        String output = probe.arg("output", "streams-out");

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, probe.arg("app-id", "kemu-streams"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, probe.bootstrap());
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, probe.arg("protocol", "streams"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, probe.arg("guarantee", "exactly_once_v2"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, probe.arg("state-dir", "/tmp/kemu-streams"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, probe.arg("commit-interval-ms", "100"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, probe.arg("threads", "1"));
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"),
            probe.arg("transaction-timeout-ms", "10000"));

        StreamsBuilder builder = new StreamsBuilder();
        var source = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        if (mode.equals("count")) {
            source.map((key, value) -> KeyValue.pair(value, value))
                .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        } else {
            source.mapValues(value -> value.toUpperCase())
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("{\"state\": \"" + now + "\", \"before\": \"" + before + "\"}");
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(failure -> {
            System.out.println("{\"uncaught\": " + Probe.Json.write(String.valueOf(failure)) + "}");
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            closed.countDown();
        }));
        streams.start();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (stdin.readLine() != null) {
            // any line: keep running; end of input: close
        }
        streams.close();
        System.out.println("{\"closed\": true}");
        System.out.flush();
        closed.countDown();
        System.exit(0);
    }
}
