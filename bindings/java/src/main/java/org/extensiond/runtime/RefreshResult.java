package org.extensiond.runtime;

/** The answer to a background refresh ({@code EXT_REFRESH_*}). */
public enum RefreshResult {
    /** New content was fetched: hosts showing the extension are told to redraw. */
    NEW_DATA(0),
    /** Nothing changed. */
    NO_DATA(1),
    /** The refresh failed: the next one is backed off. */
    FAILED(2);

    private final int code;

    RefreshResult(int code) {
        this.code = code;
    }

    /** @return the value of the C interface ({@code EXT_REFRESH_NEW_DATA} ...) */
    public int code() {
        return code;
    }
}
