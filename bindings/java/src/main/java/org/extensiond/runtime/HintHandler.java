package org.extensiond.runtime;

/** Receives the notification hints observed with {@link ExtensionRuntime#observe(String, HintHandler)}. */
@FunctionalInterface
public interface HintHandler {
    /**
     * Called on a runtime thread for each post of an observed name made while the process runs,
     * and once for all the posts made while it was suspended, when it is resumed. An exception it
     * throws is printed to standard error with its stack trace.
     *
     * @param name the name posted
     * @throws Exception anything; printed, never propagated
     */
    void hint(String name) throws Exception;
}
