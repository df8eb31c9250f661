package org.pategail.core.secagg;

/**
 * What can go wrong in a secure-aggregation round (mirrors the Python SDK's {@code errors.py}).
 * {@link Kind} tells the four cases apart so the driver can report them the way the Python client raises them.
 */
public class SecAggException extends Exception {
    private static final long serialVersionUID = 1L;
    /** The four outcomes a peer distinguishes. */
    public enum Kind {
        /** One message was refused (malformed, wrong round, unsigned, wrongly signed); state unchanged. */
        MESSAGE_REJECTED,
        /** A peer asked for something the protocol forbids, or in the wrong phase. */
        PROTOCOL,
        /** A request would expose both secrets of one device. */
        REFUSED_UNMASK,
        /** The round stops here: too few survivors or confirmations. */
        ABORT
    }

    private final Kind kind;

    public SecAggException(Kind kind, String message) {
        super(message);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }

    public static SecAggException rejected(String message) {
        return new SecAggException(Kind.MESSAGE_REJECTED, message);
    }

    public static SecAggException protocol(String message) {
        return new SecAggException(Kind.PROTOCOL, message);
    }

    public static SecAggException abort(String message) {
        return new SecAggException(Kind.ABORT, message);
    }
}
