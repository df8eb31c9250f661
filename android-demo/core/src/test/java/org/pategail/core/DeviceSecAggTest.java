package org.pategail.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import org.json.JSONObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;
import org.pategail.core.secagg.Wire;
import org.pategail.core.tools.ReplayTrainer;

/**
 * The device's secure-aggregation entry point ({@link Device#secaggStep}) against an aggregator that sends
 * anything: wrong frame counts, random bytes, truncated, extended and altered frames are typed refusals
 * ({@link SecAggException}) that leave the round where it was; and a masked input aborted for too few
 * shares leaves the pending vector and the privacy ledger as they were.
 */
class DeviceSecAggTest {
    static final long ME = 1;
    @TempDir
    File tmp;

    /** A device (id 1) with a pending vector: the reference RoundRequest answered. */
    Device pendingDevice() throws Exception {
        JSONObject ref = Vectors.load("device.json");
        Device d = new Device(new File(tmp, "device"), ME, new Random(ref.getLong("seed")),
                DeviceMessages.Limits.DEFAULT, new ReplayTrainer(new File(Vectors.dir(), "device.json"), 1e-6),
                null, new SecureRandom());
        d.installBundle(new File(Vectors.dir(), "bundle"), null);
        d.addDays(Vectors.intRows(Vectors.load("features.json").getJSONArray("days")));
        d.handle(Vectors.hex(Vectors.load("messages.json").getJSONObject("device"), "round_request"));
        assertNotNull(d.pending());
        return d;
    }

    /** A round of the device and four Java clients (all pairs: t = 3, certificate 3) over its M values. */
    static SecAggRound round(Device d) {
        return new SecAggRound(1, new long[]{ME, 10, 13, 16, 19}, d.pending().length, 3, 3, 0, 0,
                Collections.singletonMap(ME, d.identity()));
    }

    interface Step {
        byte[] call(byte[] frame) throws Exception;
    }

    /** Random bytes, the frame cut short, extended, and with each byte altered: each a typed refusal. */
    static void fuzz(String what, byte[] valid, Step step) throws Exception {
        Random rng = new Random(what.hashCode());
        List<byte[]> variants = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            byte[] junk = new byte[rng.nextInt(3 * valid.length + 20)];
            rng.nextBytes(junk);
            variants.add(junk);
        }
        byte[] framed = valid.clone();          // random body behind a valid head: past the frame checks
        for (int i = 10; i < framed.length; i++) {
            framed[i] = (byte) rng.nextInt();
        }
        variants.add(framed);
        for (int n = 0; n < valid.length; n += 1 + valid.length / 60) {
            variants.add(Arrays.copyOf(valid, n));
        }
        variants.add(Arrays.copyOf(valid, valid.length + 1));
        variants.add(Arrays.copyOf(valid, valid.length + 300));
        int stride = 1 + valid.length / 300;      // every byte of a small frame; 300 spread over a large one
        for (int i = 0; i < valid.length; i += stride) {
            byte[] flipped = valid.clone();
            flipped[i] ^= (byte) (1 << (i % 8));
            variants.add(flipped);
        }
        for (int i = 0; i < variants.size(); i++) {
            byte[] v = variants.get(i);
            try {
                step.call(v);
                fail(what + ": variant " + i + " (" + v.length + " bytes) was accepted");
            } catch (SecAggException expected) {
                // a typed refusal: what the caller's loop handles
            } catch (Exception | Error err) {
                throw new AssertionError(what + ": variant " + i + " (" + v.length + " bytes) escaped as "
                        + err, err);
            }
        }
    }

    static SecAggException refusal(SecAggException.Kind kind, org.junit.jupiter.api.function.Executable call) {
        SecAggException e = assertThrows(SecAggException.class, call);
        assertEquals(kind, e.kind(), e.getMessage());
        return e;
    }

    @Test
    void wrongFrameCountsAreTypedRefusals() throws Exception {
        Device d = pendingDevice();
        SecAggRound r = round(d);
        KeyDirectory dir = r.directory;
        byte[] cfg = r.signedConfig(), env = r.envelope(ME);
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "advertise", cfg));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "advertise", cfg, env, env));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "advertise", cfg, null));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "advertise", (byte[][]) null));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "share"));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "input", env, env));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "ack", (byte[]) null));
        refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> d.secaggStep(dir, "unmask", env, cfg));
        refusal(SecAggException.Kind.PROTOCOL, () -> d.secaggStep(dir, "finish", cfg));
        refusal(SecAggException.Kind.PROTOCOL, () -> d.secaggStep(null, "share", cfg));
        // the pipe's envelope (DeviceSession) carries the two frames of a start as two blobs: a third is refused
        DeviceSession s = new DeviceSession(d, null);
        byte[] keys = r.signedDirectory();
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, keys).status);
        byte[] three = new Wire.Writer().blob(cfg).blob(env).blob(env).bytes();
        assertEquals(1, s.serve(DeviceSession.OP_START_ROUND, three).status);
    }

    @Test
    void malformedFramesAtEveryStepAreTypedRefusals() throws Exception {
        Device d = pendingDevice();
        SecAggRound r = round(d);
        KeyDirectory dir = r.directory;
        SecAggClient client = d.secagg(dir);
        byte[] cfg = r.signedConfig(), env = r.envelope(ME);
        fuzz("signed configuration", cfg, f -> client.startRound(f, env));
        fuzz("signed configuration", cfg, f -> d.secaggStep(dir, "advertise", f, env));
        fuzz("checksum envelope", env, f -> client.startRound(cfg, f));
        fuzz("checksum envelope", env, f -> d.secaggStep(dir, "advertise", cfg, f));
        r.adverts.put(ME, d.secaggStep(dir, "advertise", cfg, env));
        r.advertise();
        byte[] broadcast = r.keyBroadcast(ME);
        fuzz("key broadcast", broadcast, f -> client.shareKeys(f));              // the client itself
        fuzz("key broadcast", broadcast, f -> d.secaggStep(dir, "share", f));    // and the device's entry point
        r.shareKeys.put(ME, d.secaggStep(dir, "share", broadcast));
        r.share();
        byte[] delivery = r.delivery(ME);
        double[] pending = d.pending();
        fuzz("share delivery", delivery, f -> client.maskedInput(f, pending));
        fuzz("share delivery", delivery, f -> d.secaggStep(dir, "input", f));
        assertArrayEquals(pending, d.pending());                  // every refusal left the pending vector
        assertTrue(d.ledger().releases().isEmpty() && d.ledger().unbounded() == 0);
        r.inputs.put(ME, d.secaggStep(dir, "input", delivery));
        r.input();
        byte[] survivors = r.survivorSet();
        Step ack = f -> d.secaggStep(dir, "ack", f);
        for (byte[] bad : new byte[][]{new byte[0], Arrays.copyOf(survivors, 20), Arrays.copyOf(survivors, 200),
                Arrays.copyOf(survivors, survivors.length - 1), r.keyBroadcast(ME)}) {
            refusal(SecAggException.Kind.MESSAGE_REJECTED, () -> ack.call(bad));
        }
        r.acks.put(ME, d.secaggStep(dir, "ack", survivors));
        r.acknowledge();
        byte[] acks = r.ackSet(10, 13);                           // exactly the certificate: each one is read
        fuzz("acknowledgement set", acks, f -> client.unmask(f));
        fuzz("acknowledgement set", acks, f -> d.secaggStep(dir, "unmask", f));
        assertNotNull(d.secaggStep(dir, "unmask", acks));
        assertEquals(SecAggClient.Phase.DONE, client.phase());
    }

    @Test
    void anAbortedMaskedInputKeepsThePendingVectorAndTheLedger() throws Exception {
        Device d = pendingDevice();
        SecAggRound r = round(d);
        KeyDirectory dir = r.directory;
        r.adverts.put(ME, d.secaggStep(dir, "advertise", r.signedConfig(), r.envelope(ME)));
        r.advertise();
        r.shareKeys.put(ME, d.secaggStep(dir, "share", r.keyBroadcast(ME)));
        r.share();
        double[] pending = d.pending();
        // t = 3: the device's own share and one neighbour's are too few to mask with
        SecAggException e = refusal(SecAggException.Kind.ABORT,
                () -> d.secaggStep(dir, "input", r.delivery(ME, SecAggClientTest.set(10))));
        assertTrue(e.getMessage().contains("shares from only 1 neighbours arrived; 2 are needed"), e.getMessage());
        assertArrayEquals(pending, d.pending());
        assertEquals(0, d.ledger().unbounded(), "nothing was sent, so nothing is on the ledger");
        assertNotNull(d.secaggStep(dir, "input", r.delivery(ME, SecAggClientTest.set(10, 13))));
        assertNull(d.pending());
        assertEquals(1, d.ledger().unbounded());        // a round without noise: ε = ∞ on the record
    }

    /** A device made again on the same store (an app restart): same identity, same files. */
    Device restarted() throws Exception {
        return new Device(new File(tmp, "device"), ME, new Random(0), DeviceMessages.Limits.DEFAULT,
                new ReplayTrainer(new File(Vectors.dir(), "device.json"), 1e-6), null, new SecureRandom());
    }

    @Test
    void aReplayedRoundIsRefusedAfterARestart() throws Exception {
        Device d = pendingDevice();
        SecAggRound r = round(d);
        byte[] cfg = r.signedConfig(), env = r.envelope(ME);
        assertNotNull(d.secaggStep(r.directory, "advertise", cfg, env));
        // on disk before the reply went out, in the Python SDK's format (RoundLog, secagg-rounds.json)
        File log = new File(d.root, Device.ROUND_LOG_FILE);
        JSONObject stored = new JSONObject(new String(Bundle.readAll(log), java.nio.charset.StandardCharsets.UTF_8));
        assertEquals(1, stored.length());
        assertEquals(1, stored.getLong(org.pategail.core.secagg.Bytes.hex(r.directory.coordinator())));
        Device again = restarted();
        SecAggException e = refusal(SecAggException.Kind.MESSAGE_REJECTED,
                () -> again.secaggStep(r.directory, "advertise", cfg, env));
        assertTrue(e.getMessage().contains("is not newer than 1 (replay)"), e.getMessage());
        // an unreadable log refuses every round rather than forget
        Device.writeAtomic(log, "{\"broken".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        SecAggRound next = new SecAggRound(2, new long[]{ME, 10, 13, 16, 19}, 4, 3, 3, 0, 0,
                Collections.singletonMap(ME, d.identity()));
        e = refusal(SecAggException.Kind.MESSAGE_REJECTED,
                () -> restarted().secaggStep(next.directory, "advertise", next.signedConfig(), next.envelope(ME)));
        assertTrue(e.getMessage().contains("unreadable round log"), e.getMessage());
    }

    @Test
    void resendingTheSameDirectoryKeepsTheClientAndItsGuard() throws Exception {
        Device d = pendingDevice();
        SecAggRound r = round(d);
        DeviceSession s = new DeviceSession(d, r.directory.coordinator());
        byte[] directory = r.signedDirectory();
        byte[] start = new Wire.Writer().blob(r.signedConfig()).blob(r.envelope(ME)).bytes();
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, directory).status);
        DeviceSession.Reply advert = s.serve(DeviceSession.OP_START_ROUND, start);
        assertEquals(DeviceSession.OK, advert.status);
        r.adverts.put(ME, advert.payload);
        r.advertise();
        SecAggClient client = d.secagg(r.directory);
        // the same directory again (new bytes parsed into a new object): the same client, mid-round
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, directory.clone()).status);
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_DIRECTORY, directory.clone()).status);
        DeviceSession.Reply replay = s.serve(DeviceSession.OP_START_ROUND, start);
        assertEquals(1, replay.status, new String(replay.payload, java.nio.charset.StandardCharsets.UTF_8));
        assertTrue(client == d.secagg(new KeyDirectory(r.directory.coordinator(), r.directory.devices())));
        assertEquals(SecAggClient.Phase.ADVERTISED, client.phase());
        assertEquals(DeviceSession.OK, s.serve(DeviceSession.OP_SHARE_KEYS, r.keyBroadcast(ME)).status);
    }
}
