package kemu.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The rolling restart of one static member (group.instance.id) of a KIP-848 consumer group
 * ({@code group.protocol=consumer}), as a Flink or Spark job restarting a task does it: close
 * the KafkaConsumer (its default close sends a static member's temporary leave, member epoch -2)
 * and open a new one with the same instance id within the session timeout.
 *
 * <p>Checks, in order (each one JSON line; every consumer has a ConsumerRebalanceListener that
 * records its callbacks):
 * <ul>
 *   <li>{@code settle}: consumers {@code a} and {@code b} (instance ids {@code <group>-a},
 *       {@code -b}) subscribe to a {@code --partitions} topic and are polled in turn until each
 *       owns its half at the same member epoch; reports both assignments, epochs, member ids,
 *       the callbacks so far and Admin's view of the group.</li>
 *   <li>{@code close}: {@code a} closed with the default CloseOptions; Admin's view of the group
 *       right after (is {@code a}'s member still there, at which epoch, owning what).</li>
 *   <li>{@code rejoin}: a new consumer {@code a2} with {@code a}'s instance id subscribes and is
 *       polled (with {@code b}) until it owns partitions, then both are polled on for
 *       {@code --observe-ms} (beyond two heartbeat intervals) so that a late change would show;
 *       reports {@code a2}'s assignment, epoch, member id and callbacks, the callbacks {@code b}
 *       got since {@code a} closed, {@code b}'s assignment and epoch, and Admin's view.</li>
 * </ul>
 */
public final class StaticRejoinProbe {
    private static final long WAIT_MS = 120_000;

    private StaticRejoinProbe() {}

    /** A consumer and the callbacks its listener was called with, in order. */
    private static final class Member {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final List<Map<String, Object>> callbacks = new ArrayList<>();

        Member(String name, Properties props, String topic) {
            this.name = name;
            this.consumer = new KafkaConsumer<>(props);
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    record("revoked", partitions);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    record("assigned", partitions);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    record("lost", partitions);
                }
            });
        }

        private void record(String callback, Collection<TopicPartition> partitions) {
            callbacks.add(Probe.map("callback", callback, "partitions", numbers(partitions)));
        }

        void poll() {
            consumer.poll(Duration.ofMillis(100));
        }

        Set<Integer> owned() {
            return numbers(consumer.assignment());
        }

        int epoch() {
            return consumer.groupMetadata().generationId();
        }

        String memberId() {
            return consumer.groupMetadata().memberId();
        }

        void describeInto(Map<String, Object> out) {
            out.put(name + "_assignment", owned());
            out.put(name + "_epoch", epoch());
            out.put(name + "_member_id", memberId());
            out.put(name + "_callbacks", new ArrayList<>(callbacks));
        }
    }

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "static-rejoin");
        String group = probe.arg("group", topic + "-group");
        int partitions = probe.intArg("partitions", 6);
        long observeMs = probe.intArg("observe-ms", 12_000);
        Member[] members = new Member[2];
        int[] bCallbacksAtClose = new int[1];

        probe.check("settle", out -> {
            try (Admin admin = Admin.create(probe.clientConfig())) {
                short replicas = (short) probe.intArg("replication-factor", 1);
                admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
            }
            members[0] = new Member("a", consumerProps(probe, group, group + "-a"), topic);
            members[1] = new Member("b", consumerProps(probe, group, group + "-b"), topic);
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (!settled(members[0], members[1], partitions)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("the group never settled: a " + members[0].owned()
                            + "@" + members[0].epoch() + ", b " + members[1].owned() + "@"
                            + members[1].epoch());
                }
                members[0].poll();
                members[1].poll();
            }
            members[0].describeInto(out);
            members[1].describeInto(out);
            describeGroup(probe, group, out);
        });

        probe.check("close", out -> {
            bCallbacksAtClose[0] = members[1].callbacks.size();
            members[0].consumer.close();
            out.put("a_callbacks", new ArrayList<>(members[0].callbacks));
            describeGroup(probe, group, out);
        });

        probe.check("rejoin", out -> {
            Member a2 = new Member("a2", consumerProps(probe, group, group + "-a"), topic);
            try {
                long deadline = System.currentTimeMillis() + WAIT_MS;
                while (a2.owned().isEmpty()) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new AssertionError("a2 was never assigned partitions");
                    }
                    a2.poll();
                    members[1].poll();
                }
                long observed = System.currentTimeMillis() + observeMs;
                while (System.currentTimeMillis() < observed) {
                    a2.poll();
                    members[1].poll();
                }
                a2.describeInto(out);
                members[1].describeInto(out);
                List<Map<String, Object>> sinceClose = members[1].callbacks.subList(
                        bCallbacksAtClose[0], members[1].callbacks.size());
                out.put("b_callbacks_since_close", new ArrayList<>(sinceClose));
                describeGroup(probe, group, out);
            } finally {
                a2.consumer.close();
                members[1].consumer.close();
            }
        });
        System.exit(probe.exitCode());
    }

    /** Each member owns its share, the two shares make the topic, at one member epoch. */
    private static boolean settled(Member a, Member b, int partitions) {
        Set<Integer> both = new TreeSet<>(a.owned());
        both.addAll(b.owned());
        return a.owned().size() == partitions / 2 && b.owned().size() == partitions - partitions / 2
                && both.size() == partitions && a.epoch() == b.epoch();
    }

    /** Admin's describeConsumerGroups: group epoch and state, and each member by instance id. */
    private static void describeGroup(Probe probe, String group, Map<String, Object> out)
            throws Exception {
        try (Admin admin = Admin.create(probe.clientConfig())) {
            ConsumerGroupDescription description =
                    admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            out.put("group_state", description.groupState().toString());
            out.put("group_epoch", description.groupEpoch());
            out.put("target_assignment_epoch", description.targetAssignmentEpoch());
            Map<String, Object> byInstance = new TreeMap<>();
            for (MemberDescription member : description.members()) {
                byInstance.put(member.groupInstanceId().orElse(member.consumerId()), Probe.map(
                        "member_id", member.consumerId(),
                        "epoch", member.memberEpoch(),
                        "assignment", numbers(member.assignment().topicPartitions())));
            }
            out.put("members", byInstance);
        }
    }

    private static Set<Integer> numbers(Collection<TopicPartition> partitions) {
        Set<Integer> numbers = new TreeSet<>();
        partitions.forEach(tp -> numbers.add(tp.partition()));
        return numbers;
    }

    private static Properties consumerProps(Probe probe, String group, String instanceId) {
        Properties props = probe.clientConfig();
        props.put("group.id", group);
        props.put("group.protocol", "consumer");
        props.put("group.instance.id", instanceId);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return props;
    }
}
