package org.pategail.core;

/** A model bundle is missing, altered, of another format version, or not runnable by this device. */
public final class BundleException extends Exception {
    private static final long serialVersionUID = 1L;

    public BundleException(String message) {
        super(message);
    }
}
