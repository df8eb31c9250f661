package org.pategail.core.secagg;

import java.io.ByteArrayOutputStream;
import java.util.Arrays;

/**
 * Binary framing of secure-aggregation messages, byte-compatible with the Python SDK's {@code wire.py}.
 *
 * <p>Frame: MAGIC "PGSA" | version u8 | kind u8 | body length u32 | body | signature length u8 | signature.
 * Integers are big-endian except the uint64 vectors of masked uploads, which are little-endian words.
 */
public final class Wire {
    public static final byte[] MAGIC = {'P', 'G', 'S', 'A'};
    /** 3: the round configuration commits to the checksum key, and devices reveal shares only under a survivor
     *  set certified by a majority of the participants (2: every message carries the configuration's digest). */
    public static final int VERSION = 3;
    private static final int HEAD = 10;

    private Wire() {
    }

    /** Appends big-endian fields to a body. */
    public static final class Writer {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        public Writer u8(int v) {
            out.write(v & 0xFF);
            return this;
        }

        public Writer u32(long v) {
            for (int s = 24; s >= 0; s -= 8) {
                out.write((int) (v >>> s) & 0xFF);
            }
            return this;
        }

        public Writer u64(long v) {
            for (int s = 56; s >= 0; s -= 8) {
                out.write((int) (v >>> s) & 0xFF);
            }
            return this;
        }

        public Writer i64(long v) {
            return u64(v);
        }

        public Writer f64(double v) {
            return u64(Double.doubleToRawLongBits(v));
        }

        public Writer raw(byte[] data) {
            out.write(data, 0, data.length);
            return this;
        }

        public Writer blob(byte[] data) {
            return u32(data.length).raw(data);
        }

        public Writer u32s(int[] values) {
            u32(values.length);
            for (int v : values) {
                u32(v & 0xFFFFFFFFL);
            }
            return this;
        }

        /** A uint64 vector as little-endian words, length-prefixed (the layout of the masked upload). */
        public Writer words(long[] vec) {
            u32(vec.length);
            byte[] buf = new byte[8 * vec.length];
            for (int i = 0; i < vec.length; i++) {
                Bytes.putLongLE(buf, 8 * i, vec[i]);
            }
            return raw(buf);
        }

        public byte[] bytes() {
            return out.toByteArray();
        }
    }

    /** Reads what {@link Writer} wrote; any shortfall is a rejected message. */
    public static final class Reader {
        private final byte[] data;
        private int pos;

        public Reader(byte[] data) {
            this.data = data;
        }

        private int take(long n) throws SecAggException {
            if (n < 0 || pos + n > data.length) {
                throw SecAggException.rejected("truncated message");
            }
            int at = pos;
            pos += (int) n;
            return at;
        }

        public int u8() throws SecAggException {
            return data[take(1)] & 0xFF;
        }

        public long u32() throws SecAggException {
            int at = take(4);
            return Bytes.getIntBE(data, at) & 0xFFFFFFFFL;
        }

        public long u64() throws SecAggException {
            return Bytes.getLongBE(data, take(8));
        }

        public long i64() throws SecAggException {
            return u64();
        }

        public double f64() throws SecAggException {
            return Double.longBitsToDouble(u64());
        }

        public byte[] raw(long n) throws SecAggException {
            int at = take(n);
            return Arrays.copyOfRange(data, at, at + (int) n);
        }

        public byte[] blob(long maxLen) throws SecAggException {
            long n = u32();
            if (n > maxLen) {
                throw SecAggException.rejected("field too long");
            }
            return raw(n);
        }

        public int[] u32s(long maxLen) throws SecAggException {
            long n = u32();
            if (n > maxLen) {
                throw SecAggException.rejected("list too long");
            }
            int at = take(4 * n);
            int[] out = new int[(int) n];
            for (int i = 0; i < n; i++) {
                out[i] = Bytes.getIntBE(data, at + 4 * i);
            }
            return out;
        }

        public long[] words(long maxLen) throws SecAggException {
            long n = u32();
            if (n > maxLen) {
                throw SecAggException.rejected("vector too long");
            }
            int at = take(8 * n);
            long[] out = new long[(int) n];
            for (int i = 0; i < n; i++) {
                out[i] = Bytes.getLongLE(data, at + 8 * i);
            }
            return out;
        }

        public int remaining() {
            return data.length - pos;
        }

        public void done() throws SecAggException {
            if (pos != data.length) {
                throw SecAggException.rejected("trailing bytes in message");
            }
        }
    }

    /** Signs the bytes before the signature; returns 64 bytes. */
    public interface Signer {
        byte[] sign(byte[] data);
    }

    /** A frame of {@code kind} around {@code body}, signed when {@code signer} is not null. */
    public static byte[] frame(int kind, byte[] body, Signer signer) {
        return frame(MAGIC, VERSION, kind, body, signer);
    }

    /** A frame of another protocol ({@code magic}, {@code version}: the network frames use their own). */
    public static byte[] frame(byte[] magic, int version, int kind, byte[] body, Signer signer) {
        byte[] head = new Writer().raw(magic).u8(version).u8(kind).u32(body.length).raw(body).bytes();
        byte[] sig = signer == null ? new byte[0] : signer.sign(head);
        return new Writer().raw(head).u8(sig.length).raw(sig).bytes();
    }

    /** An unframed message: its body, the signed part, and the signature (possibly empty). */
    public static final class Unframed {
        public final byte[] body;
        public final byte[] signed;
        public final byte[] signature;

        Unframed(byte[] body, byte[] signed, byte[] signature) {
            this.body = body;
            this.signed = signed;
            this.signature = signature;
        }
    }

    /** The parts of a frame that must be of {@code kind}. */
    public static Unframed unframe(byte[] data, int kind) throws SecAggException {
        return unframe(data, MAGIC, VERSION, kind);
    }

    /** The parts of a frame of another protocol ({@code magic}, {@code version}) that must be of {@code kind}. */
    public static Unframed unframe(byte[] data, byte[] magic, int expectedVersion, int kind) throws SecAggException {
        if (data.length < HEAD + 1) {
            throw SecAggException.rejected("message too short");
        }
        if (!Arrays.equals(Arrays.copyOfRange(data, 0, 4), magic)) {
            throw SecAggException.rejected(Arrays.equals(magic, MAGIC) ? "not a secure-aggregation message"
                    : "not a pategail frame");
        }
        int version = data[4] & 0xFF;
        int gotKind = data[5] & 0xFF;
        long n = Bytes.getIntBE(data, 6) & 0xFFFFFFFFL;
        if (version != expectedVersion) {
            throw SecAggException.rejected("protocol version " + version + ", expected " + expectedVersion);
        }
        if (gotKind != kind) {
            throw SecAggException.rejected("message kind " + gotKind + ", expected " + kind);
        }
        long end = HEAD + n;
        if (end + 1 > data.length) {
            throw SecAggException.rejected("truncated message");
        }
        int sigLen = data[(int) end] & 0xFF;
        if (end + 1 + sigLen != data.length) {
            throw SecAggException.rejected("bad message length");
        }
        return new Unframed(Arrays.copyOfRange(data, HEAD, (int) end), Arrays.copyOfRange(data, 0, (int) end),
                Arrays.copyOfRange(data, (int) end + 1, data.length));
    }
}
