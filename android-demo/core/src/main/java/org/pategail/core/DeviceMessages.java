package org.pategail.core;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;

/**
 * The device protocol between coordinator and device, byte for byte as the Python SDK's {@code messages.py}:
 * frame MAGIC "PGDV" | version u8 | kind u8 | body length u32 | body. Decoding is strict and every refusal
 * carries an error code the device sends back in its {@link ErrorReply}.
 */
public final class DeviceMessages {
    public static final byte[] MAGIC = {'P', 'G', 'D', 'V'};
    public static final int PROTOCOL_VERSION = 1;
    public static final int SLOTS = 48;
    public static final int N_ACTIONS = 4;
    public static final int KIND_POLICY_UPDATE = 1, KIND_ROUND_REQUEST = 2, KIND_INITIAL_STATES_REQUEST = 3,
            KIND_ACK = 4, KIND_ERROR = 5, KIND_FEDAVG_REQUEST = 6, KIND_CELL_RELEASE_REQUEST = 7;
    public static final long NO_ROUND = -1;
    public static final String MALFORMED = "malformed", VERSION = "version", SHAPE = "shape",
            NON_FINITE = "non_finite", TOO_LARGE = "too_large", CELL_RANGE = "cell_range", HASH = "hash",
            INCOMPATIBLE = "incompatible", NOT_READY = "not_ready", BUDGET = "budget";
    static final String[] ERROR_CODES = {MALFORMED, VERSION, SHAPE, NON_FINITE, TOO_LARGE, CELL_RANGE, HASH,
            INCOMPATIBLE, NOT_READY, BUDGET};
    private static final int HEAD = 10;

    private DeviceMessages() {
    }

    /** Wire code -> name ("policy_update", ...); an Ack names the request it acknowledges. */
    public static String kindName(int kind) {
        switch (kind) {
            case KIND_POLICY_UPDATE: return "policy_update";
            case KIND_ROUND_REQUEST: return "round_request";
            case KIND_INITIAL_STATES_REQUEST: return "initial_states_request";
            case KIND_ACK: return "ack";
            case KIND_ERROR: return "error";
            case KIND_FEDAVG_REQUEST: return "fedavg_request";
            case KIND_CELL_RELEASE_REQUEST: return "cell_release_request";
            default: return null;
        }
    }

    /** Name -> wire code (the inverse of {@link #kindName}); -1 for a name of no kind. */
    public static int kindCode(String name) {
        for (int kind = KIND_POLICY_UPDATE; kindName(kind) != null; kind++) {
            if (kindName(kind).equals(name)) {
                return kind;
            }
        }
        return -1;
    }

    /** Bounds a device enforces on what it receives (the Python SDK's {@code MessageLimits} defaults). */
    public static final class Limits {
        public final int maxDays;
        public final int maxKSteps;
        public final int maxBatchSize;
        public final int maxPolicyBytes;
        public final int maxText;

        public Limits(int maxDays, int maxKSteps, int maxBatchSize, int maxPolicyBytes, int maxText) {
            this.maxDays = maxDays;
            this.maxKSteps = maxKSteps;
            this.maxBatchSize = maxBatchSize;
            this.maxPolicyBytes = maxPolicyBytes;
            this.maxText = maxText;
        }

        public static final Limits DEFAULT = new Limits(4096, 10_000, 4096, 64 << 20, 1024);
    }

    /** Any device-protocol message. */
    public interface Message {
        int kind();

        long round();

        byte[] body();
    }

    /** Coordinator -> device: a new policy inference model and its announced SHA-256. */
    public static final class PolicyUpdate implements Message {
        public final long round;
        public final String policySha256;
        public final byte[] policyOnnx;

        public PolicyUpdate(long round, String policySha256, byte[] policyOnnx) {
            this.round = round;
            this.policySha256 = policySha256;
            this.policyOnnx = policyOnnx;
        }

        public int kind() {
            return KIND_POLICY_UPDATE;
        }

        public long round() {
            return round;
        }

        void validate(Limits limits) throws MessageError {
            checkRound(round, false);
            if (policySha256.length() != 64 || !policySha256.matches("[0-9a-f]{64}")) {
                throw new MessageError(MALFORMED, "policy_sha256 must be 64 lowercase hex digits");
            }
            if (policyOnnx.length == 0) {
                throw new MessageError(MALFORMED, "policy_onnx must be non-empty bytes");
            }
            if (policyOnnx.length > limits.maxPolicyBytes) {
                throw new MessageError(TOO_LARGE, "policy of " + policyOnnx.length + " bytes, above "
                        + limits.maxPolicyBytes);
            }
        }

        public byte[] body() {
            return new Wire.Writer().i64(round).raw(policySha256.getBytes(StandardCharsets.US_ASCII)).blob(policyOnnx)
                    .bytes();
        }
    }

    /** Coordinator -> device: the generated days of one round (days (n, 48), homes (n), actions (n, 47)). */
    public static final class RoundRequest implements Message {
        public final long round;
        public final long kSteps;
        public final long batchSize;
        public final int[][] days;
        public final int[] homes;
        public final byte[][] actions;

        public RoundRequest(long round, long kSteps, long batchSize, int[][] days, int[] homes, byte[][] actions) {
            this.round = round;
            this.kSteps = kSteps;
            this.batchSize = batchSize;
            this.days = days;
            this.homes = homes;
            this.actions = actions;
        }

        public int kind() {
            return KIND_ROUND_REQUEST;
        }

        public long round() {
            return round;
        }

        /** Pairs the device scores: n x 47. */
        public int nQueries() {
            return days.length * (SLOTS - 1);
        }

        void validate(Limits limits, int nCells) throws MessageError {
            checkRound(round, false);
            if (kSteps > limits.maxKSteps) {
                throw new MessageError(TOO_LARGE, "k_steps = " + kSteps + ", above the limit " + limits.maxKSteps);
            }
            if (batchSize > limits.maxBatchSize) {
                throw new MessageError(TOO_LARGE, "batch_size = " + batchSize + ", above the limit "
                        + limits.maxBatchSize);
            }
            if (batchSize < 2) {
                throw new MessageError(MALFORMED, "batch_size = " + batchSize + ", below 2");
            }
            if (days.length == 0) {
                throw new MessageError(SHAPE, "days: a round needs at least one generated day");
            }
            if (days.length > limits.maxDays) {
                throw new MessageError(TOO_LARGE, days.length + " days, above the limit " + limits.maxDays);
            }
            String hi = nCells > 0 ? String.valueOf(nCells) : "inf";
            for (int[] day : days) {
                for (int c : day) {
                    if (c < 0 || (nCells > 0 && c >= nCells)) {
                        throw new MessageError(CELL_RANGE, "days: values must be in [0, " + hi + ")");
                    }
                }
            }
            for (int h : homes) {
                if (h < 0 || (nCells > 0 && h >= nCells)) {
                    throw new MessageError(CELL_RANGE, "homes: values must be in [0, " + hi + ")");
                }
            }
            for (byte[] row : actions) {
                for (byte a : row) {
                    if (a < 0 || a >= N_ACTIONS) {
                        throw new MessageError(MALFORMED, "actions: values must be in [0, " + N_ACTIONS + ")");
                    }
                }
            }
        }

        public byte[] body() {
            int n = days.length;
            byte[] d = new byte[4 * n * SLOTS], h = new byte[4 * n], a = new byte[n * (SLOTS - 1)];
            for (int i = 0; i < n; i++) {
                for (int t = 0; t < SLOTS; t++) {
                    putIntLE(d, 4 * (i * SLOTS + t), days[i][t]);
                }
                putIntLE(h, 4 * i, homes[i]);
                System.arraycopy(actions[i], 0, a, i * (SLOTS - 1), SLOTS - 1);
            }
            return new Wire.Writer().i64(round).u32(kSteps).u32(batchSize).u32(n).raw(d).raw(h).raw(a).bytes();
        }
    }

    /**
     * Coordinator -> device: make the environment contribution the pending vector of the next secure round;
     * with {@code regionCells} > 0 (Gaussian runs) it carries the coarse parts over the cell table's regions of
     * at most that many cells ({@link Regions}).
     */
    public static final class InitialStatesRequest implements Message {
        public final long round;
        /** 0: no coarse parts (the body is the round alone); else a 4-byte trailer carries it. */
        public final int regionCells;

        public InitialStatesRequest(long round) {
            this(round, 0);
        }

        public InitialStatesRequest(long round, int regionCells) {
            this.round = round;
            this.regionCells = regionCells;
        }

        public int kind() {
            return KIND_INITIAL_STATES_REQUEST;
        }

        public long round() {
            return round;
        }

        public byte[] body() {
            Wire.Writer w = new Wire.Writer().i64(round);
            return (regionCells > 0 ? w.u32(regionCells) : w).bytes();
        }
    }

    /**
     * Coordinator -> device: one round of DP-FedAvg — local SGD epochs over the owner's days from the global
     * policy {@code parameters} (float32, in the bundle's {@code policy_training} order), the delta L2-clipped to
     * {@code clipNorm} as the pending vector. This core parses and checks it; training it needs a policy trainer.
     */
    public static final class FedAvgRequest implements Message {
        public final long round;
        public final long epochs;
        public final long batchSize;
        public final double learningRate;
        public final double clipNorm;
        public final float[] parameters;

        public FedAvgRequest(long round, long epochs, long batchSize, double learningRate, double clipNorm,
                             float[] parameters) {
            this.round = round;
            this.epochs = epochs;
            this.batchSize = batchSize;
            this.learningRate = learningRate;
            this.clipNorm = clipNorm;
            this.parameters = parameters;
        }

        public int kind() {
            return KIND_FEDAVG_REQUEST;
        }

        public long round() {
            return round;
        }

        void validate(Limits limits) throws MessageError {
            checkRound(round, false);
            checkCount("epochs", epochs, limits.maxKSteps);
            checkCount("batch_size", batchSize, limits.maxBatchSize);
            checkPositive("learning_rate", learningRate);
            checkPositive("clip_norm", clipNorm);
            if (parameters.length == 0) {
                throw new MessageError(SHAPE, "parameters: expected a non-empty float vector, got float32 (0,)");
            }
            checkParameterCount(parameters.length, limits);
            for (float x : parameters) {
                if (Float.isNaN(x) || Float.isInfinite(x)) {
                    throw new MessageError(NON_FINITE, "parameters: NaN or Inf");
                }
            }
        }

        private static void checkCount(String name, long v, int hi) throws MessageError {
            if (v < 1 || v > hi) {
                throw new MessageError(v > hi ? TOO_LARGE : MALFORMED, name + " = " + v + ", outside [1, " + hi + "]");
            }
        }

        private static void checkPositive(String name, double x) throws MessageError {
            if (!(x > 0) || Double.isInfinite(x)) {
                String text = Double.isNaN(x) ? "nan" : Double.isInfinite(x) ? (x > 0 ? "inf" : "-inf")
                        : Double.toString(x);
                throw new MessageError(MALFORMED, name + " must be a finite number > 0, got " + text);
            }
        }

        static void checkParameterCount(long n, Limits limits) throws MessageError {
            if (4 * n > limits.maxPolicyBytes) {
                throw new MessageError(TOO_LARGE, n + " parameters, above the limit of " + limits.maxPolicyBytes
                        + " bytes");
            }
        }

        public byte[] body() {
            byte[] flat = new byte[4 * parameters.length];
            for (int i = 0; i < parameters.length; i++) {
                putIntLE(flat, 4 * i, Float.floatToRawIntBits(parameters[i]));
            }
            return new Wire.Writer().i64(round).u32(epochs).u32(batchSize).f64(learningRate).f64(clipNorm)
                    .u32(parameters.length).raw(flat).bytes();
        }
    }

    /**
     * Coordinator -> device: a run's cell-table release — make the device's visited vector over the public map
     * (1 on its {@code maxCells} most-visited squares, 0 elsewhere: {@link CellUniverse#visitedVector}) the
     * pending vector of the next secure round, which releases it with Gaussian noise.
     */
    public static final class CellReleaseRequest implements Message {
        public final long round;
        public final long maxCells;

        public CellReleaseRequest(long round, long maxCells) {
            this.round = round;
            this.maxCells = maxCells;
        }

        public int kind() {
            return KIND_CELL_RELEASE_REQUEST;
        }

        public long round() {
            return round;
        }

        void validate() throws MessageError {
            checkRound(round, false);
            if (maxCells < 1 || maxCells >= 1L << 31) {
                throw new MessageError(MALFORMED, "max_cells " + maxCells + " is not a positive count of cells");
            }
        }

        public byte[] body() {
            return new Wire.Writer().i64(round).u32(maxCells).bytes();
        }
    }

    /** Device -> coordinator: request {@code kind} of {@code round} was carried out; n = pending length. */
    public static final class Ack implements Message {
        public final long round;
        public final String kind;
        public final long n;

        public Ack(long round, String kind, long n) {
            this.round = round;
            this.kind = kind;
            this.n = n;
        }

        public int kind() {
            return KIND_ACK;
        }

        public long round() {
            return round;
        }

        public byte[] body() {
            int code = kindCode(kind);
            if (code < 0) {
                throw new IllegalArgumentException("no request kind '" + kind + "'");
            }
            return new Wire.Writer().i64(round).u8(code).u32(n).bytes();
        }
    }

    /** Device -> coordinator: the request of {@code round} was refused, with a code and a one-line reason. */
    public static final class ErrorReply implements Message {
        public final long round;
        public final String code;
        public final String message;

        public ErrorReply(long round, String code, String message) {
            this.round = round;
            this.code = code;
            this.message = message;
        }

        /** The reply to a refused request: the error's text on one line, cut to the limit. */
        public static ErrorReply fromError(long round, MessageError err, Limits limits) {
            String text = String.join(" ", err.getMessage().trim().split("\\s+"));
            if (text.length() > limits.maxText) {
                text = text.substring(0, limits.maxText);
            }
            return new ErrorReply(round, err.code, text);
        }

        public int kind() {
            return KIND_ERROR;
        }

        public long round() {
            return round;
        }

        public byte[] body() {
            return new Wire.Writer().i64(round).blob(code.getBytes(StandardCharsets.US_ASCII))
                    .blob(message.getBytes(StandardCharsets.UTF_8)).bytes();
        }
    }

    static void putIntLE(byte[] b, int at, int v) {
        for (int i = 0; i < 4; i++) {
            b[at + i] = (byte) (v >>> (8 * i));
        }
    }

    static int getIntLE(byte[] b, int at) {
        return (b[at] & 0xFF) | ((b[at + 1] & 0xFF) << 8) | ((b[at + 2] & 0xFF) << 16) | ((b[at + 3] & 0xFF) << 24);
    }

    static void checkRound(long round, boolean allowNone) throws MessageError {
        if (round < (allowNone ? NO_ROUND : 0)) {
            throw new MessageError(MALFORMED, "round " + round + " out of range");
        }
    }

    /** The frame of {@code message}. */
    public static byte[] toBytes(Message message) {
        byte[] body = message.body();
        return new Wire.Writer().raw(MAGIC).u8(PROTOCOL_VERSION).u8(message.kind()).u32(body.length).raw(body).bytes();
    }

    /** The round field of a frame, or NO_ROUND when it cannot be read (for error replies). */
    public static long peekRound(byte[] data) {
        if (data.length >= HEAD + 8 && Arrays.equals(Arrays.copyOfRange(data, 0, 4), MAGIC)
                && kindName(data[5] & 0xFF) != null) {
            long v = Bytes.getLongBE(data, HEAD);
            return v >= 0 ? v : NO_ROUND;
        }
        return NO_ROUND;
    }

    private static String decodeText(byte[] raw, java.nio.charset.Charset cs, String what) throws MessageError {
        try {
            return cs.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(java.nio.ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException err) {
            throw new MessageError(MALFORMED, what);
        }
    }

    /** Decode and validate one frame; {@code nCells} (0 = unknown) bounds cell ids. */
    public static Message fromBytes(byte[] data, Limits limits, int nCells) throws MessageError {
        if (data.length < HEAD) {
            throw new MessageError(MALFORMED, "message too short");
        }
        if (!Arrays.equals(Arrays.copyOfRange(data, 0, 4), MAGIC)) {
            throw new MessageError(MALFORMED, "not a device-protocol message");
        }
        int version = data[4] & 0xFF, kind = data[5] & 0xFF;
        long n = Bytes.getIntBE(data, 6) & 0xFFFFFFFFL;
        if (version != PROTOCOL_VERSION) {
            throw new MessageError(VERSION, "protocol version " + version + ", this device speaks " + PROTOCOL_VERSION);
        }
        if (kindName(kind) == null) {
            throw new MessageError(MALFORMED, "unknown message kind " + kind);
        }
        if (HEAD + n != data.length) {
            throw new MessageError(MALFORMED, "bad message length");
        }
        Wire.Reader r = new Wire.Reader(Arrays.copyOfRange(data, HEAD, data.length));
        try {
            Message msg = read(kind, r, limits, nCells);
            r.done();
            return msg;
        } catch (SecAggException err) {      // the wire reader's "truncated" / "trailing bytes" / "field too long"
            throw new MessageError(MALFORMED, err.getMessage());
        }
    }

    private static Message read(int kind, Wire.Reader r, Limits limits, int nCells)
            throws MessageError, SecAggException {
        long round = r.i64();
        switch (kind) {
            case KIND_POLICY_UPDATE: {
                String digest = decodeText(r.raw(64), StandardCharsets.US_ASCII, "policy_sha256 is not ASCII");
                long n = r.u32();
                if (n > limits.maxPolicyBytes) {
                    throw new MessageError(TOO_LARGE, "policy of " + n + " bytes, above " + limits.maxPolicyBytes);
                }
                PolicyUpdate m = new PolicyUpdate(round, digest, r.raw(n));
                m.validate(limits);
                return m;
            }
            case KIND_ROUND_REQUEST: {
                long k = r.u32(), b = r.u32(), n = r.u32();
                if (n > limits.maxDays) {     // before reading: never allocate what the limits forbid
                    throw new MessageError(TOO_LARGE, n + " days, above the limit " + limits.maxDays);
                }
                int nd = (int) n;
                byte[] d = r.raw(4L * nd * SLOTS), h = r.raw(4L * nd), a = r.raw((long) nd * (SLOTS - 1));
                int[][] days = new int[nd][SLOTS];
                int[] homes = new int[nd];
                byte[][] actions = new byte[nd][];
                for (int i = 0; i < nd; i++) {
                    for (int t = 0; t < SLOTS; t++) {
                        days[i][t] = getIntLE(d, 4 * (i * SLOTS + t));
                    }
                    homes[i] = getIntLE(h, 4 * i);
                    actions[i] = Arrays.copyOfRange(a, i * (SLOTS - 1), (i + 1) * (SLOTS - 1));
                }
                RoundRequest m = new RoundRequest(round, k, b, days, homes, actions);
                m.validate(limits, nCells);
                return m;
            }
            case KIND_INITIAL_STATES_REQUEST: {
                boolean trailer = r.remaining() > 0;
                long regionCells = trailer ? r.u32() : 0;
                if (trailer && regionCells == 0) {      // one encoding per message: 0 is sent as no trailer
                    throw new MessageError(MALFORMED, "region_cells trailer of 0");
                }
                checkRound(round, false);
                if (regionCells >= 1L << 31) {
                    throw new MessageError(MALFORMED, "region_cells " + regionCells + " is not a count of cells");
                }
                return new InitialStatesRequest(round, (int) regionCells);
            }
            case KIND_FEDAVG_REQUEST: {
                long epochs = r.u32(), batch = r.u32();
                double lr = r.f64(), clip = r.f64();
                long n = r.u32();
                FedAvgRequest.checkParameterCount(n, limits);   // before reading: never allocate past the limits
                byte[] raw = r.raw(4 * n);
                float[] parameters = new float[(int) n];
                for (int i = 0; i < parameters.length; i++) {
                    parameters[i] = Float.intBitsToFloat(getIntLE(raw, 4 * i));
                }
                FedAvgRequest m = new FedAvgRequest(round, epochs, batch, lr, clip, parameters);
                m.validate(limits);
                return m;
            }
            case KIND_CELL_RELEASE_REQUEST: {
                CellReleaseRequest m = new CellReleaseRequest(round, r.u32());
                m.validate();
                return m;
            }
            case KIND_ACK: {
                int code = r.u8();
                long n = r.u32();
                checkRound(round, false);
                String name = kindName(code);
                if (name == null) {
                    throw new MessageError(MALFORMED, "unknown acknowledged kind " + code);
                }
                if (code == KIND_ACK || code == KIND_ERROR) {
                    throw new MessageError(MALFORMED, "unknown acknowledged kind '" + name + "'");
                }
                return new Ack(round, name, n);
            }
            default: {
                String code = decodeText(r.blob(64), StandardCharsets.US_ASCII, "error reply text is not UTF-8");
                String text = decodeText(r.blob(4L * limits.maxText), StandardCharsets.UTF_8,
                        "error reply text is not UTF-8");
                checkRound(round, true);
                if (!Arrays.asList(ERROR_CODES).contains(code)) {
                    throw new MessageError(MALFORMED, "unknown error code '" + code + "'");
                }
                if (text.codePointCount(0, text.length()) > limits.maxText) {
                    throw new MessageError(MALFORMED, "message must be a string of at most " + limits.maxText
                            + " characters");
                }
                return new ErrorReply(round, code, text);
            }
        }
    }
}
