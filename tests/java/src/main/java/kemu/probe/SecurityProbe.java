package kemu.probe;

import java.io.FileReader;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Security settings, one scenario per {@code <name>.properties} file in {@code --configs}, in
 * name order, all in one JVM. Each file holds client properties (security.protocol, sasl.*,
 * ssl.*, bootstrap.servers) plus {@code probe.*} keys:
 *
 * <ul>
 *   <li>{@code probe.expect=ok} (default): describeCluster (the advertised endpoints go in the
 *       line), create topic {@code probe.topic}, produce {@code probe.records} records and read
 *       them back with a KafkaConsumer (assign + seekToBeginning);
 *   <li>{@code probe.expect=failure}: describeCluster must fail; the line has the exception
 *       (SaslAuthenticationException, SslAuthenticationException, ...);
 *   <li>{@code probe.alter.user} / {@code probe.alter.password} / {@code probe.alter.mechanism}:
 *       Admin.alterUserScramCredentials (8192 iterations), then describeUserScramCredentials.
 * </ul>
 */
public final class SecurityProbe {
    private SecurityProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        List<Path> files;
        try (Stream<Path> listing = Files.list(Path.of(probe.arg("configs", ".")))) {
            files = listing.filter(p -> p.toString().endsWith(".properties")).sorted().toList();
        }
        for (Path file : files) {
            Properties loaded = new Properties();
            try (Reader reader = new FileReader(file.toFile())) {
                loaded.load(reader);
            }
            String name = file.getFileName().toString().replace(".properties", "");
            probe.check("scenario", out -> {
                out.put("scenario", name);
                run(probe, loaded, out);
            });
        }
        System.exit(probe.exitCode());
    }

    private static void run(Probe probe, Properties loaded, Map<String, Object> out)
            throws Exception {
        Properties client = probe.clientConfig();
        Properties settings = new Properties();
        for (String key : loaded.stringPropertyNames()) {
            if (key.startsWith("probe.")) {
                settings.put(key, loaded.getProperty(key));
            } else {
                client.put(key, loaded.getProperty(key));
            }
        }
        String expect = settings.getProperty("probe.expect", "ok");
        if (expect.equals("failure")) {
            try (Admin admin = Admin.create(client)) {
                admin.describeCluster().nodes().get();
                throw new AssertionError("describeCluster succeeded");
            } catch (AssertionError unexpected) {
                throw unexpected;
            } catch (Exception failure) {
                out.put("failure", Probe.describe(failure));
            }
            return;
        }
        try (Admin admin = Admin.create(client)) {
            List<String> endpoints = new ArrayList<>();
            for (Node node : admin.describeCluster().nodes().get()) {
                endpoints.add(node.host() + ":" + node.port());
            }
            out.put("endpoints", endpoints.stream().sorted().toList());
            String user = settings.getProperty("probe.alter.user");
            if (user != null) {
                ScramMechanism mechanism = ScramMechanism.fromMechanismName(
                        settings.getProperty("probe.alter.mechanism", "SCRAM-SHA-512"));
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                        new ScramCredentialInfo(mechanism, 8192),
                        settings.getProperty("probe.alter.password")))).all().get();
                UserScramCredentialsDescription described =
                        admin.describeUserScramCredentials(List.of(user)).description(user).get();
                List<String> infos = new ArrayList<>();
                for (ScramCredentialInfo info : described.credentialInfos()) {
                    infos.add(info.mechanism().mechanismName() + ":" + info.iterations());
                }
                out.put("credentials", infos);
            }
            String topic = settings.getProperty("probe.topic");
            if (topic == null) {
                return;
            }
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        String topic = settings.getProperty("probe.topic");
        int records = Integer.parseInt(settings.getProperty("probe.records", "5"));
        Properties producerProps = (Properties) client.clone();
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
            }
        }
        Properties consumerProps = (Properties) client.clone();
        consumerProps.put("key.deserializer", StringDeserializer.class.getName());
        consumerProps.put("value.deserializer", StringDeserializer.class.getName());
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long deadline = System.currentTimeMillis() + 30_000;
            while (values.size() < records && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    values.add(record.value());
                }
            }
        }
        out.put("values", values);
        if (values.size() != records) {
            throw new AssertionError("read " + values.size() + " of " + records + " records");
        }
    }
}
