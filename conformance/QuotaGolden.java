import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Quota;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaManager;
import org.apache.kafka.server.quota.ClientRequestQuotaManager;
import org.apache.kafka.server.quota.ControllerMutationQuota;
import org.apache.kafka.server.quota.ControllerMutationQuotaManager;
import org.apache.kafka.server.quota.QuotaType;

/**
 * Replays a quota scenario (one operation a line on stdin) on Kafka 4.4's own ClientQuotaManager
 * and ClientRequestQuotaManager (and ControllerMutationQuotaManager) and prints one line per
 * answer, for kemu's golden test (conformance/quota_golden.py). Lines:
 *   config SAMPLES WINDOW_SECONDS          (first)
 *   set KIND USER CLIENT VALUE             KIND produce|fetch|request|mutation; "-" absent, "*" default
 *   remove KIND USER CLIENT
 *   record KIND USER CLIENT VALUE TIME_MS  prints the throttle time ("~": no client id)
 *   unrecord KIND USER CLIENT VALUE TIME_MS
 *   max KIND USER CLIENT                   prints maxValueInQuotaWindow (or "none")
 *   mutate strict|permissive USER CLIENT TIME_MS ANSWER_MS PERMITS...
 *                                          one request's controller mutation quota: each topic's
 *                                          permits recorded at TIME_MS; prints "a" (accepted) or
 *                                          "r" (THROTTLING_QUOTA_EXCEEDED) per topic, joined by
 *                                          ",", then "|" and throttleTime() at ANSWER_MS
 */
public final class QuotaGolden {
    private static long nowMs = 0;

    private static final Time TIME = new Time() {
        @Override public long milliseconds() { return nowMs; }
        @Override public long nanoseconds() { return nowMs * 1_000_000L; }
        @Override public void sleep(long ms) { nowMs += ms; }
        @Override public void waitObject(Object o, Supplier<Boolean> c, long d) { }
    };

    private static Optional<ClientQuotaEntity.ConfigEntity> user(String name) {
        if (name.equals("-")) return Optional.empty();
        if (name.equals("*")) return Optional.of(ClientQuotaManager.DEFAULT_USER_ENTITY);
        return Optional.of(new ClientQuotaManager.UserEntity(name));
    }

    private static Optional<ClientQuotaEntity.ConfigEntity> client(String name) {
        if (name.equals("-")) return Optional.empty();
        if (name.equals("*")) return Optional.of(ClientQuotaManager.DEFAULT_USER_CLIENT_ID);
        return Optional.of(new ClientQuotaManager.ClientIdEntity(name));
    }

    private static String clientId(String token) {
        return token.equals("~") ? "" : token;  // a client without a client id
    }

    private static Session session(String user) throws Exception {
        return new Session(new KafkaPrincipal(KafkaPrincipal.USER_TYPE, user), InetAddress.getLoopbackAddress());
    }

    private static String mutate(ControllerMutationQuotaManager manager, String[] f) throws Exception {
        nowMs = Long.parseLong(f[4]);
        ControllerMutationQuota quota = f[1].equals("strict")
            ? manager.newStrictQuotaFor(session(f[2]), clientId(f[3]))
            : manager.newPermissiveQuotaFor(session(f[2]), clientId(f[3]));
        StringBuilder answer = new StringBuilder();
        for (int i = 6; i < f.length; i++) {
            if (i > 6) answer.append(',');
            try {
                quota.record(Double.parseDouble(f[i]));
                answer.append('a');
            } catch (ThrottlingQuotaExceededException e) {
                answer.append('r');
            }
        }
        nowMs = Long.parseLong(f[5]);
        return answer.append('|').append(quota.throttleTime()).toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Map<String, ClientQuotaManager> managers = new HashMap<>();
        Metrics metrics = new Metrics(new MetricConfig(), java.util.List.of(), TIME);
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            String[] f = line.split(" ");
            if (f[0].equals("config")) {
                ClientQuotaManagerConfig config =
                    new ClientQuotaManagerConfig(Integer.parseInt(f[1]), Integer.parseInt(f[2]));
                managers.put("produce", new ClientQuotaManager(config, metrics, QuotaType.PRODUCE, TIME, "golden"));
                managers.put("fetch", new ClientQuotaManager(config, metrics, QuotaType.FETCH, TIME, "golden"));
                managers.put("request", new ClientRequestQuotaManager(config, metrics, TIME, "golden", Optional.empty()));
                managers.put("mutation", new ControllerMutationQuotaManager(config, metrics, TIME, "golden", Optional.empty()));
                continue;
            }
            if (f[0].equals("mutate")) {
                System.out.println(mutate((ControllerMutationQuotaManager) managers.get("mutation"), f));
                continue;
            }
            ClientQuotaManager manager = managers.get(f[1]);
            switch (f[0]) {
                case "set" -> manager.updateQuota(user(f[2]), client(f[3]),
                    Optional.of(Quota.upperBound(Double.parseDouble(f[4]))));
                case "remove" -> manager.updateQuota(user(f[2]), client(f[3]), Optional.empty());
                case "record" -> {
                    nowMs = Long.parseLong(f[5]);
                    int throttle = manager.maybeRecordAndGetThrottleTimeMs(
                        session(f[2]), clientId(f[3]), Double.parseDouble(f[4]), nowMs);
                    System.out.println(throttle);
                }
                case "unrecord" -> {
                    nowMs = Long.parseLong(f[5]);
                    manager.unrecordQuotaSensor(session(f[2]), clientId(f[3]), Double.parseDouble(f[4]), nowMs);
                }
                case "max" -> {
                    double max = manager.maxValueInQuotaWindow(session(f[2]), clientId(f[3]));
                    System.out.println(max == Double.MAX_VALUE ? "none" : Double.toString(max));
                }
                default -> throw new IllegalArgumentException(line);
            }
        }
        for (ClientQuotaManager manager : managers.values()) manager.shutdown();
        System.out.flush();
        System.exit(0);
    }
}
