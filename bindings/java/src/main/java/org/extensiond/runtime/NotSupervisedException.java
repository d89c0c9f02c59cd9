package org.extensiond.runtime;

/**
 * The process was not launched by extensiond (it inherited no runtime channel), or its channel to
 * extensiond is closed. Its {@link #errno()} is ENOTCONN.
 */
public class NotSupervisedException extends ExtensionRuntimeException {
    private static final long serialVersionUID = 1L;

    /** @param message what failed */
    public NotSupervisedException(String message) {
        super(Errno.ENOTCONN, message);
    }
}
