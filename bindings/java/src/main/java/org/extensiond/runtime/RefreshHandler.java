package org.extensiond.runtime;

/** Handles background refreshes ({@link ExtensionRuntime#onRefresh(RefreshHandler)}). */
@FunctionalInterface
public interface RefreshHandler {
    /**
     * Called on a runtime thread when extensiond refreshes the extension (its manifest's
     * {@code refresh} schedule, or {@code extctl refresh}). Answer with
     * {@link ExtensionRuntime#refreshComplete(long, RefreshResult)} within the policy's
     * {@code refreshSeconds}, here or later from another thread, or the refresh counts as
     * failed. An exception it throws is printed to standard error with its stack trace.
     *
     * @param refreshId the refresh to answer
     * @throws Exception anything; printed, never propagated
     */
    void refresh(long refreshId) throws Exception;
}
