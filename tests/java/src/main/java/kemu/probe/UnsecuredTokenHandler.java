package kemu.probe;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;

/**
 * An OAUTHBEARER login callback handler making the same unsecured JWS as Kafka's
 * OAuthBearerUnsecuredLoginCallbackHandler ({"alg":"none"}, sub, iat, exp; empty signature)
 * without the Jackson dependency that handler needs at run time. The subject is the JAAS
 * option {@code unsecuredLoginStringClaim_sub}; the token lives one hour.
 */
public final class UnsecuredTokenHandler implements AuthenticateCallbackHandler {
    private String subject = "unknown";

    @Override
    public void configure(Map<String, ?> configs, String saslMechanism,
            List<AppConfigurationEntry> jaasConfigEntries) {
        for (AppConfigurationEntry entry : jaasConfigEntries) {
            Object sub = entry.getOptions().get("unsecuredLoginStringClaim_sub");
            if (sub != null) {
                subject = sub.toString();
            }
        }
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (!(callback instanceof OAuthBearerTokenCallback tokenCallback)) {
                throw new UnsupportedCallbackException(callback);
            }
            long now = System.currentTimeMillis();
            long expiry = now + 3_600_000;
            Base64.Encoder encoder = Base64.getUrlEncoder().withoutPadding();
            String header = encoder.encodeToString("{\"alg\":\"none\"}".getBytes(StandardCharsets.UTF_8));
            String claims = encoder.encodeToString(String.format(
                    "{\"sub\":\"%s\",\"iat\":%d,\"exp\":%d}", subject, now / 1000, expiry / 1000)
                    .getBytes(StandardCharsets.UTF_8));
            String value = header + "." + claims + ".";
            String principal = subject;
            tokenCallback.token(new OAuthBearerToken() {
                @Override
                public String value() {
                    return value;
                }

                @Override
                public Set<String> scope() {
                    return Set.of();
                }

                @Override
                public long lifetimeMs() {
                    return expiry;
                }

                @Override
                public String principalName() {
                    return principal;
                }

                @Override
                public Long startTimeMs() {
                    return now;
                }
            });
        }
    }

    @Override
    public void close() {}
}
