package org.extensiond.runtime;

/** The error numbers the C interface returns (negated), on Linux, and the check of a result. */
final class Errno {
    static final int EPERM = 1, ENOENT = 2, EIO = 5, EAGAIN = 11, ENOMEM = 12, EINVAL = 22, ENOSPC = 28, EMSGSIZE = 90,
            ENOTCONN = 107, EALREADY = 114;

    private Errno() {}

    static String name(int code) {
        switch (code) {
            case EPERM: return "EPERM (operation not permitted)";
            case ENOENT: return "ENOENT (no such entry)";
            case EIO: return "EIO (extensiond failed)";
            case EAGAIN: return "EAGAIN (try again)";
            case ENOMEM: return "ENOMEM (out of memory)";
            case EINVAL: return "EINVAL (invalid argument)";
            case ENOSPC: return "ENOSPC (over a limit)";
            case EMSGSIZE: return "EMSGSIZE (too large)";
            case ENOTCONN: return "ENOTCONN (not connected)";
            case EALREADY: return "EALREADY (already done)";
            default: return "errno " + code;
        }
    }

    /** Throws for a negative {@code result}: NotSupervisedException for -ENOTCONN, OutOfMemoryError
     * for -ENOMEM, ExtensionRuntimeException otherwise. */
    static void check(int result, String what) {
        if (result >= 0) return;
        int code = -result;
        if (code == ENOTCONN) throw new NotSupervisedException(what + ": not launched by extensiond, or extensiond is gone");
        if (code == ENOMEM) throw new OutOfMemoryError(what + ": out of memory in the C runtime");
        throw new ExtensionRuntimeException(code, what + ": " + name(code));
    }
}
