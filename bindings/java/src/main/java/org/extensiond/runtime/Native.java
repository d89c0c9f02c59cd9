package org.extensiond.runtime;

import java.io.File;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.CodeSource;
import java.util.concurrent.CompletableFuture;

/**
 * The native methods (libextension_runtime_jni.so, bindings/java/src/main/c) and the callbacks
 * the C runtime's threads make into Java. Package-private: ExtensionRuntime and Request check
 * the arguments. Strings cross as UTF-8 byte arrays.
 *
 * <p>The library is loaded with the class, from the first of:
 * <ol>
 * <li>the path in the system property {@value #LIBRARY_PROPERTY}, when it is set;</li>
 * <li>{@value #LIBRARY_FILE} in the directory of the jar (or class directory) this class was
 * loaded from (the build tree: {@code scripts/build-java-runtime.sh} puts both in one
 * directory);</li>
 * <li>{@code System.loadLibrary("extension_runtime_jni")}: the directories of
 * {@code java.library.path}, which on Debian include {@code /usr/lib/x86_64-linux-gnu/jni}.</li>
 * </ol>
 * libextension_runtime_jni.so finds libExtensionRuntimeC.so.0 through its RUNPATH
 * ({@code $ORIGIN}: the same directory) or the system's library path.
 */
final class Native {
    static final String LIBRARY_PROPERTY = "org.extensiond.runtime.jni";
    static final String LIBRARY_FILE = "libextension_runtime_jni.so";

    static volatile RequestHandler requestHandler;
    static volatile RefreshHandler refreshHandler;

    static {
        load();
    }

    private Native() {}

    private static void load() {
        String explicit = System.getProperty(LIBRARY_PROPERTY);
        if (explicit != null && !explicit.isEmpty()) {
            System.load(new File(explicit).getAbsolutePath());
            return;
        }
        Path beside = besideThisCode();
        if (beside != null && Files.isRegularFile(beside)) {
            System.load(beside.toString());
            return;
        }
        try {
            System.loadLibrary("extension_runtime_jni");
        } catch (UnsatisfiedLinkError e) {
            UnsatisfiedLinkError error = new UnsatisfiedLinkError(
                    "org.extensiond.runtime: cannot load " + LIBRARY_FILE + " (set -D" + LIBRARY_PROPERTY + "=PATH, put it beside "
                            + "extension-runtime.jar, or in a directory of java.library.path: "
                            + System.getProperty("java.library.path") + "): " + e.getMessage());
            error.initCause(e);
            throw error;
        }
    }

    /** LIBRARY_FILE in the directory of the jar this class came from (or in its class directory). */
    private static Path besideThisCode() {
        try {
            CodeSource source = Native.class.getProtectionDomain().getCodeSource();
            URL location = source == null ? null : source.getLocation();
            if (location == null || !"file".equals(location.getProtocol())) return null;
            Path path = Path.of(location.toURI());
            Path directory = Files.isDirectory(path) ? path : path.getParent();
            return directory == null ? null : directory.resolve(LIBRARY_FILE);
        } catch (Exception | Error e) {
            return null;
        }
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static void report(String what, Throwable thrown) {
        try {
            System.err.println("org.extensiond.runtime: " + what + " threw " + thrown);
            thrown.printStackTrace();
        } catch (Throwable ignored) {
            // nothing more can be done; the runtime thread carries on
        }
    }

    // --- native methods: negative results are -errno ---------------------------------------

    static native int isSupervised();

    static native int start();

    static native int performExpiringActivity(byte[] reason, ExpiringActivity block);

    static native int registerRefresh();

    static native int refreshComplete(long refreshId, int result);

    static native int observe(byte[] name, HintHandler handler);

    static native int complete(long requestId, byte[] payload);

    static native int cancel(long requestId, byte[] reason);

    static native byte[] containerPath();

    static native byte[] sharedContainerPath(byte[] group);

    static native int openURL(byte[] url, CompletableFuture<Boolean> outcome);

    /** @return the count read, or -1 at the end of the stream */
    static native int read(int fd, byte[] bytes, int offset, int length) throws java.io.IOException;

    static native void write(int fd, byte[] bytes, int offset, int length) throws java.io.IOException;

    static native void shutdown(int fd);

    static native void close(int fd);

    // --- called by the C runtime's threads (attached as daemon threads) ----------------------

    static void onRequest(long requestId, int fd) {
        Request request = new Request(requestId, fd);
        RequestHandler handler = requestHandler;
        if (handler == null) {
            request.close();
            return;
        }
        try {
            handler.handle(request);
        } catch (Throwable thrown) {
            report("the handler of request " + Long.toUnsignedString(requestId), thrown);
            request.close();
        }
    }

    static void onActivity(Object block, boolean expired) {
        try {
            ((ExpiringActivity) block).run(expired);
        } catch (Throwable thrown) {
            report("an expiring activity (" + (expired ? "expired" : "granted") + " call)", thrown);
        }
    }

    static void onRefresh(long refreshId) {
        RefreshHandler handler = refreshHandler;
        if (handler == null) return;
        try {
            handler.refresh(refreshId);
        } catch (Throwable thrown) {
            report("the refresh handler", thrown);
        }
    }

    static void onHint(Object handler, byte[] name) {
        String posted = text(name);
        try {
            ((HintHandler) handler).hint(posted);
        } catch (Throwable thrown) {
            report("the handler of hint " + posted, thrown);
        }
    }

    @SuppressWarnings("unchecked")
    static void onOpened(Object outcome, boolean opened) {
        ((CompletableFuture<Boolean>) outcome).complete(opened);
    }
}
