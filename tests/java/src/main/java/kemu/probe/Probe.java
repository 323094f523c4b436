package kemu.probe;

import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * What every probe shares: {@code --name value} arguments, client settings, and checks that each
 * print one JSON line ({@code {"check": name, "ok": true|false, ...}}) to stdout.
 *
 * <p>A failing check prints its exception and the probe goes on to the next one, so one JVM
 * launch reports everything it can; {@link #exitCode()} is non-zero when any check failed.
 */
final class Probe {
    private final Map<String, String> args = new LinkedHashMap<>();
    private int failures;

    Probe(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            String name = argv[i];
            if (!name.startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + name);
            }
            args.put(name.substring(2), argv[++i]);
        }
        if (!args.containsKey("bootstrap")) {
            throw new IllegalArgumentException("--bootstrap host:port,... is required");
        }
    }

    String arg(String name, String fallback) {
        return args.getOrDefault(name, fallback);
    }

    int intArg(String name, int fallback) {
        return Integer.parseInt(arg(name, String.valueOf(fallback)));
    }

    String bootstrap() {
        return args.get("bootstrap");
    }

    /**
     * Bootstrap servers plus timeouts short enough that a missing broker feature fails a check
     * within seconds instead of the clients' one-minute defaults. Nothing protocol-relevant.
     */
    Properties clientConfig() {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap());
        props.put("request.timeout.ms", "15000");
        props.put("default.api.timeout.ms", "20000");
        return props;
    }

    /** The body of a check: puts its findings into {@code out}, throws when the check fails. */
    @FunctionalInterface
    interface Body {
        void run(Map<String, Object> out) throws Exception;
    }

    /**
     * Run one check and print its JSON line: "check", "ok", whatever the body put into its map
     * (also when it failed half way), and "error" on failure. Returns the body's map.
     */
    Map<String, Object> check(String name, Body body) {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("check", name);
        Map<String, Object> error = null;
        try {
            body.run(out);
        } catch (Throwable failure) {
            failures++;
            error = describe(failure);
        }
        line.put("ok", error == null);
        line.putAll(out);
        if (error != null) {
            line.put("error", error);
        }
        emit(line);
        return out;
    }

    /**
     * Extra client properties from {@code --<name> "k=v,k=v"}: for diagnosing by hand only
     * (e.g. {@code --producer-props enable.idempotence=false}); the tests use the defaults.
     */
    Properties withExtra(Properties props, String name) {
        String extra = arg(name, "");
        for (String pair : extra.split(",")) {
            if (!pair.isBlank()) {
                String[] kv = pair.split("=", 2);
                props.put(kv[0].trim(), kv[1].trim());
            }
        }
        return props;
    }

    static void emit(Map<String, Object> line) {
        System.out.println(Json.write(line));
        System.out.flush();
    }

    int exitCode() {
        return failures == 0 ? 0 : 1;
    }

    /** The exception that matters (futures wrap it) as {type, message, cause chain}. */
    static Map<String, Object> describe(Throwable error) {
        Throwable root = unwrap(error);
        Map<String, Object> described = new LinkedHashMap<>();
        described.put("type", root.getClass().getName());
        described.put("message", root.getMessage());
        List<String> causes = new ArrayList<>();
        for (Throwable cause = root.getCause(); cause != null; cause = cause.getCause()) {
            causes.add(cause.getClass().getName() + ": " + cause.getMessage());
        }
        described.put("causes", causes);
        return described;
    }

    static Throwable unwrap(Throwable error) {
        Throwable current = error;
        while ((current instanceof ExecutionException || current instanceof CompletionException)
                && current.getCause() != null) {
            current = current.getCause();
        }
        return current;
    }

    /** A LinkedHashMap from alternating keys and values, for compact result building. */
    static Map<String, Object> map(Object... keysAndValues) {
        Map<String, Object> result = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            result.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        return result;
    }

    /** Minimal JSON writer: maps, collections, strings, numbers, booleans, null; bytes as base64. */
    static final class Json {
        private Json() {}

        static String write(Object value) {
            StringBuilder out = new StringBuilder();
            append(out, value);
            return out.toString();
        }

        private static void append(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof Boolean || value instanceof Integer
                    || value instanceof Long || value instanceof Short) {
                out.append(value);
            } else if (value instanceof byte[] bytes) {
                string(out, Base64.getEncoder().encodeToString(bytes));
            } else if (value instanceof Optional<?> optional) {
                append(out, optional.orElse(null));
            } else if (value instanceof Map<?, ?> map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> entry : map.entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    string(out, String.valueOf(entry.getKey()));
                    out.append(':');
                    append(out, entry.getValue());
                }
                out.append('}');
            } else if (value instanceof Collection<?> items) {
                out.append('[');
                boolean first = true;
                for (Object item : items) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    append(out, item);
                }
                out.append(']');
            } else {
                string(out, value.toString());
            }
        }

        private static void string(StringBuilder out, String text) {
            out.append('"');
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
        }
    }
}
