package org.extensiond.runtime;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.ref.Cleaner;
import java.util.Objects;

/**
 * A request a host began: its id and the extension's end of the channel to the host, a connected
 * stream socket.
 *
 * <p>Java cannot wrap a raw descriptor in a socket, so the channel is read and written through
 * {@link #inputStream()} and {@link #outputStream()}, which call read(2) and send(2) on the
 * descriptor (through JNI). They are blocking streams: a read waits for the host's bytes and
 * returns -1 once the host closed its end; a write after the host closed its end throws
 * {@code IOException} ("Broken pipe"), never SIGPIPE. Writes are whole: one {@code write} call
 * is sent in full before another thread's starts. Reads and writes may go on in different
 * threads at once.
 *
 * <p>The handler owns the channel: close it with {@link #close()} (or try-with-resources; closing
 * either stream closes it too). A read or write blocked in another thread then ends: the read
 * with -1, the write with an IOException. Closing again does nothing. A request that becomes
 * unreachable without being closed has its channel closed by a {@link Cleaner}.
 */
public final class Request implements Closeable {
    private static final class Holder {
        static final Cleaner CLEANER = Cleaner.create();
    }

    /** The descriptor, closed once no read or write is using it (it is never reused meanwhile). */
    private static final class Channel implements Runnable {
        private final int fd;
        private int users;
        private boolean closed, released;

        Channel(int fd) {
            this.fd = fd;
        }

        synchronized int acquire() throws IOException {
            if (closed) throw new IOException("the request channel is closed");
            users++;
            return fd;
        }

        void release() {
            boolean now;
            synchronized (this) {
                users--;
                now = closed && users == 0 && !released;
                if (now) released = true;
            }
            if (now) Native.close(fd);
        }

        synchronized boolean isClosed() {
            return closed;
        }

        @Override
        public void run() {
            boolean now;
            synchronized (this) {
                if (closed) return;
                closed = true;
                if (users > 0) Native.shutdown(fd);  // wakes the reads and writes under way
                now = users == 0;
                if (now) released = true;
            }
            if (now) Native.close(fd);
        }
    }

    private final long id;
    private final Channel channel;
    private final Cleaner.Cleanable cleanable;
    private final Object writing = new Object();
    private final InputStream input = new ChannelInput();
    private final OutputStream output = new ChannelOutput();

    Request(long id, int fd) {
        this.id = id;
        this.channel = new Channel(fd);
        this.cleanable = Holder.CLEANER.register(this, channel);
    }

    /**
     * @return the request id (an unsigned 64-bit number, as {@code Long.toUnsignedString} shows
     *     it); the host sees the same
     */
    public long id() {
        return id;
    }

    /** @return the stream of the bytes the host sends on the channel (the same object each time) */
    public InputStream inputStream() {
        return input;
    }

    /** @return the stream of the bytes sent to the host on the channel (the same object each time) */
    public OutputStream outputStream() {
        return output;
    }

    /** @return whether {@link #close()} was called */
    public boolean isClosed() {
        return channel.isClosed();
    }

    /**
     * Ends the request, returning {@code payload} to the host (Apple's
     * {@code completeRequest(returningItems:)}). The request is then over, as if the host had
     * dismissed it; the channel stays open until closed. A request already ended is ignored by
     * extensiond.
     *
     * @param payload at most {@link ExtensionRuntime#REQUEST_MAX_PAYLOAD} bytes
     * @throws IllegalArgumentException above that (nothing is sent)
     * @throws NotSupervisedException without extensiond
     */
    public void complete(byte[] payload) {
        Objects.requireNonNull(payload, "payload");
        if (payload.length > ExtensionRuntime.REQUEST_MAX_PAYLOAD)
            throw new IllegalArgumentException("complete: the result is " + payload.length + " bytes, over the limit of "
                    + ExtensionRuntime.REQUEST_MAX_PAYLOAD);
        Errno.check(Native.complete(id, payload), "complete");
    }

    /**
     * Ends the request with an empty result; see {@link #complete(byte[])}.
     *
     * @throws NotSupervisedException without extensiond
     */
    public void complete() {
        complete(new byte[0]);
    }

    /**
     * Ends the request without a result, telling the host {@code reason} (Apple's
     * {@code cancelRequest(withError:)}; cut at 4096 bytes of UTF-8).
     *
     * @param reason why
     * @throws IllegalArgumentException when it holds a NUL character (nothing is sent)
     * @throws NotSupervisedException without extensiond
     */
    public void cancel(String reason) {
        Objects.requireNonNull(reason, "reason");
        if (reason.indexOf('\0') >= 0) throw new IllegalArgumentException("cancel: the reason must not contain NUL");
        Errno.check(Native.cancel(id, Native.utf8(reason)), "cancel");
    }

    /** Closes the channel (the host sees the end of its stream). */
    @Override
    public void close() {
        cleanable.clean();
    }

    @Override
    public String toString() {
        return "Request " + Long.toUnsignedString(id) + (isClosed() ? " (closed)" : "");
    }

    // Inner (not static) classes: a stream in use keeps its Request, and so its channel, alive.

    private final class ChannelInput extends InputStream {
        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            int n = read(one, 0, 1);
            return n < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] bytes, int offset, int length) throws IOException {
            Objects.checkFromIndexSize(offset, length, bytes.length);
            if (length == 0) return 0;
            int fd = channel.acquire();
            try {
                return Native.read(fd, bytes, offset, length);
            } finally {
                channel.release();
            }
        }

        @Override
        public void close() {
            Request.this.close();
        }
    }

    private final class ChannelOutput extends OutputStream {
        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] bytes, int offset, int length) throws IOException {
            Objects.checkFromIndexSize(offset, length, bytes.length);
            if (length == 0) return;
            synchronized (writing) {
                int fd = channel.acquire();
                try {
                    Native.write(fd, bytes, offset, length);
                } finally {
                    channel.release();
                }
            }
        }

        @Override
        public void close() {
            Request.this.close();
        }
    }
}
