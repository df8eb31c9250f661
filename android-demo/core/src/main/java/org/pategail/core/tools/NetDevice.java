package org.pategail.core.tools;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.Bundle;
import org.pategail.core.Device;
import org.pategail.core.DeviceMessages;
import org.pategail.core.net.CoordinatorClient;
import org.pategail.core.net.NetFrames;
import org.pategail.core.net.ServiceException;
import org.pategail.core.secagg.Bytes;
import org.pategail.core.secagg.PrivacyLedger;
import org.pategail.core.secagg.PrivacyPlan;
import org.pategail.core.secagg.SecAggException;

/**
 * One Java device as a process, taking part in a served run ({@code pategail serve}) over HTTP(S) — the Java
 * twin of {@code pategail device}, on the core's {@link CoordinatorClient} with the JVM's {@link MlpTrainer}
 * (on a phone the app runs the same client with ONNX Runtime). Its store is the app's private storage; a
 * device restarted on the same store resumes.
 *
 * <pre>
 * NetDevice --server URL --store DIR [--days FILE] [--device-id I] [--seed S] [--coordinator-key HEX]
 *           [--cafile PEM] [--token TOKEN] [--give-up S] [--policy-trainer PYTHON] [--keep-uploads] [--show-key]
 * </pre>
 * {@code --policy-trainer}: train the policy in DP-FedAvg rounds through {@link ProcessPolicyTrainer} (ONNX Runtime
 * in {@code PYTHON -m pategail.jvm_policy_trainer}); without it the device refuses those rounds.
 * {@code --days}: the owner's days, a CSV in the synthetic form (agent,day,slot,cell,lat,lon), read once at the
 * first start. {@code --keep-uploads}: keep a copy of every vector the device uploaded (masked) in
 * {@code STORE/uploads.jsonl} — the owner's own record, for audits and tests; it never leaves the device.
 * Mistakes are one line on stderr and exit status 2.
 */
public final class NetDevice {
    static final String HEADER = "agent,day,slot,cell,lat,lon";
    static final String UPLOADS_FILE = "uploads.jsonl";
    private static final List<String> FLAGS = Arrays.asList("--keep-uploads", "--show-key");
    private static final List<String> OPTIONS = Arrays.asList("--server", "--store", "--days", "--device-id", "--seed",
            "--coordinator-key", "--cafile", "--token", "--give-up", "--policy-trainer");

    private NetDevice() {
    }

    /** A mistake of the caller's: one line, exit status 2. */
    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %5$s%6$s%n");
        // the JDK resends a POST whose answer was lost, with the same nonce, which the service refuses as a replay;
        // the client's own retry signs a new request instead
        System.setProperty("sun.net.http.retryPost", "false");
        try {
            System.exit(run(args));
        } catch (UsageError | ServiceException err) {
            System.err.println("error: " + err.getMessage());
            System.exit(2);
        } catch (IOException err) {
            System.err.println("error: " + err.getMessage());
            System.exit(1);
        }
    }

    static Map<String, String> parse(String[] args) throws UsageError {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (FLAGS.contains(args[i])) {
                opts.put(args[i], "");
            } else if (OPTIONS.contains(args[i])) {
                if (i + 1 >= args.length) {
                    throw new UsageError(args[i] + " needs a value");
                }
                opts.put(args[i], args[++i]);
            } else {
                throw new UsageError("unknown argument " + args[i] + " (options: " + OPTIONS + ", " + FLAGS + ")");
            }
        }
        if (!opts.containsKey("--store")) {
            throw new UsageError("--store DIR is required");
        }
        return opts;
    }

    static long number(Map<String, String> opts, String key, long fallback) throws UsageError {
        try {
            return opts.containsKey(key) ? Long.parseLong(opts.get(key)) : fallback;
        } catch (NumberFormatException err) {
            throw new UsageError(key + " " + opts.get(key) + ": not a whole number");
        }
    }

    static int run(String[] args) throws UsageError, ServiceException, IOException {
        Map<String, String> opts = parse(args);
        File store = new File(opts.get("--store"));
        SecureRandom secure = new SecureRandom();
        if (opts.containsKey("--show-key")) {
            CoordinatorClient.checkStore(store);
            System.out.println(Bytes.hex(Device.loadOrCreateIdentity(new File(store, Device.IDENTITY_FILE), secure)
                    .signingPublic));
            return 0;
        }
        if (!opts.containsKey("--server")) {
            throw new UsageError("--server URL is required");
        }
        byte[] key = null;
        if (opts.containsKey("--coordinator-key")) {
            String hex = opts.get("--coordinator-key");
            if (!hex.matches("[0-9a-fA-F]{64}")) {
                throw new UsageError("--coordinator-key: 64 hex digits (a raw Ed25519 public key)");
            }
            key = Bytes.unhex(hex.toLowerCase(java.util.Locale.ROOT));
        }
        long id = number(opts, "--device-id", NetFrames.ANY_ID);
        if (id < 0 || id > NetFrames.ANY_ID || (opts.containsKey("--device-id") && id == NetFrames.ANY_ID)) {
            throw new UsageError("--device-id " + id + ": out of range");
        }
        double giveUp;
        try {
            giveUp = Double.parseDouble(opts.getOrDefault("--give-up", "900"));
        } catch (NumberFormatException err) {
            throw new UsageError("--give-up " + opts.get("--give-up") + ": not a number of seconds");
        }
        File days = opts.containsKey("--days") ? new File(opts.get("--days")) : null;
        String python = opts.get("--policy-trainer");
        // no policy runtime on the JVM: PolicyUpdates are refused as "incompatible" (a phone runs OrtPolicy)
        CoordinatorClient.Runtime runtime = new CoordinatorClient.Runtime((root, deviceId, minibatches) ->
                new Device(root, deviceId, minibatches, DeviceMessages.Limits.DEFAULT, new MlpTrainer(), null,
                        python == null ? null
                                : new ProcessPolicyTrainer(Arrays.asList(python, "-m", "pategail.jvm_policy_trainer")),
                        secure),
                secure, number(opts, "--seed", 0));
        CoordinatorClient client = new CoordinatorClient(opts.get("--server"),
                opts.containsKey("--cafile") ? new File(opts.get("--cafile")) : null, store, runtime,
                days == null ? null : () -> readSyntheticCsv(days), key, id, opts.get("--token"),
                new CoordinatorClient.RetryPolicy(0.5, 30.0, giveUp), 20.0, new SecureRandom());
        if (opts.containsKey("--keep-uploads")) {
            File log = new File(store, UPLOADS_FILE);
            client.setUploadListener((round, environment, values) -> appendUpload(log, round, environment, values));
        }
        client.run();
        System.out.println("device " + client.deviceId() + ": the run is over; " + client.ordersHandled()
                + " orders answered");
        System.out.println("device " + client.deviceId() + ": " + ledgerSummary(store));
        return 0;
    }

    /** The owner's privacy ledger in one line: its releases and the ε they compose to at the plan's δ. */
    static String ledgerSummary(File store) {
        try {
            File planFile = new File(store, Device.PLAN_FILE);
            double delta = planFile.isFile() ? PrivacyPlan.fromManifest(new JSONObject(new String(
                    Bundle.readAll(planFile), StandardCharsets.UTF_8))).targetDelta : 1e-5;
            PrivacyLedger ledger = new PrivacyLedger(new File(store, Device.LEDGER_FILE), null, delta);
            return "privacy ledger: " + ledger.releases().size() + " releases, " + ledger.unbounded()
                    + " without noise, ε = " + ledger.epsilon() + " at δ = " + delta;
        } catch (IOException | JSONException | IllegalArgumentException | SecAggException err) {
            return "privacy ledger unreadable (" + err.getMessage() + ")";
        }
    }

    static void appendUpload(File log, long round, boolean environment, double[] values) throws IOException {
        try {
            JSONArray v = new JSONArray();
            for (double x : values) {
                v.put(x);
            }
            String line = new JSONObject().put("round", round).put("environment", environment).put("values", v)
                    + "\n";
            try (FileOutputStream out = new FileOutputStream(log, true)) {
                out.write(line.getBytes(StandardCharsets.UTF_8));
                out.getFD().sync();
            }
        } catch (JSONException err) {
            throw new IOException(log + ": " + err.getMessage());
        }
    }

    /** Days (n, 48) from a CSV in the synthetic form (the Python SDK's {@code read_synthetic_csv}): every row
     * checked, each day listing slots 0..47 in order; a one-line ServiceException naming the row otherwise. */
    static int[][] readSyntheticCsv(File path) throws ServiceException {
        String text;
        try {
            text = new String(Bundle.readAll(path), StandardCharsets.UTF_8);
        } catch (IOException err) {
            throw new ServiceException(path + ": no such file");
        }
        String[] lines = text.split("\r?\n");
        if (lines.length == 0 || !lines[0].trim().equals(HEADER)) {
            throw new ServiceException(path + ": row 1: header must be '" + HEADER + "'");
        }
        int slots = DeviceMessages.SLOTS;
        List<int[]> days = new ArrayList<>();
        long[] key = null;
        int[] day = null;
        int n = 0;
        for (int i = 1; i < lines.length; i++) {
            if (lines[i].isEmpty() && i == lines.length - 1) {
                break;
            }
            String[] parts = lines[i].split(",", -1);
            long agent, d;
            int slot, cell;
            try {
                if (parts.length != 6) {
                    throw new NumberFormatException();
                }
                agent = Long.parseLong(parts[0].trim());
                d = Long.parseLong(parts[1].trim());
                slot = Integer.parseInt(parts[2].trim());
                cell = Integer.parseInt(parts[3].trim());
                Double.parseDouble(parts[4]);
                Double.parseDouble(parts[5]);
            } catch (NumberFormatException err) {
                throw new ServiceException(path + ": row " + (i + 1) + ": expected '" + HEADER + "', got '" + lines[i]
                        + "'");
            }
            if (n % slots == 0) {
                day = new int[slots];
                key = new long[]{agent, d};
                days.add(day);
            }
            if (slot != n % slots || agent != key[0] || d != key[1]) {
                throw new ServiceException(path + ": row " + (i + 1) + ": each day must list slots 0.." + (slots - 1)
                        + " in order");
            }
            if (cell < 0) {
                throw new ServiceException(path + ": row " + (i + 1) + ": cell " + cell + " is not a cell id");
            }
            day[slot] = cell;
            n++;
        }
        if (n == 0) {
            throw new ServiceException(path + ": no rows");
        }
        if (n % slots != 0) {
            throw new ServiceException(path + ": " + n + " rows is not a whole number of " + slots
                    + "-slot days (truncated?)");
        }
        return days.toArray(new int[0][]);
    }
}
