package org.extensiond.runtime;

/** A call into the runtime failed; {@link #errno()} is the error the C interface returned. */
public class ExtensionRuntimeException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int errno;

    /**
     * @param errno the (positive) error number
     * @param message what failed
     */
    public ExtensionRuntimeException(int errno, String message) {
        super(message);
        this.errno = errno;
    }

    /** @return the (positive) error number, as in {@code <errno.h>} */
    public int errno() {
        return errno;
    }
}
