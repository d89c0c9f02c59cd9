package org.extensiond.runtime;

import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Write extensiond extensions in Java: a thin layer over libExtensionRuntimeC
 * ({@code include/extension_runtime.h}) through JNI, with the semantics of the C interface
 * (docs/assertions.md, docs/extension-model.md) and the surface of the Python package.
 *
 * <pre>{@code
 * public static void main(String[] arguments) throws Exception {
 *     ExtensionRuntime.performExpiringActivity("save state", expired -> { ... });
 *     ExtensionRuntime.run(request -> {
 *         try (request) {
 *             BufferedReader in = new BufferedReader(new InputStreamReader(request.inputStream(), UTF_8));
 *             ...
 *         }
 *     });
 * }
 * }</pre>
 *
 * <p><b>Threads.</b> Every callback (request handler, activity, hint and refresh handlers) runs
 * on a runtime thread of the C library, attached to the JVM as a daemon thread named
 * {@code extension-runtime} and detached when it ends. The JVM ends when its last non-daemon
 * thread does: keep the main thread in {@link #run(RequestHandler)} (or otherwise alive). An
 * exception a callback throws is printed to standard error with its stack trace; the runtime
 * carries on.
 *
 * <p><b>The channel variable.</b> The C runtime reads {@code $EXTENSIOND_CHANNEL_FD} when the
 * library loads (the first use of this class) and removes it from the process's environment.
 * Java copies the environment once, at the first {@code System.getenv} or {@code ProcessBuilder};
 * a copy made before the library loaded keeps the variable, and children started with
 * {@code ProcessBuilder} then inherit it (not the channel, which is close-on-exec: such a child is
 * not supervised). Use this class first, or remove the variable from
 * {@code ProcessBuilder.environment()}.
 *
 * <p><b>Arguments.</b> {@code null} arguments throw NullPointerException. Strings go to the C
 * runtime as UTF-8 (a lone surrogate becomes '?').
 */
public final class ExtensionRuntime {
    /** The largest result {@link Request#complete(byte[])} accepts, in bytes ({@code EXT_REQUEST_MAX_PAYLOAD}). */
    public static final int REQUEST_MAX_PAYLOAD = 60000;
    /** The longest reason of an activity, in bytes of UTF-8 ({@code EXT_ACTIVITY_MAX_REASON}). */
    public static final int ACTIVITY_MAX_REASON = 1024;
    /** The most distinct names one process may observe ({@code EXT_OBSERVE_MAX_NAMES}). */
    public static final int OBSERVE_MAX_NAMES = 256;
    /** The longest URL {@link #openURL(String)} accepts, in bytes of UTF-8 ({@code EXT_URL_MAX}). */
    public static final int URL_MAX = 2048;

    private static final Object startLock = new Object();
    private static boolean started;

    private ExtensionRuntime() {}

    /**
     * @return whether this process was launched by extensiond: it inherited a runtime channel,
     *     an AF_UNIX SOCK_SEQPACKET socket named by {@code $EXTENSIOND_CHANNEL_FD}
     */
    public static boolean isSupervised() {
        return Native.isSupervised() == 1;
    }

    /**
     * Announces readiness to extensiond and starts delivering requests to {@code handler}, once
     * per process; returns at once.
     *
     * @param handler called on a runtime thread of its own for each request a host begins
     * @throws NotSupervisedException when the process was not launched by extensiond
     * @throws IllegalStateException when it was started already (nothing is sent; the first
     *     handler stays)
     */
    public static void start(RequestHandler handler) {
        Objects.requireNonNull(handler, "handler");
        synchronized (startLock) {
            if (started) throw new IllegalStateException("start: the runtime was started already");
            Native.requestHandler = handler;  // before `ready`: a request may follow at once
            int result = Native.start();
            if (result == -Errno.EALREADY) throw new IllegalStateException("start: the runtime was started already");
            if (result != 0) {
                Native.requestHandler = null;
                Errno.check(result, "start");
            }
            started = true;
        }
    }

    /**
     * {@link #start(RequestHandler)}, then waits for ever (the runtime's threads do the work).
     *
     * @param handler as for start
     * @throws InterruptedException when the calling thread is interrupted: the only way it returns
     * @throws NotSupervisedException when the process was not launched by extensiond
     * @throws IllegalStateException when it was started already
     */
    public static void run(RequestHandler handler) throws InterruptedException {
        start(handler);
        Object never = new Object();
        synchronized (never) {
            while (true) never.wait();
        }
    }

    private static byte[] reason(String reason, String what) {
        Objects.requireNonNull(reason, "reason");
        if (reason.isEmpty()) throw new IllegalArgumentException(what + ": the reason must not be empty");
        if (reason.indexOf('\0') >= 0) throw new IllegalArgumentException(what + ": the reason must not contain NUL");
        byte[] encoded = Native.utf8(reason);
        if (encoded.length > ACTIVITY_MAX_REASON)
            throw new IllegalArgumentException(
                    what + ": the reason is " + encoded.length + " bytes, over the limit of " + ACTIVITY_MAX_REASON);
        return encoded;
    }

    /**
     * Takes a task assertion held by extensiond, like Apple's
     * {@code ProcessInfo.performExpiringActivity(withReason:using:)}: {@code block.run(false)}
     * runs on a runtime thread and the assertion is held until it returns; when the assertion is
     * about to expire, {@code block.run(true)} is called a second time, concurrently, on another
     * thread; when none is granted (or without extensiond), {@code block.run(true)} only, at once.
     * See {@link ExpiringActivity#run(boolean)}. Returns at once.
     *
     * @param reason shown by {@code extctl status}: not empty, no NUL, at most
     *     {@link #ACTIVITY_MAX_REASON} bytes of UTF-8
     * @param block the work
     * @throws IllegalArgumentException for a reason breaking those rules (block is not called)
     */
    public static void performExpiringActivity(String reason, ExpiringActivity block) {
        byte[] encoded = reason(reason, "performExpiringActivity");
        Objects.requireNonNull(block, "block");
        int result = Native.performExpiringActivity(encoded, block);
        if (result == -Errno.EINVAL || result == -Errno.EMSGSIZE)
            throw new IllegalArgumentException("performExpiringActivity: the reason was refused (" + Errno.name(-result) + ")");
        Errno.check(result, "performExpiringActivity");
    }

    /**
     * Handles background refreshes (docs/extension-model.md): {@code handler.refresh(id)} runs on
     * a runtime thread when extensiond refreshes the extension; answer with
     * {@link #refreshComplete(long, RefreshResult)} within the policy's {@code refreshSeconds}.
     * Call it before {@link #start(RequestHandler)}; a later call replaces the handler.
     *
     * @param handler the handler
     * @throws NotSupervisedException without extensiond
     */
    public static void onRefresh(RefreshHandler handler) {
        Objects.requireNonNull(handler, "handler");
        RefreshHandler previous = Native.refreshHandler;
        Native.refreshHandler = handler;  // before the C runtime may call it
        int result = Native.registerRefresh();
        if (result != 0) {
            Native.refreshHandler = previous;
            Errno.check(result, "onRefresh");
        }
    }

    /**
     * Answers refresh {@code refreshId}.
     *
     * @param refreshId the id the refresh handler was given
     * @param result the answer
     * @throws NotSupervisedException without extensiond
     */
    public static void refreshComplete(long refreshId, RefreshResult result) {
        Objects.requireNonNull(result, "result");
        Errno.check(Native.refreshComplete(refreshId, result.code()), "refreshComplete");
    }

    /**
     * Observes the notification hint {@code name}: {@code handler.hint(name)} runs on a runtime
     * thread for each post made while the process runs, and once for all the posts made while it
     * was suspended, when it is resumed. A name may have several handlers, called in the order
     * they were added. The handler is kept for the life of the process.
     *
     * @param name letters, digits, '.', '-', '_', at most 255 bytes, not starting or ending with
     *     '.', no ".."
     * @param handler the handler
     * @throws IllegalArgumentException for a malformed name
     * @throws NotSupervisedException without extensiond
     * @throws ExtensionRuntimeException with errno ENOSPC for a new name when
     *     {@link #OBSERVE_MAX_NAMES} names are observed already
     */
    public static void observe(String name, HintHandler handler) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(handler, "handler");
        String problem = "bad hint name '" + name + "': letters, digits, '.', '-', '_', at most 255 bytes, "
                + "not starting or ending with '.', no '..'";
        if (name.indexOf('\0') >= 0) throw new IllegalArgumentException(problem);
        int result = Native.observe(Native.utf8(name), handler);
        if (result == -Errno.EINVAL) throw new IllegalArgumentException(problem);
        if (result == -Errno.ENOSPC)
            throw new ExtensionRuntimeException(
                    Errno.ENOSPC, "observe: already observing " + OBSERVE_MAX_NAMES + " names, the most one process may");
        Errno.check(result, "observe");
    }

    /**
     * @return the extension's own container ({@code $EXTENSIOND_CONTAINER}): a directory only it
     *     can read and write, kept across relaunches until {@code extctl reset}, and its HOME;
     *     empty when the variable is unset or empty (not started by extensiond)
     */
    public static Optional<Path> containerPath() {
        byte[] path = Native.containerPath();
        return path == null ? Optional.empty() : Optional.of(Path.of(Native.text(path)));
    }

    /**
     * @param group an app group the manifest names
     * @return the directory of the shared container {@code group}, as extensiond passes it in
     *     {@code $EXTENSION_SHARED_CONTAINER_<NAME>} (NAME: the group upper-cased, every byte other
     *     than an ASCII letter or digit as '_'); empty when that variable is unset or empty
     * @throws IllegalArgumentException when {@code group} holds a NUL character
     */
    public static Optional<Path> sharedContainerPath(String group) {
        Objects.requireNonNull(group, "group");
        if (group.indexOf('\0') >= 0) throw new IllegalArgumentException("sharedContainerPath: the group must not contain NUL");
        byte[] path = Native.sharedContainerPath(Native.utf8(group));
        return path == null ? Optional.empty() : Optional.of(Path.of(Native.text(path)));
    }

    /**
     * Asks the system to open {@code url} for the extension (Apple's
     * {@code NSExtensionContext.open}): the app that declares its scheme, else the session's
     * handler for it. Blocks until extensiond answers.
     *
     * @param url not empty, no control character (below U+0020, or U+007F), no lone surrogate, at
     *     most {@link #URL_MAX} bytes of UTF-8
     * @return true when extensiond handed it over; false when it did not (no app or handler takes
     *     the scheme, the host's session is locked, the extension point does not allow it, the
     *     extension has no open request, or it is over the rate limit: the reason is in
     *     extensiond's journal) or when the channel to extensiond closed first
     * @throws IllegalArgumentException for a URL breaking those rules
     * @throws NotSupervisedException without extensiond
     */
    public static boolean openURL(String url) {
        Objects.requireNonNull(url, "url");
        if (url.isEmpty() || url.chars().anyMatch(c -> c < 0x20 || c == 0x7f))
            throw new IllegalArgumentException("openURL: '" + url + "' is not a URL to open: empty, or holding a control character");
        byte[] encoded;
        try {
            var buffer = StandardCharsets.UTF_8.newEncoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).encode(CharBuffer.wrap(url));
            encoded = new byte[buffer.remaining()];
            buffer.get(encoded);
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException("openURL: '" + url + "' cannot be UTF-8 (it holds a lone surrogate)");
        }
        if (encoded.length > URL_MAX)
            throw new IllegalArgumentException("openURL: the URL is " + encoded.length + " bytes, over the limit of " + URL_MAX);
        CompletableFuture<Boolean> outcome = new CompletableFuture<>();
        int result = Native.openURL(encoded, outcome);
        if (result == -Errno.EINVAL || result == -Errno.EMSGSIZE)
            throw new IllegalArgumentException("openURL: '" + url + "' was refused as malformed");
        Errno.check(result, "openURL");
        return outcome.join();
    }
}
