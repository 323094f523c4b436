package kemu.examples.flink;

import java.util.HashMap;
import java.util.Map;

/** {@code key=value} command-line arguments. */
final class Args {
  private Args() {}

  static Map<String, String> parse(String[] args) {
    Map<String, String> options = new HashMap<>();
    for (String arg : args) {
      int equals = arg.indexOf('=');
      if (equals <= 0) {
        throw new IllegalArgumentException("expected key=value, got " + arg);
      }
      options.put(arg.substring(0, equals), arg.substring(equals + 1));
    }
    return options;
  }

  static String required(Map<String, String> options, String key) {
    String value = options.get(key);
    if (value == null) {
      throw new IllegalArgumentException("missing " + key + "=...");
    }
    return value;
  }
}
