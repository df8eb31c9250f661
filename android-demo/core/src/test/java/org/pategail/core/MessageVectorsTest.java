package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import org.json.JSONObject;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.Messages;
import org.pategail.core.secagg.RoundConfig;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;

/** Every message type round-trips byte for byte against the Python SDK's frames (messages.json). */
class MessageVectorsTest {
    static JSONObject v;
    static KeyDirectory directory;
    static Map<Long, byte[]> signing = new HashMap<>();

    @BeforeAll
    @SuppressWarnings("unchecked")
    static void load() throws Exception {
        v = Vectors.load("messages.json");
        Map<Long, KeyDirectory.DeviceKeys> devices = new HashMap<>();
        JSONObject d = v.getJSONObject("devices");
        for (Iterator<String> it = d.keys(); it.hasNext(); ) {
            String id = it.next();
            JSONObject k = d.getJSONObject(id);
            devices.put(Long.parseLong(id), new KeyDirectory.DeviceKeys(Vectors.hex(k, "signing_public"),
                    Vectors.hex(k, "envelope_public")));
            signing.put(Long.parseLong(id), Vectors.hex(k, "signing_private"));
        }
        directory = new KeyDirectory(Vectors.hex(v, "coordinator_public"), devices);
    }

    static Wire.Signer signer(long device) {
        return data -> Crypto.sign(signing.get(device), data);
    }

    byte[] frame(String name) throws Exception {
        return Vectors.hex(v.getJSONObject("secagg"), name);
    }

    @Test
    void roundConfigParsesAndReencodes() throws Exception {
        JSONObject c = v.getJSONObject("round_config");
        byte[] frame = Vectors.hex(c, "frame");
        RoundConfig cfg = RoundConfig.fromSignedBytes(frame, directory.coordinator());
        assertEquals(c.getLong("round_id"), cfg.roundId);
        assertArrayEquals(Vectors.longs(c.getJSONArray("participants")), cfg.participants);
        assertEquals(c.getInt("num_queries"), cfg.numQueries);
        assertEquals(c.getInt("n_min"), cfg.nMin);
        assertEquals(c.getInt("threshold"), cfg.threshold);
        assertEquals(c.getDouble("sum_noise_scale"), cfg.sumNoiseScale);
        assertEquals(c.getDouble("sq_sum_noise_scale"), cfg.sqSumNoiseScale);
        assertArrayEquals(Vectors.hex(c, "round_seed"), cfg.roundSeed);
        assertEquals(c.getLong("aggregator"), cfg.aggregator);
        assertEquals(c.getInt("colluders"), cfg.colluders);
        assertArrayEquals(Vectors.hex(c, "checksum_commitment"), cfg.checksumCommitment);
        assertEquals(3, cfg.certificateSize());           // floor((3 participants + 1 colluder) / 2) + 1
        assertArrayEquals(Vectors.hex(c, "digest"), cfg.digest());
        byte[] coordinatorKey = Vectors.hex(v, "coordinator_private");
        assertArrayEquals(frame, cfg.toSignedBytes(data -> Crypto.sign(coordinatorKey, data)));
        JSONObject refused = v.getJSONObject("round_config_refused");
        for (String name : new String[]{"wrong_signer", "unsigned"}) {
            SecAggException e = assertThrows(SecAggException.class,
                    () -> RoundConfig.fromSignedBytes(Vectors.hex(refused, name), directory.coordinator()), name);
            assertEquals(SecAggException.Kind.MESSAGE_REJECTED, e.kind());
        }
        byte[] flipped = frame.clone();
        flipped[20] ^= 1;
        assertThrows(SecAggException.class, () -> RoundConfig.fromSignedBytes(flipped, directory.coordinator()));
    }

    /** Device 5's client on the Python SDK's signed configuration and envelope of one start_round case. */
    static SecAggClient.Phase startRound(String name) throws Exception {
        JSONObject k = v.getJSONObject("devices").getJSONObject("5");
        SecAggClient client = new SecAggClient(5, new DeviceIdentity(Vectors.hex(k, "signing_private"),
                Vectors.hex(k, "envelope_private")), directory, new java.security.SecureRandom());
        JSONObject c = v.getJSONObject("start_round").getJSONObject(name);
        try {
            byte[] advert = client.startRound(Vectors.hex(c, "config"), Vectors.hex(c, "envelope"));
            assertEquals(5, Messages.AdvertiseKeys.decode(advert, directory).sender);
            return client.phase();
        } catch (SecAggException err) {
            assertEquals(SecAggClient.Phase.IDLE, client.phase());   // nothing changed
            throw err;
        }
    }

    @Test
    void startRoundOpensOnlyTheCommittedChecksumKey() throws Exception {
        assertEquals(SecAggClient.Phase.ADVERTISED, startRound("accepted"));
        // the envelope holds another key than the one the signed configuration commits to
        SecAggException e = assertThrows(SecAggException.class, () -> startRound("uncommitted_key"));
        assertEquals(SecAggException.Kind.MESSAGE_REJECTED, e.kind());
        assertTrue(e.getMessage().contains("not the one the round configuration commits to"), e.getMessage());
    }

    @Test
    void startRoundRefusesAThresholdBelowTheSecureThreshold() throws Exception {
        // all pairs, 3 participants, 1 colluder: the floor is 3; the signed threshold 2 is a strict majority
        SecAggException e = assertThrows(SecAggException.class, () -> startRound("threshold_below_floor"));
        assertEquals(SecAggException.Kind.PROTOCOL, e.kind());
        assertTrue(e.getMessage().contains("Shamir threshold 2 is below this device's floor 3 for 3 share holders "
                + "and 1 colluders"), e.getMessage());
    }

    @Test
    void secAggMessagesRoundTripByteForByte() throws Exception {
        byte[] f;
        f = frame("envelope");
        assertArrayEquals(f, Messages.ChecksumEnvelope.decode(f).encode());
        f = frame("advertise");
        Messages.AdvertiseKeys adv = Messages.AdvertiseKeys.decode(f, directory);
        assertEquals(3, adv.sender);
        assertArrayEquals(f, adv.encode(signer(3)));
        f = frame("key_broadcast");
        Messages.KeyBroadcast kb = Messages.KeyBroadcast.decode(f);
        assertEquals(2, kb.adverts.size());
        assertEquals(8, Messages.AdvertiseKeys.decode(kb.adverts.get(1), directory).sender);
        assertArrayEquals(f, kb.encode());
        f = frame("share_keys");
        Messages.ShareKeys sk = Messages.ShareKeys.decode(f, directory);
        assertEquals(94, sk.shares.get(1).data.length);
        assertArrayEquals(f, sk.encode(signer(5)));
        f = frame("share_delivery");
        assertArrayEquals(f, Messages.ShareDelivery.decode(f).encode());
        f = frame("masked_input");
        Messages.MaskedInput mi = Messages.MaskedInput.decode(f, directory);
        assertArrayEquals(Vectors.words(v.getJSONArray("masked_input_vector")), mi.vector);
        assertArrayEquals(f, mi.encode(signer(8)));
        f = frame("survivors");
        Messages.SurvivorSet ss = Messages.SurvivorSet.decode(f);
        assertEquals(new java.util.TreeSet<>(java.util.Arrays.asList(3L, 8L)),
                Messages.fromBitmap(ss.bitmap, new long[]{3, 5, 8}));
        assertArrayEquals(f, ss.encode());
        f = frame("ack");
        assertArrayEquals(f, Messages.SurvivorAck.decode(f, directory).encode(signer(3)));
        f = frame("ack_set");
        assertArrayEquals(f, Messages.AckSet.decode(f).encode());
        f = frame("unmask");
        assertArrayEquals(f, Messages.UnmaskShares.decode(f, directory).encode(signer(5)));
        f = frame("aggregate");
        Messages.AggregateResult ar = Messages.AggregateResult.decode(f);
        assertEquals((1L << 61) - 5, ar.checksum);
        assertArrayEquals(f, ar.encode());
    }

    @Test
    void secAggRefusals() throws Exception {
        JSONObject r = v.getJSONObject("secagg_refused");
        for (String name : new String[]{"advertise_bad_signature", "advertise_unsigned", "advertise_same_keys",
                "advertise_unknown_device"}) {
            SecAggException e = assertThrows(SecAggException.class,
                    () -> Messages.AdvertiseKeys.decode(Vectors.hex(r, name), directory), name);
            assertEquals(SecAggException.Kind.MESSAGE_REJECTED, e.kind(), name);
        }
        assertThrows(SecAggException.class, () -> Messages.UnmaskShares.decode(Vectors.hex(r, "unmask_both_secrets"), directory));
        assertThrows(SecAggException.class, () -> Messages.ShareKeys.decode(Vectors.hex(r, "share_keys_duplicate"), directory));
        assertThrows(SecAggException.class, () -> Messages.SurvivorSet.decode(Vectors.hex(r, "survivors_trailing")));
        // a frame of one kind is never read as another
        assertThrows(SecAggException.class, () -> Messages.SurvivorAck.decode(frame("advertise"), directory));
        assertThrows(SecAggException.class, () -> Messages.fromBitmap(new byte[]{(byte) 0xE1}, new long[]{3, 5, 8}));
    }

    @Test
    void deviceMessagesRoundTripByteForByte() throws Exception {
        JSONObject d = v.getJSONObject("device");
        for (String name : new String[]{"policy_update", "initial_states_request", "ack_round", "ack_policy", "ack_initial",
                "error", "error_unicode", "round_request", "cell_release_request", "ack_cells"}) {
            byte[] frame = Vectors.hex(d, name);
            DeviceMessages.Message m = DeviceMessages.fromBytes(frame, DeviceMessages.Limits.DEFAULT, 4210);
            assertArrayEquals(frame, DeviceMessages.toBytes(m), name);
        }
        DeviceMessages.RoundRequest rr = (DeviceMessages.RoundRequest) DeviceMessages.fromBytes(
                Vectors.hex(d, "round_request"), DeviceMessages.Limits.DEFAULT, 4210);
        JSONObject f = v.getJSONObject("round_request_fields");
        assertEquals(f.getLong("round"), rr.round);
        assertEquals(f.getLong("k_steps"), rr.kSteps);
        assertEquals(f.getLong("batch_size"), rr.batchSize);
        assertEquals(f.getInt("n_days"), rr.days.length);
        assertArrayEquals(Vectors.ints(f.getJSONArray("days_row0")), rr.days[0]);
        assertArrayEquals(Vectors.ints(f.getJSONArray("homes")), rr.homes);
        DeviceMessages.CellReleaseRequest cr = (DeviceMessages.CellReleaseRequest) DeviceMessages.fromBytes(
                Vectors.hex(d, "cell_release_request"), DeviceMessages.Limits.DEFAULT, 4210);
        JSONObject cf = v.getJSONObject("cell_release_request_fields");
        assertEquals(cf.getLong("round"), cr.round);
        assertEquals(cf.getLong("max_cells"), cr.maxCells);
        assertEquals("cell_release_request", ((DeviceMessages.Ack) DeviceMessages.fromBytes(
                Vectors.hex(d, "ack_cells"), DeviceMessages.Limits.DEFAULT, 0)).kind);
        DeviceMessages.ErrorReply e = (DeviceMessages.ErrorReply) DeviceMessages.fromBytes(
                Vectors.hex(d, "error_unicode"), DeviceMessages.Limits.DEFAULT, 0);
        assertTrue(e.message.endsWith("ünïcödé"));
    }

    @Test
    void anInitialStatesRequestCarriesItsRegionSizeInATrailer() throws Exception {
        JSONObject g = Vectors.load("gaussian.json").getJSONObject("messages");
        byte[] frame = Vectors.hex(g, "initial_states_regions");
        DeviceMessages.InitialStatesRequest m = (DeviceMessages.InitialStatesRequest) DeviceMessages.fromBytes(
                frame, DeviceMessages.Limits.DEFAULT, 4210);
        assertEquals(5, m.round);
        assertEquals(16, m.regionCells);
        assertArrayEquals(frame, DeviceMessages.toBytes(m));
        assertArrayEquals(Vectors.hex(g, "initial_states_plain"),
                DeviceMessages.toBytes(new DeviceMessages.InitialStatesRequest(5)));
        MessageError e = assertThrows(MessageError.class, () -> DeviceMessages.fromBytes(
                Vectors.hex(g, "initial_states_trailer_zero"), DeviceMessages.Limits.DEFAULT, 4210));
        assertEquals("malformed", e.code);
        assertEquals("region_cells trailer of 0", e.getMessage());
    }

    @Test
    @SuppressWarnings("unchecked")
    void malformedDeviceMessagesGetThePythonSdksErrorCodesAndReplies() throws Exception {
        JSONObject r = v.getJSONObject("device_refused");
        int n = 0;
        for (Iterator<String> it = r.keys(); it.hasNext(); n++) {
            String name = it.next();
            JSONObject c = r.getJSONObject(name);
            byte[] frame = Vectors.hex(c, "frame");
            MessageError e = assertThrows(MessageError.class,
                    () -> DeviceMessages.fromBytes(frame, DeviceMessages.Limits.DEFAULT, 4210), name);
            assertEquals(c.getString("code"), e.code, name);
            DeviceMessages.ErrorReply reply = DeviceMessages.ErrorReply.fromError(DeviceMessages.peekRound(frame), e,
                    DeviceMessages.Limits.DEFAULT);
            DeviceMessages.ErrorReply want = (DeviceMessages.ErrorReply) DeviceMessages.fromBytes(
                    Vectors.hex(c, "reply"), DeviceMessages.Limits.DEFAULT, 0);
            assertEquals(want.round, reply.round, name);
            assertEquals(want.code, reply.code, name);
            assertEquals(want.message, reply.message, name);
        }
        assertTrue(n >= 21);
    }
}
