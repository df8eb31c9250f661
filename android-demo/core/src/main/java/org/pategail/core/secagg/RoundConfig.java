package org.pategail.core.secagg;

/**
 * One round's public parameters, signed by the coordinator (the Python SDK's {@code config.RoundConfig}).
 * {@link #fromSignedBytes} verifies the signature and every bound a device relies on for its privacy.
 */
public final class RoundConfig {
    public static final int KIND_CONFIG = 1;
    /** Aggregator id meaning "the coordinator aggregates this round". */
    public static final long COORDINATOR = 0xFFFFFFFFL;
    /** Tag of the configuration trailer of a Gaussian-mechanism round. */
    public static final int MECHANISM_GAUSSIAN = 1;
    /** {@link #block} of a Gaussian round over a signed vector (a model delta, entries in [-1, 1]). */
    public static final int DELTA_BLOCK = 255;

    public final long roundId;
    public final long[] participants;
    public final int numQueries;
    public final int nMin;
    public final int threshold;
    public final int degree;
    public final double sumNoiseScale;
    public final double sqSumNoiseScale;
    public final byte[] roundSeed;
    public final byte[] envelopePublic;
    /** t: devices that may collude with the coordinator; noise shares are sized for n_min - t. */
    public final int colluders;
    public final long aggregator;
    public final int fracBits;
    /**
     * SHA-256 of the round's checksum key K ({@link Checksum#keyCommitment}): every device checks the key in its
     * envelope against it, so a coordinator cannot hand one device a key of its own (the aggregate's checksum
     * would then carry a weighted sum of that device's vector under weights only that device has).
     */
    public final byte[] checksumCommitment;
    /**
     * "laplace": the device uploads D and D² with discrete-Laplace shares of {@link #sumNoiseScale} /
     * {@link #sqSumNoiseScale}; "gaussian": ONE vector of M values (slots M..2M-1 stay zero), L2-clipped to
     * {@link #clipNorm}, with distributed discrete-Gaussian shares of total standard deviation
     * {@link #sumNoiseScale}. Signed like every other field.
     */
    public final String mechanism;
    /**
     * Gaussian mechanism: 0 = the pending vector as it is (entries in [0, 1]); K = the per-decision scores
     * centred (D - 1/2) and averaged over blocks of K decisions of a day ({@link GaussianInput});
     * {@link #DELTA_BLOCK} = a signed vector as it is.
     */
    public final int block;
    /** Gaussian mechanism: the L2 norm (value units) a device clips its vector to — the sensitivity. */
    public final double clipNorm;

    /** A Laplace-mechanism round. */
    public RoundConfig(long roundId, long[] participants, int numQueries, int nMin, int threshold, int degree,
                       double sumNoiseScale, double sqSumNoiseScale, byte[] roundSeed, byte[] envelopePublic,
                       int colluders, long aggregator, int fracBits, byte[] checksumCommitment) {
        this(roundId, participants, numQueries, nMin, threshold, degree, sumNoiseScale, sqSumNoiseScale, roundSeed,
                envelopePublic, colluders, aggregator, fracBits, checksumCommitment, "laplace", 0, 0.0);
    }

    /** A round of either mechanism ({@code block} and {@code clipNorm} belong to the Gaussian one). */
    public RoundConfig(long roundId, long[] participants, int numQueries, int nMin, int threshold, int degree,
                       double sumNoiseScale, double sqSumNoiseScale, byte[] roundSeed, byte[] envelopePublic,
                       int colluders, long aggregator, int fracBits, byte[] checksumCommitment, String mechanism,
                       int block, double clipNorm) {
        this.roundId = roundId;
        this.participants = participants.clone();
        this.numQueries = numQueries;
        this.nMin = nMin;
        this.threshold = threshold;
        this.degree = degree;
        this.sumNoiseScale = sumNoiseScale;
        this.sqSumNoiseScale = sqSumNoiseScale;
        this.roundSeed = roundSeed.clone();
        this.envelopePublic = envelopePublic.clone();
        this.colluders = colluders;
        this.aggregator = aggregator;
        this.fracBits = fracBits;
        this.checksumCommitment = checksumCommitment.clone();
        this.mechanism = mechanism;
        this.block = block;
        this.clipNorm = clipNorm;
        validate();
    }

    private void validate() {
        int n = participants.length;
        if (n < 1 || n > FixedPoint.MAX_DEVICES) {
            throw new IllegalArgumentException("participants must be 1.." + FixedPoint.MAX_DEVICES + " sorted distinct ids");
        }
        for (int i = 0; i < n; i++) {
            if (participants[i] < 0 || (i > 0 && participants[i] <= participants[i - 1])) {
                throw new IllegalArgumentException("participants must be sorted distinct ids");
            }
            if (participants[i] == aggregator) {
                throw new IllegalArgumentException("the aggregator device cannot also contribute");
            }
        }
        if (nMin < 1 || nMin > n) {
            throw new IllegalArgumentException("n_min=" + nMin + " must be in [1, " + n + "]");
        }
        if (colluders < 0 || colluders >= nMin) {
            throw new IllegalArgumentException("colluders=" + colluders + " must be in [0, n_min)");
        }
        if (degree < 0 || degree % 2 != 0) {
            throw new IllegalArgumentException("degree must be 0 (all pairs) or even");
        }
        if (threshold < 1 || threshold > holders()) {
            throw new IllegalArgumentException("threshold " + threshold + " must be in [1, " + holders() + "]");
        }
        if (numQueries < 1 || numQueries > (1 << 22)) {
            throw new IllegalArgumentException("num_queries out of range");
        }
        if (fracBits != FixedPoint.FRAC_BITS) {
            throw new IllegalArgumentException("frac_bits " + fracBits + " != SDK's " + FixedPoint.FRAC_BITS);
        }
        if (roundSeed.length != 32 || envelopePublic.length != 32 || checksumCommitment.length != 32) {
            throw new IllegalArgumentException("round_seed, envelope_public and checksum_commitment are 32 bytes");
        }
        if (!"laplace".equals(mechanism) && !"gaussian".equals(mechanism)) {
            throw new IllegalArgumentException("unknown mechanism '" + mechanism + "'");
        }
        if (isGaussian()) {
            if (sqSumNoiseScale != 0 || !((block >= 0 && block <= 47) || block == DELTA_BLOCK)) {
                throw new IllegalArgumentException("the Gaussian mechanism releases no Σ D² and blocks of 0..47 "
                        + "decisions (or " + DELTA_BLOCK + ": a signed vector)");
            }
            if (!(clipNorm > 0 && clipNorm <= Math.sqrt(numQueries))) {
                throw new IllegalArgumentException("clip_norm " + clipNorm + " must be in (0, √M]");
            }
        } else if (block != 0 || clipNorm != 0) {
            throw new IllegalArgumentException("block and clip_norm belong to the Gaussian mechanism");
        }
        for (double scale : new double[]{sumNoiseScale, sqSumNoiseScale}) {
            double q = scale * FixedPoint.SCALE;
            if (!(q == 0 || (q >= 1 && q <= FixedPoint.MAX_NOISE_SCALE_QUANTA))) {
                throw new IllegalArgumentException("noise scale " + scale + " out of range");
            }
            if ((double) n * FixedPoint.SCALE + FixedPoint.mechanismNoiseBound(mechanism, n, q, noiseDivisor(), 64.0)
                    >= FixedPoint.SAFE_ABS_SUM) {
                throw new IllegalArgumentException("sums could wrap around Z_2^64 with these parameters");
            }
        }
    }

    public boolean isGaussian() {
        return "gaussian".equals(mechanism);
    }

    /** How many devices' noise shares add up to the target noise: n_min - colluders. */
    public int noiseDivisor() {
        return nMin - colluders;
    }

    /** SHA-256 of the configuration's body: every message and key of the round is bound to it. */
    public byte[] digest() {
        try {
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            md.update("pategail-secagg/round-config".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            md.update(body());
            return md.digest();
        } catch (java.security.NoSuchAlgorithmException err) {
            throw new IllegalStateException(err);
        }
    }

    /** Devices holding shares of one device's secrets: its neighbours and itself. */
    public int holders() {
        int n = participants.length;
        return degree == 0 || degree >= n - 1 ? n : degree + 1;
    }

    /** Participants that must sign one survivor set before an honest device reveals any share
     *  ({@link NeighbourGraph#certificateSize}). */
    public int certificateSize() {
        return NeighbourGraph.certificateSize(participants.length, colluders);
    }

    /** Position of {@code device} in the participant list, plus one: its Shamir x-coordinate. */
    public int shareX(long device) {
        for (int i = 0; i < participants.length; i++) {
            if (participants[i] == device) {
                return i + 1;
            }
        }
        throw new IllegalArgumentException("device " + device + " is not a participant");
    }

    public boolean isParticipant(long device) {
        for (long p : participants) {
            if (p == device) {
                return true;
            }
        }
        return false;
    }

    public byte[] body() {
        Wire.Writer w = new Wire.Writer().u64(roundId).u32(participants.length);
        for (long p : participants) {
            w.u32(p);
        }
        w.u32(numQueries).u32(nMin).u32(threshold).u32(degree).f64(sumNoiseScale).f64(sqSumNoiseScale);
        w.raw(roundSeed).raw(envelopePublic).u32(colluders).u32(aggregator).u8(fracBits).raw(checksumCommitment);
        if (isGaussian()) {             // a trailer: Laplace configurations end before it
            w.u8(MECHANISM_GAUSSIAN).u8(block).f64(clipNorm);
        }
        return w.bytes();
    }

    public byte[] toSignedBytes(Wire.Signer signer) {
        return Wire.frame(KIND_CONFIG, body(), signer);
    }

    /** Parse and verify the coordinator's signature; anything wrong is a rejected message. */
    public static RoundConfig fromSignedBytes(byte[] data, byte[] coordinatorPublic) throws SecAggException {
        Wire.Unframed f = Wire.unframe(data, KIND_CONFIG);
        if (!Crypto.verify(coordinatorPublic, f.signature, f.signed)) {
            throw SecAggException.rejected("round configuration not signed by the coordinator");
        }
        Wire.Reader r = new Wire.Reader(f.body);
        long roundId = r.u64();
        int[] raw = r.u32s(1 << 22);
        long[] participants = new long[raw.length];
        for (int i = 0; i < raw.length; i++) {
            participants[i] = raw[i] & 0xFFFFFFFFL;
        }
        long numQueries = r.u32(), nMin = r.u32(), threshold = r.u32(), degree = r.u32();
        double s1 = r.f64(), s2 = r.f64();
        byte[] seed = r.raw(32), env = r.raw(32);
        long colluders = r.u32();
        long aggregator = r.u32();
        int frac = r.u8();
        byte[] commitment = r.raw(32);
        String mechanism = "laplace";
        int block = 0;
        double clipNorm = 0.0;
        if (r.remaining() > 0) {
            if (r.u8() != MECHANISM_GAUSSIAN) {
                throw SecAggException.rejected("round configuration with an unknown mechanism");
            }
            mechanism = "gaussian";
            block = r.u8();
            clipNorm = r.f64();
        }
        r.done();
        if (numQueries > Integer.MAX_VALUE || nMin > Integer.MAX_VALUE || threshold > Integer.MAX_VALUE
                || degree > Integer.MAX_VALUE || colluders > Integer.MAX_VALUE) {
            throw SecAggException.rejected("invalid round configuration: field out of range");
        }
        try {
            return new RoundConfig(roundId, participants, (int) numQueries, (int) nMin, (int) threshold, (int) degree,
                    s1, s2, seed, env, (int) colluders, aggregator, frac, commitment, mechanism, block, clipNorm);
        } catch (IllegalArgumentException err) {
            throw SecAggException.rejected("invalid round configuration: " + err.getMessage());
        }
    }
}
