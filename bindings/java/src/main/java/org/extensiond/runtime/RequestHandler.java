package org.extensiond.runtime;

/**
 * Handles the requests hosts begin ({@link ExtensionRuntime#start(RequestHandler)}).
 *
 * <p>{@link #handle(Request)} runs on a runtime thread of its own for each request, so it may
 * block (reading the request's channel, say) without delaying other requests or the runtime's
 * handling of expiry. The handler owns the request's channel: close it ({@link Request#close()},
 * or try-with-resources) when done, here or on another thread it hands the request to.
 */
@FunctionalInterface
public interface RequestHandler {
    /**
     * Handles one request. An exception it throws is printed to standard error with its stack
     * trace and the request's channel is closed; the runtime carries on.
     *
     * @param request the request: its id and the channel to its host
     * @throws Exception anything; printed, never propagated
     */
    void handle(Request request) throws Exception;
}
