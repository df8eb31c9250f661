package org.pategail.core.net;

/** The service refused the device, could not be reached for longer than the retry policy allows, or a local
 * setting (address, CA file, store) is wrong: a one-line reason, and the device stops. */
public final class ServiceException extends Exception {
    private static final long serialVersionUID = 1L;

    public ServiceException(String message) {
        super(message);
    }
}
