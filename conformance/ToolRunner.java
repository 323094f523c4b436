import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka tools' main classes one after the other in this one JVM, so that a check costs a
 * method call rather than a JVM start (conformance/kafka_tools.py drives it).
 *
 * Reads one request per line on stdin: the path of a file whose first line is the main class and
 * whose other lines are the arguments; the tool's stdin is PATH.in, its stdout and stderr go to
 * PATH.out. Answers "exit N" on stdout when the tool returned (0) or called Exit.exit(N).
 *
 * Exit.exit throws, since the JVM must live on; a tool that catches what Exit.exit throws (some
 * call it inside a try) would go on printing, so its output is cut where it first called Exit,
 * and that first status is the one reported, as a real exit would have it.
 */
public final class ToolRunner {
    private static final class ToolExit extends RuntimeException {
        final int status;

        ToolExit(int status) {
            super(null, null, false, false);
            this.status = status;
        }
    }

    private static final PrintStream DISCARD = new PrintStream(OutputStream.nullOutputStream());
    private static ByteArrayOutputStream captured;
    private static int exitStatus = -1;
    private static int cutAt = -1;

    private static void exit(int status) {
        synchronized (ToolRunner.class) {
            if (cutAt < 0) {
                System.out.flush();
                exitStatus = status;
                cutAt = captured.size();
            }
        }
        throw new ToolExit(status);
    }

    public static void main(String[] ignored) throws Exception {
        PrintStream answers = System.out;
        InputStream originalIn = System.in;
        Exit.setExitProcedure((status, message) -> exit(status));
        Exit.setHaltProcedure((status, message) -> exit(status));
        Exit.setShutdownHookAdder((name, runnable) -> { });
        BufferedReader requests =
            new BufferedReader(new InputStreamReader(originalIn, StandardCharsets.UTF_8));
        String path;
        while ((path = requests.readLine()) != null) {
            List<String> lines = Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8);
            String mainClass = lines.get(0);
            String[] args = lines.subList(1, lines.size()).toArray(new String[0]);
            int status = 0;
            synchronized (ToolRunner.class) {
                captured = new ByteArrayOutputStream();
                exitStatus = -1;
                cutAt = -1;
            }
            PrintStream out = new PrintStream(captured, true, StandardCharsets.UTF_8);
            try (InputStream in = new FileInputStream(path + ".in")) {
                System.setOut(out);
                System.setErr(out);
                System.setIn(in);
                try {
                    Method main = Class.forName(mainClass).getMethod("main", String[].class);
                    main.invoke(null, (Object) args);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (!(cause instanceof ToolExit)) {
                        cause.printStackTrace(out);
                        status = 1;
                    }
                } finally {
                    out.flush();
                    System.setOut(DISCARD);  // a tool's threads may print on: not to answers
                    System.setErr(DISCARD);
                    System.setIn(originalIn);
                }
            }
            byte[] bytes;
            synchronized (ToolRunner.class) {
                bytes = captured.toByteArray();
                if (cutAt >= 0) {
                    status = exitStatus;
                    bytes = java.util.Arrays.copyOf(bytes, cutAt);
                }
            }
            try (FileOutputStream file = new FileOutputStream(path + ".out")) {
                file.write(bytes);
            }
            answers.println("exit " + status);
            answers.flush();
        }
    }
}
