package org.pategail.core.secagg;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The secure-aggregation messages, byte for byte as the Python SDK's {@code secagg/messages.py}.
 * Device -> aggregator messages start with (round_id, sender) and are Ed25519-signed; {@code decode} checks
 * the frame, the signature against the directory and the field shapes.
 */
public final class Messages {
    public static final int KIND_ENVELOPE = 2, KIND_ADVERTISE = 3, KIND_KEY_BROADCAST = 4, KIND_SHARE_KEYS = 5,
            KIND_SHARE_DELIVERY = 6, KIND_MASKED_INPUT = 7, KIND_SURVIVORS = 8, KIND_ACK = 9, KIND_ACK_SET = 10,
            KIND_UNMASK = 11, KIND_AGGREGATE = 12;
    /** Bytes of the round configuration's digest that every message (but the envelope) carries. */
    public static final int DIGEST_BYTES = 32;

    private Messages() {
    }

    /** (device, bytes): a share ciphertext by sender or recipient, or a Shamir share by owner. */
    public static final class Entry {
        public final long device;
        public final byte[] data;

        public Entry(long device, byte[] data) {
            this.device = device;
            this.data = data;
        }
    }

    /** The reader of a signed frame after the signature check, and the (round, sender) it starts with. */
    static final class Signed {
        final Wire.Reader reader;
        final long roundId;
        final byte[] configDigest;
        final long sender;

        Signed(Wire.Reader reader, long roundId, byte[] configDigest, long sender) {
            this.reader = reader;
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.sender = sender;
        }
    }

    /** Every message starts with (round id, SHA-256 of the signed round configuration). */
    static Wire.Writer head(long roundId, byte[] configDigest) {
        if (configDigest.length != DIGEST_BYTES) {
            throw new IllegalArgumentException("configDigest is the 32-byte SHA-256 of the signed round configuration");
        }
        return new Wire.Writer().u64(roundId).raw(configDigest);
    }

    static Signed openSigned(byte[] data, int kind, KeyDirectory directory) throws SecAggException {
        Wire.Unframed f = Wire.unframe(data, kind);
        Wire.Reader r = new Wire.Reader(f.body);
        long roundId = r.u64();
        byte[] digest = r.raw(DIGEST_BYTES);
        long sender = r.u32();
        if (f.signature.length == 0) {
            throw SecAggException.rejected("unsigned message");
        }
        if (!Crypto.verify(directory.signingKey(sender), f.signature, f.signed)) {
            throw SecAggException.rejected("bad signature on a message from device " + sender);
        }
        return new Signed(r, roundId, digest, sender);
    }

    static List<Entry> readPairs(Wire.Reader r, int size) throws SecAggException {
        long n = r.u32();
        List<Entry> out = new ArrayList<>();
        Set<Long> seen = new HashSet<>();
        for (long i = 0; i < n; i++) {
            long who = r.u32();
            out.add(new Entry(who, size > 0 ? r.raw(size) : r.blob(1 << 12)));
            seen.add(who);
        }
        if (seen.size() != out.size()) {
            throw SecAggException.rejected("duplicate entries");
        }
        return Collections.unmodifiableList(out);
    }

    static Wire.Writer writePairs(Wire.Writer w, List<Entry> pairs, boolean sized) {
        w.u32(pairs.size());
        for (Entry e : pairs) {
            w.u32(e.device);
            if (sized) {
                w.raw(e.data);
            } else {
                w.blob(e.data);
            }
        }
        return w;
    }

    static List<byte[]> readBlobs(Wire.Reader r) throws SecAggException {
        long n = r.u32();
        List<byte[]> out = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            out.add(r.blob(1024));
        }
        return out;
    }

    /** A bit per participant, in participant order, most significant bit first (numpy's packbits). */
    public static byte[] toBitmap(Set<Long> members, long[] participants) {
        byte[] out = new byte[(participants.length + 7) / 8];
        for (int i = 0; i < participants.length; i++) {
            if (members.contains(participants[i])) {
                out[i / 8] |= (byte) (0x80 >>> (i % 8));
            }
        }
        return out;
    }

    /** Inverse of {@link #toBitmap}; a bitmap of the wrong size or with padding bits set is rejected. */
    public static Set<Long> fromBitmap(byte[] bitmap, long[] participants) throws SecAggException {
        int n = participants.length;
        if (bitmap.length != (n + 7) / 8) {
            throw SecAggException.rejected("survivor bitmap of the wrong size");
        }
        Set<Long> out = new java.util.TreeSet<>();
        for (int i = 0; i < 8 * bitmap.length; i++) {
            boolean bit = (bitmap[i / 8] & (0x80 >>> (i % 8))) != 0;
            if (i >= n && bit) {
                throw SecAggException.rejected("survivor bitmap padding set");
            }
            if (i < n && bit) {
                out.add(participants[i]);
            }
        }
        return out;
    }

    /** Coordinator -> device: the round's checksum key, sealed to the device. */
    public static final class ChecksumEnvelope {
        public final long roundId;
        public final long device;
        public final byte[] sealed;

        public ChecksumEnvelope(long roundId, long device, byte[] sealed) {
            this.roundId = roundId;
            this.device = device;
            this.sealed = sealed;
        }

        public byte[] encode() {
            return Wire.frame(KIND_ENVELOPE, new Wire.Writer().u64(roundId).u32(device).blob(sealed).bytes(), null);
        }

        public static ChecksumEnvelope decode(byte[] data) throws SecAggException {
            Wire.Reader r = new Wire.Reader(Wire.unframe(data, KIND_ENVELOPE).body);
            ChecksumEnvelope out = new ChecksumEnvelope(r.u64(), r.u32(), r.blob(256));
            r.done();
            return out;
        }
    }

    /** Device -> aggregator (signed): the device's two X25519 public keys of this round. */
    public static final class AdvertiseKeys {
        public final long roundId;
        public final byte[] configDigest;
        public final long sender;
        public final byte[] cPublic;
        public final byte[] sPublic;

        public AdvertiseKeys(long roundId, byte[] configDigest, long sender, byte[] cPublic, byte[] sPublic) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.sender = sender;
            this.cPublic = cPublic;
            this.sPublic = sPublic;
        }

        public byte[] encode(Wire.Signer signer) {
            byte[] body = head(roundId, configDigest).u32(sender).raw(cPublic).raw(sPublic).bytes();
            return Wire.frame(KIND_ADVERTISE, body, signer);
        }

        public static AdvertiseKeys decode(byte[] data, KeyDirectory directory) throws SecAggException {
            Signed s = openSigned(data, KIND_ADVERTISE, directory);
            AdvertiseKeys out = new AdvertiseKeys(s.roundId, s.configDigest, s.sender, s.reader.raw(32), s.reader.raw(32));
            s.reader.done();
            if (java.util.Arrays.equals(out.cPublic, out.sPublic)) {
                throw SecAggException.rejected("the two advertised keys must differ");
            }
            return out;
        }
    }

    /** Aggregator -> device: the signed AdvertiseKeys frames of the device's neighbours. */
    public static final class KeyBroadcast {
        public final long roundId;
        public final byte[] configDigest;
        public final List<byte[]> adverts;

        public KeyBroadcast(long roundId, byte[] configDigest, List<byte[]> adverts) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.adverts = adverts;
        }

        public byte[] encode() {
            Wire.Writer w = head(roundId, configDigest).u32(adverts.size());
            for (byte[] a : adverts) {
                w.blob(a);
            }
            return Wire.frame(KIND_KEY_BROADCAST, w.bytes(), null);
        }

        public static KeyBroadcast decode(byte[] data) throws SecAggException {
            Wire.Reader r = new Wire.Reader(Wire.unframe(data, KIND_KEY_BROADCAST).body);
            long roundId = r.u64();
            byte[] digest = r.raw(DIGEST_BYTES);
            KeyBroadcast out = new KeyBroadcast(roundId, digest, readBlobs(r));
            r.done();
            return out;
        }
    }

    /** Device -> aggregator (signed): one AES-GCM ciphertext of (b share, s share) per neighbour. */
    public static final class ShareKeys {
        public final long roundId;
        public final byte[] configDigest;
        public final long sender;
        public final List<Entry> shares;

        public ShareKeys(long roundId, byte[] configDigest, long sender, List<Entry> shares) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.sender = sender;
            this.shares = shares;
        }

        public byte[] encode(Wire.Signer signer) {
            Wire.Writer w = head(roundId, configDigest).u32(sender);
            return Wire.frame(KIND_SHARE_KEYS, writePairs(w, shares, false).bytes(), signer);
        }

        public static ShareKeys decode(byte[] data, KeyDirectory directory) throws SecAggException {
            Signed s = openSigned(data, KIND_SHARE_KEYS, directory);
            ShareKeys out = new ShareKeys(s.roundId, s.configDigest, s.sender, readPairs(s.reader, 0));
            s.reader.done();
            return out;
        }
    }

    /** Aggregator -> device: the ciphertexts addressed to {@code recipient}, by sender. */
    public static final class ShareDelivery {
        public final long roundId;
        public final byte[] configDigest;
        public final long recipient;
        public final List<Entry> shares;

        public ShareDelivery(long roundId, byte[] configDigest, long recipient, List<Entry> shares) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.recipient = recipient;
            this.shares = shares;
        }

        public byte[] encode() {
            Wire.Writer w = head(roundId, configDigest).u32(recipient);
            return Wire.frame(KIND_SHARE_DELIVERY, writePairs(w, shares, false).bytes(), null);
        }

        public static ShareDelivery decode(byte[] data) throws SecAggException {
            Wire.Reader r = new Wire.Reader(Wire.unframe(data, KIND_SHARE_DELIVERY).body);
            ShareDelivery out = new ShareDelivery(r.u64(), r.raw(DIGEST_BYTES), r.u32(), readPairs(r, 0));
            r.done();
            return out;
        }
    }

    /** Device -> aggregator (signed): y_u, 2M + 1 words (the last in Z_P61). */
    public static final class MaskedInput {
        public final long roundId;
        public final byte[] configDigest;
        public final long sender;
        public final long[] vector;

        public MaskedInput(long roundId, byte[] configDigest, long sender, long[] vector) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.sender = sender;
            this.vector = vector;
        }

        public byte[] encode(Wire.Signer signer) {
            return Wire.frame(KIND_MASKED_INPUT, head(roundId, configDigest).u32(sender).words(vector).bytes(),
                    signer);
        }

        public static MaskedInput decode(byte[] data, KeyDirectory directory) throws SecAggException {
            Signed s = openSigned(data, KIND_MASKED_INPUT, directory);
            MaskedInput out = new MaskedInput(s.roundId, s.configDigest, s.sender, s.reader.words(1 << 24));
            s.reader.done();
            return out;
        }
    }

    /** Aggregator -> device: U3, the devices whose masked input is in the sum, as a bitmap. */
    public static final class SurvivorSet {
        public final long roundId;
        public final byte[] configDigest;
        public final byte[] bitmap;

        public SurvivorSet(long roundId, byte[] configDigest, byte[] bitmap) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.bitmap = bitmap;
        }

        public byte[] encode() {
            return Wire.frame(KIND_SURVIVORS, head(roundId, configDigest).blob(bitmap).bytes(), null);
        }

        public static SurvivorSet decode(byte[] data) throws SecAggException {
            Wire.Reader r = new Wire.Reader(Wire.unframe(data, KIND_SURVIVORS).body);
            SurvivorSet out = new SurvivorSet(r.u64(), r.raw(DIGEST_BYTES), r.blob(1 << 14));
            r.done();
            return out;
        }
    }

    /** Device -> aggregator (signed): "I saw this survivor set" (its SHA-256 digest). */
    public static final class SurvivorAck {
        public final long roundId;
        public final byte[] configDigest;
        public final long sender;
        public final byte[] digest;

        public SurvivorAck(long roundId, byte[] configDigest, long sender, byte[] digest) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.sender = sender;
            this.digest = digest;
        }

        public byte[] encode(Wire.Signer signer) {
            return Wire.frame(KIND_ACK, head(roundId, configDigest).u32(sender).raw(digest).bytes(), signer);
        }

        public static SurvivorAck decode(byte[] data, KeyDirectory directory) throws SecAggException {
            Signed s = openSigned(data, KIND_ACK, directory);
            SurvivorAck out = new SurvivorAck(s.roundId, s.configDigest, s.sender, s.reader.raw(32));
            s.reader.done();
            return out;
        }
    }

    /** Aggregator -> device: the signed SurvivorAck frames of the device's neighbours. */
    public static final class AckSet {
        public final long roundId;
        public final byte[] configDigest;
        public final List<byte[]> acks;

        public AckSet(long roundId, byte[] configDigest, List<byte[]> acks) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.acks = acks;
        }

        public byte[] encode() {
            Wire.Writer w = head(roundId, configDigest).u32(acks.size());
            for (byte[] a : acks) {
                w.blob(a);
            }
            return Wire.frame(KIND_ACK_SET, w.bytes(), null);
        }

        public static AckSet decode(byte[] data) throws SecAggException {
            Wire.Reader r = new Wire.Reader(Wire.unframe(data, KIND_ACK_SET).body);
            long roundId = r.u64();
            byte[] digest = r.raw(DIGEST_BYTES);
            AckSet out = new AckSet(roundId, digest, readBlobs(r));
            r.done();
            return out;
        }
    }

    /** Device -> aggregator (signed): b shares of surviving neighbours, s shares of dropped ones. */
    public static final class UnmaskShares {
        public final long roundId;
        public final byte[] configDigest;
        public final long sender;
        public final List<Entry> bShares;
        public final List<Entry> sShares;

        public UnmaskShares(long roundId, byte[] configDigest, long sender, List<Entry> bShares, List<Entry> sShares) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.sender = sender;
            this.bShares = bShares;
            this.sShares = sShares;
        }

        public byte[] encode(Wire.Signer signer) {
            Wire.Writer w = writePairs(head(roundId, configDigest).u32(sender), bShares, true);
            return Wire.frame(KIND_UNMASK, writePairs(w, sShares, true).bytes(), signer);
        }

        public static UnmaskShares decode(byte[] data, KeyDirectory directory) throws SecAggException {
            Signed s = openSigned(data, KIND_UNMASK, directory);
            UnmaskShares out = new UnmaskShares(s.roundId, s.configDigest, s.sender, readPairs(s.reader, Shamir.SHARE_BYTES),
                    readPairs(s.reader, Shamir.SHARE_BYTES));
            s.reader.done();
            Set<Long> b = new HashSet<>();
            for (Entry e : out.bShares) {
                b.add(e.device);
            }
            for (Entry e : out.sShares) {
                if (b.contains(e.device)) {
                    throw SecAggException.rejected("both secrets of one device revealed");
                }
            }
            return out;
        }
    }

    /** Aggregator -> coordinator: Σ x_u over U3 in Z_2^64 (2M words), the checksum sum in Z_P61, and the signed
     *  SurvivorAck frames that bind the survivor bitmap to what the devices saw. */
    public static final class AggregateResult {
        public final long roundId;
        public final byte[] configDigest;
        public final byte[] survivorsBitmap;
        public final long[] sums;
        public final long checksum;
        public final List<byte[]> acks;

        public AggregateResult(long roundId, byte[] configDigest, byte[] survivorsBitmap, long[] sums, long checksum,
                               List<byte[]> acks) {
            this.roundId = roundId;
            this.configDigest = configDigest;
            this.survivorsBitmap = survivorsBitmap;
            this.sums = sums;
            this.checksum = checksum;
            this.acks = acks;
        }

        public byte[] encode() {
            Wire.Writer w = head(roundId, configDigest).blob(survivorsBitmap).words(sums).u64(checksum).u32(acks.size());
            for (byte[] a : acks) {
                w.blob(a);
            }
            return Wire.frame(KIND_AGGREGATE, w.bytes(), null);
        }

        public static AggregateResult decode(byte[] data) throws SecAggException {
            Wire.Reader r = new Wire.Reader(Wire.unframe(data, KIND_AGGREGATE).body);
            long roundId = r.u64();
            byte[] digest = r.raw(DIGEST_BYTES), bitmap = r.blob(1 << 14);
            long[] sums = r.words(1 << 24);
            long checksum = r.u64();
            List<byte[]> acks = readBlobs(r);
            r.done();
            if (acks.size() > 8L * bitmap.length) {
                throw SecAggException.rejected("more acknowledgements than participants");
            }
            return new AggregateResult(roundId, digest, bitmap, sums, checksum, acks);
        }
    }
}
