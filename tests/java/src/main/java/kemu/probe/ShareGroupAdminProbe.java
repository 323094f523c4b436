package kemu.probe;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The Admin client's share-group API, one JSON line per check, in this order:
 * list_share_groups, describe_share_groups, describe_missing_share_group,
 * alter_group_configs, alter_group_configs_invalid, alter_offsets_non_empty, alter_offsets,
 * list_offsets, delete_offsets, list_offsets_after_delete, delete_share_groups.
 *
 * <p>{@code --busy-group} must already have members subscribed to {@code --topic} (the Python
 * test joins it with raw ShareGroupHeartbeats); {@code --group} must not exist yet: its offsets
 * are altered (which creates it, empty), listed, deleted, and the group is deleted at the end.
 */
public final class ShareGroupAdminProbe {
    private ShareGroupAdminProbe() {}

    public static void main(String[] argv) throws Exception {
        Probe probe = new Probe(argv);
        String topic = probe.arg("topic", "share-admin");
        String busy = probe.arg("busy-group", "share-admin-busy");
        String group = probe.arg("group", "share-admin-empty");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = Admin.create(probe.clientConfig())) {
            probe.check("list_share_groups", out -> {
                Collection<GroupListing> listed =
                        admin.listGroups(ListGroupsOptions.forShareGroups()).all().get();
                Map<String, Object> groups = new TreeMap<>();
                for (GroupListing listing : listed) {
                    groups.put(listing.groupId(), Probe.map(
                            "type", listing.type().map(Object::toString).orElse(null),
                            "protocol", listing.protocol(),
                            "state", listing.groupState().map(Object::toString).orElse(null)));
                }
                out.put("groups", groups);
                out.put("count", listed.size());
            });
            probe.check("describe_share_groups", out -> {
                ShareGroupDescription described =
                        admin.describeShareGroups(List.of(busy)).describedGroups().get(busy).get();
                out.put("group", described.groupId());
                out.put("state", described.groupState().toString());
                out.put("group_epoch", described.groupEpoch());
                out.put("assignment_epoch", described.targetAssignmentEpoch());
                out.put("coordinator", described.coordinator().id());
                List<Object> members = new ArrayList<>();
                for (ShareMemberDescription member : described.members()) {
                    Set<String> partitions = new TreeSet<>();
                    member.assignment().topicPartitions().forEach(tp -> partitions.add(tp.toString()));
                    members.add(Probe.map(
                            "member_id", member.consumerId(),
                            "client_id", member.clientId(),
                            "host", member.host(),
                            "epoch", member.memberEpoch(),
                            "partitions", partitions));
                }
                out.put("members", members);
            });
            probe.check("describe_missing_share_group", out -> {
                try {
                    admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                    out.put("outcome", "described");
                } catch (Exception error) {
                    out.put("outcome", Probe.unwrap(error).getClass().getSimpleName());
                }
            });
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            probe.check("alter_group_configs", out -> {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(
                        new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", "20000"),
                                AlterConfigOp.OpType.SET)))).all().get();
                Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
                for (String name : List.of("share.auto.offset.reset",
                        "share.record.lock.duration.ms", "share.isolation.level")) {
                    ConfigEntry entry = config.get(name);
                    out.put(name, Probe.map("value", entry.value(), "source",
                            entry.source().toString()));
                }
            });
            probe.check("alter_group_configs_invalid", out -> {
                try {
                    admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                            new ConfigEntry("share.record.lock.duration.ms", "1"),
                            AlterConfigOp.OpType.SET)))).all().get();
                    out.put("outcome", "accepted");
                } catch (Exception error) {
                    out.put("outcome", Probe.unwrap(error).getClass().getSimpleName());
                    out.put("message", Probe.unwrap(error).getMessage());
                }
            });
            probe.check("alter_offsets_non_empty", out -> {
                try {
                    admin.alterShareGroupOffsets(busy, Map.of(p0, 0L)).all().get();
                    out.put("outcome", "altered");
                } catch (Exception error) {
                    out.put("outcome", Probe.unwrap(error).getClass().getSimpleName());
                }
            });
            probe.check("alter_offsets", out -> {
                admin.alterShareGroupOffsets(group, Map.of(p0, 2L, p1, 0L)).all().get();
                out.put("altered", 2);
            });
            probe.check("list_offsets", out -> out.put("offsets", offsets(admin, group)));
            probe.check("delete_offsets", out -> {
                admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get();
                out.put("deleted", topic);
            });
            probe.check("list_offsets_after_delete",
                    out -> out.put("offsets", offsets(admin, group)));
            probe.check("delete_share_groups", out -> {
                admin.deleteShareGroups(List.of(group)).all().get();
                try {
                    admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                    out.put("after", "still there");
                } catch (Exception error) {
                    out.put("after", Probe.unwrap(error).getClass().getSimpleName());
                }
            });
        }
        System.exit(probe.exitCode());
    }

    /** Every offset the group has: partition -> {start, leader_epoch, lag}. */
    private static Map<String, Object> offsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, SharePartitionOffsetInfo> found = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group)
                .get();
        Map<String, Object> result = new TreeMap<>();
        found.forEach((tp, info) -> result.put(tp.toString(), info == null ? null : Probe.map(
                "start", info.startOffset(),
                "leader_epoch", info.leaderEpoch().orElse(null),
                "lag", info.lag().orElse(null))));
        return result;
    }
}
