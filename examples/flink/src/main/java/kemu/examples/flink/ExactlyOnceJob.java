package kemu.examples.flink;

import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.TransactionNamingStrategy;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * KafkaSource (a consumer group) -> map -> KafkaSink (exactly once, transactional) in a local
 * MiniCluster, against the brokers given on the command line (kemu in examples/flink/run.py).
 *
 * <p>The map throws once, after a checkpoint has completed: Flink restarts the job from that
 * checkpoint (fixed-delay restart strategy), the sink aborts the transactions the failed attempt
 * left open, and the records after the checkpoint are read and written again. The bounded source
 * stops at the offsets that were latest when the job started, so the job ends by itself.
 *
 * <p>Arguments, as {@code key=value}: bootstrap, input, output, group, prefix (the
 * transactional id prefix), naming (INCREMENTING or POOLING), parallelism, checkpoint-ms,
 * throttle-us (a pause per record before the failure, so that checkpoints complete first),
 * fail-after (records a subtask maps after its second completed checkpoint before it fails),
 * restart-attempts (of the fixed-delay restart strategy). Prints {@code FLINK-CHECKPOINT n} at
 * each checkpoint notification (n counts those of every subtask).
 * "restarts" counts restarted map subtasks (Flink's default region failover restarts only the
 * failed pipeline: source, map and sink of one subtask, chained).
 * At the end it prints one line {@code FLINK-JOB {json}}.
 */
public final class ExactlyOnceJob {
  /** Static: the MiniCluster runs in this JVM, and the counters must outlive a restart. */
  static final AtomicInteger INJECTED_FAILURES = new AtomicInteger();
  static final AtomicInteger MAP_OPENS = new AtomicInteger();
  static final AtomicLong CHECKPOINTS_COMPLETED = new AtomicLong();
  static final AtomicLong RECORDS_MAPPED = new AtomicLong();

  private ExactlyOnceJob() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> options = Args.parse(args);
    String bootstrap = Args.required(options, "bootstrap");
    String input = options.getOrDefault("input", "flink-input");
    String output = options.getOrDefault("output", "flink-output");
    String group = options.getOrDefault("group", "flink-example");
    String prefix = options.getOrDefault("prefix", "kemu-flink");
    TransactionNamingStrategy naming =
        TransactionNamingStrategy.valueOf(
            options.getOrDefault("naming", "INCREMENTING").toUpperCase(Locale.ROOT));
    int parallelism = Integer.parseInt(options.getOrDefault("parallelism", "2"));
    long checkpointMs = Long.parseLong(options.getOrDefault("checkpoint-ms", "1000"));
    long throttleMicros = Long.parseLong(options.getOrDefault("throttle-us", "500"));
    long failAfter = Long.parseLong(options.getOrDefault("fail-after", "50"));
    int restartAttempts = Integer.parseInt(options.getOrDefault("restart-attempts", "3"));

    Configuration config = new Configuration();
    config.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
    config.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, restartAttempts);
    config.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofSeconds(1));
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
    env.setParallelism(parallelism);
    env.enableCheckpointing(checkpointMs, CheckpointingMode.EXACTLY_ONCE);

    KafkaSource<String> source =
        KafkaSource.<String>builder()
            .setBootstrapServers(bootstrap)
            .setTopics(input)
            .setGroupId(group)
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setBounded(OffsetsInitializer.latest())
            .setValueOnlyDeserializer(new SimpleStringSchema())
            // read_committed is the connector's default; said here because it matters for EOS.
            .setProperty("isolation.level", "read_committed")
            .build();

    KafkaSink<String> sink =
        KafkaSink.<String>builder()
            .setBootstrapServers(bootstrap)
            .setRecordSerializer(
                KafkaRecordSerializationSchema.builder()
                    .setTopic(output)
                    .setValueSerializationSchema(new SimpleStringSchema())
                    .build())
            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .setTransactionalIdPrefix(prefix)
            .setTransactionNamingStrategy(naming)
            // Longer than a checkpoint interval plus a restart; within the broker's maximum.
            .setProperty("transaction.timeout.ms", "120000")
            .build();

    env.fromSource(source, WatermarkStrategy.noWatermarks(), "kemu-source")
        .map(new FailOnceAfterCheckpoint(throttleMicros, failAfter))
        .name("upper-case, fails once")
        .sinkTo(sink)
        .name("kemu-sink");

    long started = System.nanoTime();
    env.execute("kemu exactly-once example");
    double seconds = (System.nanoTime() - started) / 1e9;
    System.out.printf(
        Locale.ROOT,
        "FLINK-JOB {\"seconds\": %.2f, \"injected_failures\": %d, \"restarts\": %d,"
            + " \"checkpoints_completed\": %d, \"records_mapped\": %d, \"naming\": \"%s\"}%n",
        seconds,
        INJECTED_FAILURES.get(),
        MAP_OPENS.get() - parallelism,
        CHECKPOINTS_COMPLETED.get(),
        RECORDS_MAPPED.get(),
        naming);
  }

  /**
   * Upper-cases each value. Once in the whole job (the first subtask to get there), after this
   * subtask has seen two checkpoints complete and then mapped {@code failAfter} more records,
   * it throws: those records are in a transaction that the restart must abort.
   */
  static final class FailOnceAfterCheckpoint extends RichMapFunction<String, String>
      implements CheckpointListener {
    private final long throttleMicros;
    private final long failAfter;
    private transient long checkpointsSeen;
    private transient long mappedSinceCheckpoint;

    FailOnceAfterCheckpoint(long throttleMicros, long failAfter) {
      this.throttleMicros = throttleMicros;
      this.failAfter = failAfter;
    }

    @Override
    public void open(OpenContext context) {
      MAP_OPENS.incrementAndGet();
    }

    @Override
    public String map(String value) throws Exception {
      if (INJECTED_FAILURES.get() == 0) {
        if (checkpointsSeen >= 2
            && mappedSinceCheckpoint >= failAfter
            && INJECTED_FAILURES.compareAndSet(0, 1)) {
          throw new IllegalStateException("injected failure after a completed checkpoint");
        }
        // Slow until the failure, so that checkpoints complete while input is left.
        Thread.sleep(throttleMicros / 1000, (int) (throttleMicros % 1000) * 1000);
      }
      RECORDS_MAPPED.incrementAndGet();
      mappedSinceCheckpoint++;
      return value.toUpperCase(Locale.ROOT);
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) {
      // The runner may act on it (examples/flink/run.py --kill-kemu-at-checkpoint).
      System.out.println("FLINK-CHECKPOINT " + CHECKPOINTS_COMPLETED.incrementAndGet());
      checkpointsSeen++;
      mappedSinceCheckpoint = 0;
    }
  }
}
