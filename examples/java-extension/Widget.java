// java-extension: an extension written in Java on the Java runtime (bindings/java,
// org.extensiond.runtime; docs/java.md). The JVM is the extension: no bridge process.
//
// Each request channel takes line commands:
//   ping         -> "pong <pid>"
//   save <text>  -> saves <text> to state.txt in the extension's container under a task
//                   assertion, atomically (temporary file, fsync, rename; abandoned when
//                   expired): "saved" or "not saved"
//   hold         -> takes an assertion: "holding", then keeps it until it is about to expire,
//                   answers "expired" and lets it go; "denied" at once when none was granted
// A background refresh (manifest "refresh", or `extctl refresh ID`) answers new-data when
// state.txt changed since the last one, no-data otherwise.
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.extensiond.runtime.ExtensionRuntime;
import org.extensiond.runtime.NotSupervisedException;
import org.extensiond.runtime.RefreshResult;
import org.extensiond.runtime.Request;

public class Widget {
    static final Path STATE = ExtensionRuntime.containerPath().orElse(Path.of("/tmp")).resolve("state.txt");
    static volatile long lastRefreshed;

    static void answer(OutputStream out, String line) {
        try {
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            // the host closed the channel: nobody to answer
        }
    }

    /** Runs the write under an assertion; returns whether it completed. */
    static boolean save(String text) throws InterruptedException {
        AtomicBoolean expired = new AtomicBoolean();
        AtomicBoolean saved = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(1);
        ExtensionRuntime.performExpiringActivity("java save", isExpired -> {
            if (isExpired) {
                expired.set(true);  // ask the writer to stop; return at once
                done.countDown();   // (denied: the only call)
                return;
            }
            try {
                Path temporary = STATE.resolveSibling("state.txt.tmp");
                try (FileChannel file = FileChannel.open(temporary, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                        StandardOpenOption.TRUNCATE_EXISTING)) {
                    file.write(StandardCharsets.UTF_8.encode(text + "\n"));
                    file.force(true);
                }
                if (!expired.get()) {
                    Files.move(temporary, STATE, StandardCopyOption.ATOMIC_MOVE);
                    saved.set(true);
                }
            } finally {
                done.countDown();
            }
        });
        done.await();
        return saved.get();
    }

    /** Holds an assertion until it is about to expire. */
    static void hold(OutputStream out) {
        CountDownLatch expiring = new CountDownLatch(1);
        AtomicBoolean granted = new AtomicBoolean();
        ExtensionRuntime.performExpiringActivity("java hold", expired -> {
            if (expired) {
                if (!granted.get()) answer(out, "denied");
                expiring.countDown();
                return;
            }
            granted.set(true);
            answer(out, "holding");
            expiring.await();  // the expired call comes on another thread
            answer(out, "expired");
        });
    }

    static void serve(Request request) throws Exception {
        try (request) {
            OutputStream out = request.outputStream();
            BufferedReader lines = new BufferedReader(new InputStreamReader(request.inputStream(), StandardCharsets.UTF_8));
            for (String line; (line = lines.readLine()) != null; ) {
                String command = line.strip();
                if (command.equals("ping")) answer(out, "pong " + ProcessHandle.current().pid());
                else if (command.startsWith("save ")) answer(out, save(command.substring(5)) ? "saved" : "not saved");
                else if (command.equals("hold")) hold(out);
                else answer(out, "unknown command: " + command);
            }
        }
    }

    public static void main(String[] arguments) throws Exception {
        try {
            ExtensionRuntime.onRefresh(id -> {
                long modified = Files.exists(STATE) ? Files.getLastModifiedTime(STATE).toMillis() : 0;
                ExtensionRuntime.refreshComplete(id, modified != lastRefreshed ? RefreshResult.NEW_DATA : RefreshResult.NO_DATA);
                lastRefreshed = modified;
            });
            ExtensionRuntime.run(Widget::serve);
        } catch (NotSupervisedException e) {
            System.err.println("java-extension: not launched by extensiond");
            System.exit(1);
        }
    }
}
