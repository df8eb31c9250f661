package org.pategail.core.secagg;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

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
    }

    private final byte[] coordinator;
    private final Map<Long, DeviceKeys> devices;

    public KeyDirectory(byte[] coordinator, Map<Long, DeviceKeys> devices) {
        this.coordinator = coordinator.clone();
        this.devices = Collections.unmodifiableMap(new HashMap<>(devices));
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
}
