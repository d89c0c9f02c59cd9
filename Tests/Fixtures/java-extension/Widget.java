// Widget: a Java extension on the Java runtime (bindings/java, org.extensiond.runtime), for
// Tests/IntegrationTests/JavaRuntimeTests.swift; no bridge process: the JVM is the extension.
// Each request channel takes line commands, as examples/python-extension's do:
//   ping           "pong PID" (PID as the process sees itself: in the sandbox's pid namespace)
//   hold           takes a task assertion with ExtensionRuntime.performExpiringActivity: "holding"
//                  from the granted call, which then keeps it until the expired call (a second,
//                  concurrent call) comes; then "expired" and the granted call returns, releasing
//                  it. "denied" at once when none was granted.
//   complete TEXT  Request.complete with TEXT as UTF-8: the host gets it as the result
// Build: javac -cp extension-runtime.jar Widget.java (scripts/build-java-runtime.sh makes the jar).
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.extensiond.runtime.ExtensionRuntime;
import org.extensiond.runtime.NotSupervisedException;
import org.extensiond.runtime.Request;

public class Widget {
    static void answer(OutputStream out, String line) {
        try {
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            // the host went away: nobody to answer
        }
    }

    /** Holds an assertion until it is about to expire, reporting each step on `out`. */
    static void hold(OutputStream out) {
        CountDownLatch expiring = new CountDownLatch(1);
        AtomicBoolean granted = new AtomicBoolean();
        ExtensionRuntime.performExpiringActivity("java hold", expired -> {
            if (expired) {
                if (!granted.get()) answer(out, "denied");
                expiring.countDown();  // the granted call, still running, lets go
                return;
            }
            granted.set(true);
            answer(out, "holding");
            expiring.await();
            answer(out, "expired");
        });
    }

    static void serve(Request request) throws IOException {
        try (request) {
            OutputStream out = request.outputStream();
            BufferedReader lines = new BufferedReader(new InputStreamReader(request.inputStream(), StandardCharsets.UTF_8));
            for (String line; (line = lines.readLine()) != null; ) {
                String command = line.strip();
                if (command.equals("ping")) {
                    answer(out, "pong " + ProcessHandle.current().pid());
                } else if (command.equals("hold")) {
                    hold(out);
                } else if (command.startsWith("complete ")) {
                    request.complete(command.substring(9).getBytes(StandardCharsets.UTF_8));
                } else {
                    answer(out, "unknown command: " + command);
                }
            }
        }
    }

    public static void main(String[] arguments) throws Exception {
        try {
            ExtensionRuntime.run(Widget::serve);
        } catch (NotSupervisedException e) {
            System.err.println("java-extension: not launched by extensiond");
            System.exit(1);
        }
    }
}
