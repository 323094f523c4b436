import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;

/**
 * Prints Kafka's broker config definitions (AbstractKafkaConfig.CONFIG_DEF) as JSON lines:
 * name, type, default as Kafka describes it (null when there is none), whether a broker may
 * change it dynamically (DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS) and its documentation.
 * conformance/broker_catalogue.py turns them into kemu's catalogue.
 */
public final class BrokerConfigDump {
    public static void main(String[] args) {
        Map<String, ConfigDef.ConfigKey> keys = new TreeMap<>(AbstractKafkaConfig.CONFIG_DEF.configKeys());
        for (ConfigDef.ConfigKey key : keys.values()) {
            Object value = key.defaultValue;
            String shown = value == ConfigDef.NO_DEFAULT_VALUE || value == null
                ? null : ConfigDef.convertToString(value, key.type);
            List<String> fields = new ArrayList<>();
            fields.add("\"name\":" + quote(key.name));
            fields.add("\"type\":" + quote(key.type.name()));
            fields.add("\"default\":" + (shown == null ? "null" : quote(shown)));
            fields.add("\"dynamic\":" + DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS.contains(key.name));
            fields.add("\"internal\":" + key.internalConfig);
            fields.add("\"doc\":" + quote(key.documentation == null ? "" : key.documentation));
            System.out.println("{" + String.join(",", fields) + "}");
        }
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
