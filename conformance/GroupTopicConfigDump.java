import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.coordinator.group.GroupConfig;
import org.apache.kafka.server.config.ServerTopicConfigSynonyms;
import org.apache.kafka.storage.internals.log.LogConfig;

/**
 * Prints Kafka's group (GroupConfig.CONFIG_DEF) and topic (LogConfig's ConfigDef) config
 * definitions as JSON lines: kind, name, type, default as Kafka describes it (null when there is
 * none), validator as Kafka prints it, whether it is internal, the broker config that supplies
 * its default (null when none) and its documentation. conformance/config_catalogues.py turns
 * them into kemu's group and topic catalogues.
 */
public final class GroupTopicConfigDump {
    public static void main(String[] args) {
        Map<String, ConfigDef.ConfigKey> groups = new TreeMap<>(GroupConfig.CONFIG_DEF.configKeys());
        for (ConfigDef.ConfigKey key : groups.values()) {
            print("group", key, GroupConfig.isInternal(key.name),
                GroupConfig.brokerSynonym(key.name).orElse(null));
        }
        Map<String, ConfigDef.ConfigKey> topics = new TreeMap<>(LogConfig.configKeys());
        for (ConfigDef.ConfigKey key : topics.values()) {
            print("topic", key, key.internalConfig,
                ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS.get(key.name));
        }
    }

    private static void print(String kind, ConfigDef.ConfigKey key, boolean internal, String synonym) {
        Object value = key.defaultValue;
        String shown = value == ConfigDef.NO_DEFAULT_VALUE || value == null
            ? null : ConfigDef.convertToString(value, key.type);
        List<String> fields = new ArrayList<>();
        fields.add("\"kind\":" + quote(kind));
        fields.add("\"name\":" + quote(key.name));
        fields.add("\"type\":" + quote(key.type.name()));
        fields.add("\"default\":" + (shown == null ? "null" : quote(shown)));
        fields.add("\"validator\":" + (key.validator == null ? "null" : quote(key.validator.toString())));
        fields.add("\"internal\":" + internal);
        fields.add("\"broker_synonym\":" + (synonym == null ? "null" : quote(synonym)));
        fields.add("\"doc\":" + quote(key.documentation == null ? "" : key.documentation));
        System.out.println("{" + String.join(",", fields) + "}");
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
