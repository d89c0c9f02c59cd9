package org.extensiond.runtime;

/**
 * The work done under a task assertion ({@link ExtensionRuntime#performExpiringActivity(String,
 * ExpiringActivity)}), like the block of Apple's {@code ProcessInfo.performExpiringActivity}.
 */
@FunctionalInterface
public interface ExpiringActivity {
    /**
     * Called on a runtime thread:
     * <ul>
     * <li>granted: once with {@code false}; the assertion is held until this call returns (and
     * until the expired call, if any, has returned too): do the work here;</li>
     * <li>about to expire: a second time with {@code true}, <em>concurrently</em>, on another
     * thread, at most once, while the first call may still be running: ask the work to stop and
     * return quickly (within the policy's {@code expiryGraceSeconds});</li>
     * <li>not granted (the extension is expiring or being suspended, its background time is
     * spent, it holds too many assertions, or there is no extensiond): once with {@code true}
     * only, at once.</li>
     * </ul>
     * An exception it throws is printed to standard error with its stack trace; the call counts
     * as returned.
     *
     * @param expired whether this is the expired call (or the only call of a denied activity)
     * @throws Exception anything; printed, never propagated
     */
    void run(boolean expired) throws Exception;
}
