package org.pategail.core.secagg;

import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.nio.charset.StandardCharsets;

/** The PKI every party holds: the coordinator's Ed25519 key and each enrolled device's public keys. */
public final class KeyDirectory {
    /** A device's long-term public keys (raw 32 bytes each). */
    public static final class DeviceKeys {
        public final byte[] signing;
        public final byte[] envelope;

        public DeviceKeys(byte[] signing, byte[] envelope) {
            this.signing = signing.clone();
            this.envelope = envelope.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof DeviceKeys && Arrays.equals(signing, ((DeviceKeys) o).signing)
                    && Arrays.equals(envelope, ((DeviceKeys) o).envelope);
        }

        @Override
        public int hashCode() {
            return 31 * Arrays.hashCode(signing) + Arrays.hashCode(envelope);
        }
    }

    /** The network frames' protocol (the Python SDK's {@code pategail.sdk.net.frames}): magic, version. */
    public static final byte[] NET_MAGIC = {'P', 'G', 'N', 'T'};
    public static final int NET_VERSION = 1;
    /** The frame kind of a signed directory ({@code KIND_DIRECTORY}). */
    public static final int KIND_DIRECTORY = 3;
    private static final byte[] NET_DOMAIN = "pategail-net-v1/frame".getBytes(StandardCharsets.US_ASCII);
    private static final long MAX_DEVICES = 1L << 20;

    private final byte[] coordinator;
    private final Map<Long, DeviceKeys> devices;

    public KeyDirectory(byte[] coordinator, Map<Long, DeviceKeys> devices) {
        this.coordinator = coordinator.clone();
        this.devices = Collections.unmodifiableMap(new HashMap<>(devices));
    }

    /**
     * The directory signed by its coordinator, as a network frame: the bytes of the Python SDK's
     * {@code directory_to_bytes} (devices in increasing id order; {@code signer} signs the domain-prefixed head).
     */
    public byte[] toSignedBytes(Wire.Signer signer) {
        Wire.Writer w = new Wire.Writer().raw(coordinator).u32(devices.size());
        for (Map.Entry<Long, DeviceKeys> e : new TreeMap<>(devices).entrySet()) {
            w.u32(e.getKey()).raw(e.getValue().signing).raw(e.getValue().envelope);
        }
        return Wire.frame(NET_MAGIC, NET_VERSION, KIND_DIRECTORY, w.bytes(),
                head -> signer.sign(Bytes.concat(NET_DOMAIN, head)));
    }

    /**
     * A directory from its signed frame, checked as the Python SDK's {@code directory_from_bytes} checks it:
     * signed by {@code coordinator} and naming it as the coordinator. Anything else is a rejected message.
     */
    public static KeyDirectory fromSignedBytes(byte[] data, byte[] coordinator) throws SecAggException {
        Wire.Unframed f = Wire.unframe(data, NET_MAGIC, NET_VERSION, KIND_DIRECTORY);
        if (f.signature.length != Crypto.SIGNATURE_BYTES) {
            throw SecAggException.rejected("unsigned frame");
        }
        if (!Crypto.verify(coordinator, f.signature, Bytes.concat(NET_DOMAIN, f.signed))) {
            throw SecAggException.rejected("bad signature");
        }
        Wire.Reader r = new Wire.Reader(f.body);
        if (!Arrays.equals(r.raw(32), coordinator)) {
            throw SecAggException.rejected("the directory names another coordinator");
        }
        long n = r.u32();
        if (n > MAX_DEVICES) {
            throw SecAggException.rejected("directory too long");
        }
        Map<Long, DeviceKeys> devices = new HashMap<>();
        for (long i = 0; i < n; i++) {
            long id = r.u32();
            devices.put(id, new DeviceKeys(r.raw(32), r.raw(32)));
        }
        r.done();
        return new KeyDirectory(coordinator, devices);
    }

    public byte[] coordinator() {
        return coordinator.clone();
    }

    /** The Ed25519 key of {@code device}; an unknown device is a rejected message. */
    public byte[] signingKey(long device) throws SecAggException {
        DeviceKeys k = devices.get(device);
        if (k == null) {
            throw SecAggException.rejected("unknown device " + device);
        }
        return k.signing;
    }

    public Map<Long, DeviceKeys> devices() {
        return devices;
    }

    /** Equal directories hold the same keys (the same coordinator, the same devices). */
    @Override
    public boolean equals(Object o) {
        return o instanceof KeyDirectory && Arrays.equals(coordinator, ((KeyDirectory) o).coordinator)
                && devices.equals(((KeyDirectory) o).devices);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(coordinator) + devices.hashCode();
    }
}
