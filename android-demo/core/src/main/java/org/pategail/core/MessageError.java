package org.pategail.core;

/** A device-protocol message was refused; {@link #code} is one of the {@code DeviceMessages} error codes. */
public final class MessageError extends Exception {
    private static final long serialVersionUID = 1L;
    public final String code;

    public MessageError(String code, String message) {
        super(message);
        this.code = code;
    }
}
