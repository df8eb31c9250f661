package org.pategail.core;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Random;
import java.util.logging.Logger;

import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.secagg.DeviceIdentity;
import org.pategail.core.secagg.DevicePolicy;
import org.pategail.core.secagg.KeyDirectory;
import org.pategail.core.secagg.PrivacyLedger;
import org.pategail.core.secagg.PrivacyPlan;
import org.pategail.core.secagg.RoundLog;
import org.pategail.core.secagg.SecAggClient;
import org.pategail.core.secagg.SecAggException;

/**
 * The device client a phone app embeds — the same behaviour as the Python SDK's {@code Device}: it owns
 * one private directory (the owner's days, the verified bundle, the discriminator checkpoint, the accepted
 * policy, the secure-aggregation identity), answers coordinator requests through {@link #handle} (bytes in,
 * bytes out) and uploads its pending vector only masked, through {@link #maskedInput}.
 *
 * <p>A refused request changes nothing (checkpoint, pending vector and policy stay as they were). Raw days
 * never leave the device: what goes to the coordinator is an Ack / ErrorReply, or the masked secure-aggregation
 * upload ({@link #days()} is for the app itself).
 */
public final class Device {
    static final String BUNDLE_DIR = "bundle";
    static final String CHECKPOINT = "discriminator.ckpt";
    static final String CHECKPOINT_TAG = "discriminator.ckpt.bundle";
    static final String BEFORE_ROUND = "discriminator.before-round.ckpt";
    static final String ROUND_TAG = "discriminator.round";
    static final String POLICY_FILE = "policy.onnx";
    static final String POLICY_META = "policy.json";
    public static final String IDENTITY_FILE = "identity.key";
    public static final String DAYS_FILE = "days.bin";
    /** The releases this device took part in (the Python SDK's file and format, {@link PrivacyLedger}). */
    public static final String LEDGER_FILE = "privacy-ledger.json";
    static final String ROUND_LOG_FILE = "secagg-rounds.json";
    /** The last privacy plan a bundle declared (the Python SDK's file): in force while later bundles declare none. */
    public static final String PLAN_FILE = "privacy-plan.json";
    private static final Logger LOG = Logger.getLogger(Device.class.getName());

    public final File root;
    public final long deviceId;
    private final Random rng;
    private final DeviceMessages.Limits limits;
    private final Trainer trainer;
    private final PolicyRunner policy;
    private final PolicyTrainer policyTrainer;
    private final SecureRandom secure;
    private final DeviceIdentity identity;
    /** The owner's days as stored: on the public map when the bundle's table was released from one. */
    private int[][] stored;
    private Bundle bundle;
    private boolean trainerOpen;
    private double[] pending;
    /** The pending vector is the environment contribution (one vector query on the ledger), not scores. */
    private boolean pendingEnvironment;
    /** The pending vector is the visited vector of a cell-table release (held to the plan's floor for it). */
    private boolean pendingCells;
    private float[][] positives;
    /** The owner's days labelled for the policy's maximum-likelihood training (DP-FedAvg), made on demand. */
    private FedAvgRound.LabelledDays labelled;
    private SecAggClient secagg;
    private KeyDirectory secaggDirectory;
    private String secaggPlan;
    private String policySha256;

    /** A device without a policy trainer: it refuses DP-FedAvg rounds as "incompatible". */
    public Device(File root, long deviceId, Random rng, DeviceMessages.Limits limits, Trainer trainer,
                  PolicyRunner policy, SecureRandom secure) throws IOException {
        this(root, deviceId, rng, limits, trainer, policy, null, secure);
    }

    /**
     * @param rng           drives minibatch sampling (seeded in tests)
     * @param trainer       the discriminator's training session (OrtTrainer on a phone)
     * @param policy        the policy runtime (OrtPolicy on a phone); null on a device that cannot run policies,
     *                      which then refuses PolicyUpdates as "incompatible"
     * @param policyTrainer the policy's training session for DP-FedAvg rounds (OrtPolicyTrainer on a phone); null
     *                      on a device that cannot train the policy, which then refuses those rounds as
     *                      "incompatible"
     */
    public Device(File root, long deviceId, Random rng, DeviceMessages.Limits limits, Trainer trainer,
                  PolicyRunner policy, PolicyTrainer policyTrainer, SecureRandom secure) throws IOException {
        this.root = root;
        if (!root.isDirectory() && !root.mkdirs()) {
            throw new IOException(root + ": cannot create the device directory");
        }
        this.deviceId = deviceId;
        this.rng = rng;
        this.limits = limits;
        this.trainer = trainer;
        this.policy = policy;
        this.policyTrainer = policyTrainer;
        this.secure = secure;
        this.identity = loadOrCreateIdentity(new File(root, IDENTITY_FILE), secure);
        FedAvgRound.removeFiles(root);                // a round cut short by a crash leaves nothing behind
        this.stored = loadDays(new File(root, DAYS_FILE));
        if (new File(new File(root, BUNDLE_DIR), Bundle.MANIFEST).isFile()) {
            try {
                openInstalled();
            } catch (BundleException err) {
                LOG.warning("device " + deviceId + ": the installed bundle is unusable (" + err.getMessage()
                        + "); install one again");
                bundle = null;
            }
        }
    }

    // -- storage ------------------------------------------------------------------------------------------
    /** Write {@code data} to {@code path} through a synced temporary file and a rename. */
    public static void writeAtomic(File path, byte[] data) throws IOException {
        File tmp = new File(path.getParentFile(), "." + path.getName() + ".tmp");
        try (FileOutputStream out = new FileOutputStream(tmp)) {
            out.write(data);
            out.getFD().sync();
        }
        if (!tmp.renameTo(path)) {
            throw new IOException(path + ": cannot replace");
        }
    }

    /** The device's long-term keys in {@code path}, made (and kept, owner-readable only) at first use. */
    public static DeviceIdentity loadOrCreateIdentity(File path, SecureRandom secure) throws IOException {
        if (path.isFile()) {
            byte[] raw = Bundle.readAll(path);
            if (raw.length != 64) {
                throw new IOException(path + ": not an identity file (expected 64 bytes); delete it to enrol again");
            }
            return DeviceIdentity.fromBytes(raw);
        }
        DeviceIdentity id = DeviceIdentity.generate(secure);
        writeAtomic(path, id.toBytes());
        path.setReadable(false, false);
        path.setReadable(true, true);
        return id;
    }

    private static int[][] loadDays(File f) throws IOException {
        if (!f.isFile()) {
            return new int[0][];
        }
        try {
            return daysFromBytes(Bundle.readAll(f));
        } catch (IllegalArgumentException err) {
            throw new IOException(f + ": not a days file (" + err.getMessage() + ")");
        }
    }

    /** Days (n, 48) from their stored form: little-endian int32, row after row. */
    public static int[][] daysFromBytes(byte[] raw) {
        int per = 4 * DeviceMessages.SLOTS;
        if (raw.length % per != 0) {
            throw new IllegalArgumentException("length " + raw.length + " is not a multiple of " + per);
        }
        int[][] out = new int[raw.length / per][DeviceMessages.SLOTS];
        for (int i = 0; i < out.length; i++) {
            for (int t = 0; t < DeviceMessages.SLOTS; t++) {
                out[i][t] = DeviceMessages.getIntLE(raw, i * per + 4 * t);
            }
        }
        return out;
    }

    // -- local API (the app) --------------------------------------------------------------------------------
    /**
     * Store more of the owner's days (n, 48); cell ids checked against the installed bundle's cells — the public
     * map's squares when its table was released from one (the app records days there). Returns the total.
     */
    public int addDays(int[][] more) throws IOException {
        int nCells = bundle == null ? Integer.MAX_VALUE : bundle.dayCells().length;
        for (int i = 0; i < more.length; i++) {
            if (more[i].length != DeviceMessages.SLOTS) {
                throw new IllegalArgumentException("days: row " + i + ": expected " + DeviceMessages.SLOTS + " slots");
            }
            for (int t = 0; t < more[i].length; t++) {
                if (more[i][t] < 0 || more[i][t] >= nCells) {
                    // names row and slot, never the cell id of a stored day
                    throw new IllegalArgumentException("days: row " + i + ", slot " + t + ": cell id out of range");
                }
            }
        }
        int[][] all = new int[stored.length + more.length][];
        System.arraycopy(stored, 0, all, 0, stored.length);
        for (int i = 0; i < more.length; i++) {
            all[stored.length + i] = more[i].clone();
        }
        writeDays(root, all);
        stored = all;
        positives = null;
        labelled = null;
        return stored.length;
    }

    /** Store {@code all} days (n, 48) as the device directory's days (before a Device is opened on it). */
    public static void writeDays(File root, int[][] all) throws IOException {
        byte[] raw = new byte[4 * DeviceMessages.SLOTS * all.length];
        for (int i = 0; i < all.length; i++) {
            for (int t = 0; t < DeviceMessages.SLOTS; t++) {
                DeviceMessages.putIntLE(raw, 4 * (i * DeviceMessages.SLOTS + t), all[i][t]);
            }
        }
        writeAtomic(new File(root, DAYS_FILE), raw);
    }

    public int nDays() {
        return stored.length;
    }

    /**
     * The owner's days on the installed bundle's cell table (n, 48): moved there from the public map when the
     * table was released from one (the Python SDK's {@code Device.days()}); the stored days without a bundle.
     * Raw days: for the app's own use, never sent.
     */
    public int[][] days() {
        return bundle == null ? stored : bundle.onTable(stored);
    }

    /** The owner's home cell on the installed bundle's table: the most visited night cell of {@link #days()}. */
    public int home() throws MessageError {
        requireDays();
        return Features.inferHome(days(), 12);
    }

    public Bundle bundle() {
        return bundle;
    }

    public DeviceIdentity identity() {
        return identity;
    }

    /** What this device has released so far, under which noise, and the ε it composes to (for the app's privacy
     * screen); a protocol error when the file cannot be read. */
    public PrivacyLedger ledger() throws SecAggException {
        return PrivacyLedger.read(new File(root, LEDGER_FILE));
    }

    public String policySha256() {
        return policySha256;
    }

    /** Whether the pending vector is the environment contribution (else: a round's scores). */
    public boolean pendingIsEnvironment() {
        return pendingEnvironment;
    }

    /** Whether the pending vector is the visited vector of a cell-table release. */
    public boolean pendingIsCells() {
        return pending != null && pendingCells;
    }

    /** A copy of the vector the next secure aggregation will upload (masked), or null. */
    public double[] pending() {
        return pending == null ? null : pending.clone();
    }

    // -- bundle ---------------------------------------------------------------------------------------------
    /**
     * Verify the bundle at {@code dir} (and its expected SHA-256 if given), copy it in and open it. A bundle on a
     * cell table released from a public map is taken only over days on that very map, and a bundle replacing such
     * a bundle only if it is on the same map or that map itself (the Python SDK's {@code install_bundle}):
     * anything else would read the stored days wrong.
     */
    public Bundle installBundle(File dir, String expectedSha256) throws BundleException, IOException {
        Bundle b = Bundle.load(dir, trainer.runtimeVersion());
        if (expectedSha256 != null && !b.sha256.equals(expectedSha256)) {
            throw new BundleException(dir + ": bundle SHA-256 " + b.sha256 + " differs from the expected " + expectedSha256);
        }
        if (bundle != null && stored.length > 0 && (bundle.universe != null || b.universe != null)
                && !sameCells(b.dayCells(), bundle.dayCells())) {
            String what = b.universe != null ? "cell table was released from a public map other than"
                    : "cells are not the public map of the released table that holds";
            throw new BundleException(dir + ": the bundle's " + what + " the stored days; refused (they would be "
                    + "read wrong)");
        }
        int nDayCells = b.dayCells().length;
        for (int[] day : stored) {
            for (int c : day) {
                if (c >= nDayCells) {
                    throw new BundleException(dir + ": the bundle has " + nDayCells
                            + " cells, fewer than the cell ids of the stored days");
                }
            }
        }
        File target = new File(root, BUNDLE_DIR);
        if (!target.getCanonicalFile().equals(dir.getCanonicalFile())) {
            File tmp = new File(root, "." + BUNDLE_DIR + ".tmp"), old = new File(root, "." + BUNDLE_DIR + ".old");
            deleteTree(tmp);
            deleteTree(old);
            if (!tmp.mkdirs()) {
                throw new IOException(tmp + ": cannot create");
            }
            File[] files = dir.listFiles();
            for (File f : files == null ? new File[0] : files) {
                if (f.isFile()) {
                    writeAtomic(new File(tmp, f.getName()), Bundle.readAll(f));
                }
            }
            Bundle.load(tmp, trainer.runtimeVersion());     // the copy is what the device will run: check it too
            if (target.exists() && !target.renameTo(old)) {
                throw new IOException(target + ": cannot replace");
            }
            if (!tmp.renameTo(target)) {
                throw new IOException(target + ": cannot install");
            }
            deleteTree(old);
        }
        openInstalled();
        return bundle;
    }

    /** Whether two cell tables hold the same (lat, lon) rows in the same order (numpy's array_equal). */
    private static boolean sameCells(double[][] a, double[][] b) {
        if (a.length != b.length) {
            return false;
        }
        for (int i = 0; i < a.length; i++) {
            if (a[i].length != b[i].length) {
                return false;
            }
            for (int j = 0; j < a[i].length; j++) {
                if (a[i][j] != b[i][j]) {
                    return false;
                }
            }
        }
        return true;
    }

    private static void deleteTree(File f) {
        File[] children = f.listFiles();
        if (children != null) {
            for (File c : children) {
                deleteTree(c);
            }
        }
        if (f.exists() && !f.delete()) {
            LOG.warning(f + ": could not delete");
        }
    }

    private void openInstalled() throws BundleException {
        Bundle b = Bundle.load(new File(root, BUNDLE_DIR), trainer.runtimeVersion());
        boolean changed = bundle == null || !b.sha256.equals(bundle.sha256);
        bundle = b;
        try {
            openCheckpoint(b);
        } catch (IOException err) {
            throw new BundleException(b.root + ": cannot open the training artifacts (" + err.getMessage() + ")");
        }
        openPolicy(b);
        if (changed) {
            pending = null;
            positives = null;
            labelled = null;
        }
    }

    /** The device's own checkpoint when it belongs to this bundle; the bundle's otherwise (saying why). */
    private void openCheckpoint(Bundle b) throws IOException {
        File ckpt = new File(root, CHECKPOINT), tag = new File(root, CHECKPOINT_TAG);
        if (ckpt.isFile()) {
            String owner = tag.isFile() ? new String(Bundle.readAll(tag), StandardCharsets.US_ASCII).trim() : "";
            if (owner.equals(b.sha256)) {
                try {
                    trainer.open(b, ckpt);
                    trainerOpen = true;
                    return;
                } catch (IOException | RuntimeException err) {
                    LOG.warning("device " + deviceId + ": checkpoint " + ckpt + " corrupt (" + err + "); starting again from the bundle");
                }
            } else {
                LOG.warning("device " + deviceId + ": checkpoint " + ckpt
                        + " mismatched (it belongs to another bundle); starting again from the bundle");
            }
        }
        trainer.open(b, null);
        trainerOpen = true;
        saveCheckpoint(b);
    }

    private void saveCheckpoint(Bundle b) throws IOException {
        // checkpoint first, then its tag: a crash in between leaves the old bundle's tag, so the next start
        // discards the new checkpoint (safe) rather than trusting a stale one
        File ckpt = new File(root, CHECKPOINT), tmp = new File(root, "." + CHECKPOINT + ".tmp");
        trainer.saveCheckpoint(tmp);
        if (!tmp.renameTo(ckpt)) {
            throw new IOException(ckpt + ": cannot replace");
        }
        writeAtomic(new File(root, CHECKPOINT_TAG), (b.sha256 + "\n").getBytes(StandardCharsets.US_ASCII));
    }

    private void openPolicy(Bundle b) {
        File path = new File(root, POLICY_FILE), meta = new File(root, POLICY_META);
        policySha256 = b.policySha256;
        if (policy == null) {
            return;
        }
        try {
            if (path.isFile() && meta.isFile()) {
                JSONObject info = new JSONObject(new String(Bundle.readAll(meta), StandardCharsets.UTF_8));
                byte[] model = Bundle.readAll(path);
                if (info.getString("bundle_sha256").equals(b.sha256) && Bundle.sha256Hex(model).equals(info.getString("sha256"))) {
                    policy.load(model, b);
                    policySha256 = info.getString("sha256");
                    return;
                }
            }
        } catch (IOException | MessageError | JSONException | RuntimeException err) {
            LOG.warning("device " + deviceId + ": the accepted policy is unusable (" + err.getMessage()
                    + "); using the bundle's policy");
        }
        path.delete();
        meta.delete();
        try {
            policy.load(Bundle.readAll(b.policy), b);
        } catch (IOException | MessageError err) {
            LOG.warning("device " + deviceId + ": the bundle's policy does not load (" + err.getMessage() + ")");
        }
    }

    // -- protocol -------------------------------------------------------------------------------------------
    /** The only entry point for coordinator messages: an Ack, or an ErrorReply (state unchanged). */
    public byte[] handle(byte[] request) {
        DeviceMessages.Message reply;
        try {
            DeviceMessages.Message msg = DeviceMessages.fromBytes(request, limits, bundle == null ? 0 : bundle.cells.length);
            if (msg instanceof DeviceMessages.PolicyUpdate) {
                reply = onPolicyUpdate((DeviceMessages.PolicyUpdate) msg);
            } else if (msg instanceof DeviceMessages.RoundRequest) {
                reply = onRoundRequest((DeviceMessages.RoundRequest) msg);
            } else if (msg instanceof DeviceMessages.InitialStatesRequest) {
                reply = onInitialStatesRequest((DeviceMessages.InitialStatesRequest) msg);
            } else if (msg instanceof DeviceMessages.FedAvgRequest) {
                reply = onFedAvgRequest((DeviceMessages.FedAvgRequest) msg);
            } else if (msg instanceof DeviceMessages.CellReleaseRequest) {
                reply = onCellReleaseRequest((DeviceMessages.CellReleaseRequest) msg);
            } else {
                throw new MessageError(DeviceMessages.MALFORMED, "unexpected message kind "
                        + DeviceMessages.kindName(msg.kind()));
            }
        } catch (MessageError err) {
            LOG.info("device " + deviceId + " refused a request: " + err.getMessage() + " (" + err.code + ")");
            reply = DeviceMessages.ErrorReply.fromError(DeviceMessages.peekRound(request), err, limits);
        }
        return DeviceMessages.toBytes(reply);
    }

    private void requireBundle() throws MessageError {
        if (bundle == null || !trainerOpen) {
            throw new MessageError(DeviceMessages.NOT_READY, "no model bundle installed");
        }
    }

    private void requireDays() throws MessageError {
        if (stored.length == 0) {
            throw new MessageError(DeviceMessages.NOT_READY, "the device holds no days yet");
        }
    }

    private DeviceMessages.Message onPolicyUpdate(DeviceMessages.PolicyUpdate msg) throws MessageError {
        requireBundle();
        if (!Bundle.sha256Hex(msg.policyOnnx).equals(msg.policySha256)) {
            throw new MessageError(DeviceMessages.HASH, "the policy's SHA-256 differs from the announced one");
        }
        if (policy == null) {
            throw new MessageError(DeviceMessages.INCOMPATIBLE, "this device has no policy runtime");
        }
        policy.load(msg.policyOnnx, bundle);
        try {
            writeAtomic(new File(root, POLICY_FILE), msg.policyOnnx);
            JSONObject meta = new JSONObject().put("sha256", msg.policySha256).put("round", msg.round)
                    .put("bundle_sha256", bundle.sha256);
            writeAtomic(new File(root, POLICY_META), meta.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException | JSONException err) {
            throw new IllegalStateException("cannot store the accepted policy", err);
        }
        policySha256 = msg.policySha256;
        return new DeviceMessages.Ack(msg.round, "policy_update", 0);
    }

    /** float (n_days x 47, 15): the owner's real pairs, labelled by the EPR actions that explain them. */
    public float[][] positivePairs() throws MessageError {
        if (positives == null) {
            int home = home();
            int[][] days = days();
            positives = new float[days.length * (DeviceMessages.SLOTS - 1)][];
            int k = 0;
            for (int[] day : days) {
                for (float[] row : Features.pairFeatures(day, home, Features.labelActions(day, home), bundle.cells)) {
                    positives[k++] = row;
                }
            }
        }
        return positives;
    }

    /** float (n x 47, 15): the pairs of a RoundRequest, in the order of the queries (day-major). */
    public static float[][] generatedPairs(DeviceMessages.RoundRequest msg, double[][] cells) {
        float[][] out = new float[msg.nQueries()][];
        int k = 0;
        for (int i = 0; i < msg.days.length; i++) {
            for (float[] row : Features.pairFeatures(msg.days[i], msg.homes[i], msg.actions[i], cells)) {
                out[k++] = row;
            }
        }
        return out;
    }

    private DeviceMessages.Message onRoundRequest(DeviceMessages.RoundRequest msg) throws MessageError {
        requireBundle();
        checkRequestBudget(msg.round, msg.nQueries(), false, false);
        File before = new File(root, BEFORE_ROUND), tag = new File(root, ROUND_TAG);
        String mark = bundle.sha256 + " " + msg.round;
        try {
            String previous = tag.isFile() ? new String(Bundle.readAll(tag), StandardCharsets.US_ASCII).trim() : "";
            if (previous.equals(mark) && before.isFile()) {
                LOG.info("device " + deviceId + ": round " + msg.round + " again; replaying it from the checkpoint taken before it");
                trainer.open(bundle, before);
            } else {
                File tmp = new File(root, "." + BEFORE_ROUND + ".tmp");
                trainer.saveCheckpoint(tmp);
                if (!tmp.renameTo(before)) {
                    throw new IOException(before + ": cannot replace");
                }
                writeAtomic(tag, (mark + "\n").getBytes(StandardCharsets.US_ASCII));
            }
        } catch (IOException err) {
            throw new IllegalStateException("cannot keep the checkpoint before the round", err);
        }
        float[][] pos = positivePairs();
        float[][] neg = generatedPairs(msg, bundle.cells);
        int nPos = (int) (msg.batchSize / 2), nNeg = (int) msg.batchSize - nPos;
        float[] labels = new float[nPos + nNeg];
        java.util.Arrays.fill(labels, 0, nPos, bundle.expertLabel);
        java.util.Arrays.fill(labels, nPos, nPos + nNeg, bundle.generatedLabel);
        float[] prob;
        try {
            for (long step = 0; step < msg.kSteps; step++) {
                float[][] batch = new float[nPos + nNeg][];
                for (int i = 0; i < nPos; i++) {
                    batch[i] = pos[rng.nextInt(pos.length)];
                }
                for (int j = 0; j < nNeg; j++) {
                    batch[nPos + j] = neg[rng.nextInt(neg.length)];
                }
                trainer.trainStep(batch, labels);
            }
            prob = trainer.score(neg);
            for (float p : prob) {
                if (Float.isNaN(p) || Float.isInfinite(p)) {
                    throw new MessageError(DeviceMessages.NON_FINITE,
                            "the discriminator produced non-finite scores; state restored");
                }
            }
            saveCheckpoint(bundle);
        } catch (MessageError | IOException | RuntimeException err) {
            restoreTrainer();               // a half-trained discriminator must not survive a failure
            if (err instanceof MessageError) {
                throw (MessageError) err;
            }
            throw new IllegalStateException("round " + msg.round + " failed", err);
        }
        double[] out = new double[prob.length];
        for (int i = 0; i < prob.length; i++) {
            out[i] = Math.min(1.0, Math.max(0.0, prob[i]));
        }
        setPending(out, false, false);
        return new DeviceMessages.Ack(msg.round, "round_request", out.length);
    }

    private void restoreTrainer() {
        try {
            openCheckpoint(bundle);
        } catch (IOException err) {
            trainerOpen = false;
            LOG.severe("device " + deviceId + ": cannot reopen the checkpoint (" + err.getMessage() + ")");
        }
    }

    private DeviceMessages.Message onInitialStatesRequest(DeviceMessages.InitialStatesRequest msg) throws MessageError {
        requireBundle();
        planInForce();
        double[] out = Contributions.environment(days(), home(), bundle.cells, bundle.alpha, bundle.candidates,
                msg.regionCells, bundle.actionRates, bundle.initialStatesDaysCap);
        checkRequestBudget(msg.round, out.length, true, false);
        setPending(out, true, false);
        return new DeviceMessages.Ack(msg.round, "initial_states_request", out.length);
    }

    /**
     * A run's cell-table release (the Python SDK's {@code _on_cell_release_request}): the squares of the public map
     * this device visits most, as a 0/1 vector (at most {@code maxCells} ones: L2 ≤ √maxCells whatever its days
     * hold), pending for a Gaussian round held to the plan's cell-release floor. Only on the public map itself, and
     * only under a plan that declares the release (a device never marks its squares for a run that did not plan to
     * add noise to them).
     */
    private DeviceMessages.Message onCellReleaseRequest(DeviceMessages.CellReleaseRequest msg) throws MessageError {
        requireBundle();
        if (bundle.universe != null) {
            throw new MessageError(DeviceMessages.INCOMPATIBLE, "the installed bundle is already on a released cell "
                    + "table; a cell release is made on the public map");
        }
        JSONObject declared = planInForce();
        if (declared == null || PrivacyPlan.fromManifest(declared).cellsNoiseMultiplier <= 0) {
            throw new MessageError(DeviceMessages.BUDGET, "round " + msg.round + ": the privacy plan in force "
                    + "declares no cell-table release; refused");
        }
        requireDays();
        checkRequestBudget(msg.round, bundle.cells.length, false, true);
        double[] out = CellUniverse.visitedVector(days(), bundle.cells.length, msg.maxCells);
        setPending(out, false, true);
        return new DeviceMessages.Ack(msg.round, "cell_release_request", out.length);
    }

    private void setPending(double[] vector, boolean environment, boolean cells) {
        pending = vector;
        pendingEnvironment = environment;
        pendingCells = cells;
    }

    /**
     * DP-FedAvg: the request checked against the bundle's policy training artifacts and the owner's budget as the
     * Python device checks them, then local maximum-likelihood epochs from the global parameters
     * ({@link FedAvgRound}); the clipped delta over the clip norm becomes the pending vector. A device without a
     * policy trainer refuses the round as "incompatible". A refused or failed round changes nothing.
     */
    private DeviceMessages.Message onFedAvgRequest(DeviceMessages.FedAvgRequest msg) throws MessageError {
        requireBundle();
        requireDays();
        Bundle.PolicyTraining training = bundle.policyTraining;
        if (training == null) {
            throw new MessageError(DeviceMessages.INCOMPATIBLE,
                    "the installed bundle has no policy training artifacts");
        }
        if (msg.parameters.length != training.nParameters) {
            throw new MessageError(DeviceMessages.INCOMPATIBLE, msg.parameters.length + " policy parameters, the "
                    + "bundle's policy has " + training.nParameters);
        }
        if (policyTrainer == null) {
            throw new MessageError(DeviceMessages.INCOMPATIBLE, "this device has no policy trainer: it cannot train "
                    + "the policy's " + training.nParameters + " parameters for DP-FedAvg rounds");
        }
        checkRequestBudget(msg.round, msg.parameters.length, false, false);
        if (labelled == null) {
            labelled = FedAvgRound.labelled(days(), home(), bundle.cells);
        }
        double[] delta;
        try {
            delta = FedAvgRound.localUpdate(policyTrainer, bundle, root, labelled, msg.parameters, (int) msg.epochs,
                    (int) msg.batchSize, msg.learningRate, rng);
        } catch (IOException | RuntimeException err) {
            throw new MessageError(DeviceMessages.INCOMPATIBLE, "the policy's training session failed: "
                    + err.getMessage());
        }
        double[] upload;
        try {
            upload = FedAvgRound.upload(delta, msg.clipNorm);
        } catch (IllegalArgumentException err) {      // a non-finite update
            throw new MessageError(DeviceMessages.NON_FINITE, err.getMessage());
        }
        setPending(upload, false, false);
        return new DeviceMessages.Ack(msg.round, "fedavg_request", upload.length);
    }

    // -- secure aggregation ---------------------------------------------------------------------------------
    /**
     * The secure-aggregation client for {@code directory}: one per directory's content, so a client keeps its
     * round state across calls; replayed rounds are refused across clients and restarts too (the round log
     * on disk, {@code secagg-rounds.json}).
     */
    public SecAggClient secagg(KeyDirectory directory) throws SecAggException {
        JSONObject plan;
        try {
            plan = planInForce();
        } catch (MessageError err) {             // an unreadable remembered plan: take part in nothing
            throw SecAggException.protocol(err.getMessage());
        }
        String key = plan == null ? "" : plan.toString();
        if (secagg == null || !directory.equals(secaggDirectory) || !key.equals(secaggPlan)) {
            PrivacyPlan declared = plan == null ? null : PrivacyPlan.fromManifest(plan);
            secagg = new SecAggClient(deviceId, identity, directory, secure,
                    new RoundLog(new File(root, ROUND_LOG_FILE)),
                    declared == null ? DevicePolicy.NONE : declared.policy(), ledger(declared));
            secaggDirectory = directory;
            secaggPlan = key;
        }
        return secagg;
    }

    /**
     * The privacy plan this device holds itself to (the Python SDK's {@code plan_in_force}): the one its bundle
     * declares, remembered in {@code privacy-plan.json}; or, when the bundle declares none, the one remembered
     * from the last bundle that did — a coordinator cannot lift the floors by serving a bundle without a
     * privacy section; only the owner can ({@link #forgetPrivacyPlan}). Null: never a private run. An
     * unreadable remembered plan refuses everything (MessageError "budget").
     */
    public JSONObject planInForce() throws MessageError {
        File path = new File(root, PLAN_FILE);
        JSONObject declared = bundle == null ? null : bundle.manifest.optJSONObject("privacy");
        try {
            if (declared != null) {
                byte[] text = sortedJson(declared).getBytes(StandardCharsets.UTF_8);
                if (!path.isFile() || !java.util.Arrays.equals(Bundle.readAll(path), text)) {
                    writeAtomic(path, text);
                }
                return declared;
            }
            if (!path.isFile()) {
                return null;
            }
            JSONObject remembered = new JSONObject(new String(Bundle.readAll(path), StandardCharsets.UTF_8));
            DevicePolicy.fromPlan(remembered);
            return remembered;
        } catch (IOException | JSONException | IllegalArgumentException err) {
            throw new MessageError(DeviceMessages.BUDGET, path + ": the remembered privacy plan cannot be read ("
                    + err.getMessage() + "); refusing until the owner resets it");
        }
    }

    /** The ledger of this device, budgeted by {@code plan} (null: kept, refusing nothing). */
    private PrivacyLedger ledger(PrivacyPlan plan) throws SecAggException {
        File file = new File(root, LEDGER_FILE);
        return plan == null ? PrivacyLedger.read(file) : new PrivacyLedger(file, plan.targetEpsilon, plan.targetDelta);
    }

    /**
     * MessageError "budget" when answering a request of {@code values} values (the environment request when
     * {@code environment}, the cell-table release when {@code cells}), at the declared plan's noise, would take this device past its own budget (the Python
     * SDK's {@code check_request_budget}, with the ledger's rule for Laplace-only ledgers), when the plan plans no
     * release of that kind (a bundle on a public map plans the cell-table release alone), or its ledger or
     * remembered plan cannot be read. Nothing is prepared before it passes.
     */
    private void checkRequestBudget(long round, int values, boolean environment, boolean cells) throws MessageError {
        JSONObject declared = planInForce();
        if (declared == null) {
            return;
        }
        PrivacyPlan plan = PrivacyPlan.fromManifest(declared);
        try {
            plan.requestRelease(values, environment, cells);
        } catch (IllegalArgumentException err) {  // no noise planned for it: ε = ∞
            throw new MessageError(DeviceMessages.BUDGET, "round " + round + ": the privacy plan in force plans no "
                    + (cells ? "cell-table" : environment ? "environment" : "reward") + " release; refused");
        }
        String refusal;
        try {
            refusal = ledger(plan).requestRefusal(plan, round, values, environment, cells);
        } catch (SecAggException err) {          // an unreadable ledger: refusing is the safe answer
            throw new MessageError(DeviceMessages.BUDGET, err.getMessage());
        }
        if (refusal != null) {
            throw new MessageError(DeviceMessages.BUDGET, refusal);
        }
    }

    /** The owner's explicit reset: forget the remembered privacy plan (the ledger is kept). Whether one was. */
    public boolean forgetPrivacyPlan() {
        secagg = null;
        return new File(root, PLAN_FILE).delete();
    }

    /** A JSON object with its keys sorted, as Python's json.dumps(..., sort_keys=True) writes it, and a newline. */
    static String sortedJson(JSONObject o) throws JSONException {
        java.util.List<String> keys = new java.util.ArrayList<>();
        for (java.util.Iterator<?> it = o.keys(); it.hasNext(); ) {
            keys.add((String) it.next());
        }
        java.util.Collections.sort(keys);
        StringBuilder b = new StringBuilder("{");
        for (String k : keys) {
            Object v = o.get(k);
            b.append(b.length() > 1 ? ", " : "").append(JSONObject.quote(k)).append(": ")
                    .append(v instanceof Number ? JSONObject.numberToString((Number) v)
                            : v instanceof String ? JSONObject.quote((String) v) : String.valueOf(v));
        }
        return b.append("}\n").toString();
    }

    /** The five steps of a secure-aggregation round, as {@link #secaggStep} names them. */
    public static final java.util.List<String> SECAGG_STEPS = java.util.Collections.unmodifiableList(
            java.util.Arrays.asList("advertise", "share", "input", "ack", "unmask"));
    /** Frames each step's order carries: the signed configuration and the checksum envelope, then one frame. */
    private static final int[] SECAGG_FRAMES = {2, 1, 1, 1, 1};

    /**
     * One step of a secure-aggregation round on the aggregator's frames (the Python SDK's
     * {@code Device.secagg_step}): "advertise" (signed configuration, checksum envelope), "share" (key
     * broadcast), "input" (share delivery: the masked upload of the pending vector), "ack" (survivor set),
     * "unmask" (acknowledgement set). Returns the reply's bytes. Whatever the frames hold, it throws only
     * {@link SecAggException}: a wrong number of frames, or bytes no honest aggregator sends, are a rejected
     * message, never a runtime exception in the caller's loop.
     */
    public byte[] secaggStep(KeyDirectory directory, String step, byte[]... frames) throws SecAggException {
        int index = SECAGG_STEPS.indexOf(step);
        if (index < 0) {
            throw SecAggException.protocol("unknown secure-aggregation step " + step);
        }
        int count = frames == null ? 0 : frames.length;
        boolean complete = frames != null;
        for (int i = 0; complete && i < frames.length; i++) {
            complete = frames[i] != null;
        }
        if (count != SECAGG_FRAMES[index] || !complete) {
            throw SecAggException.rejected("a " + step + " order carries " + SECAGG_FRAMES[index]
                    + " frame(s) of bytes, got " + count + (complete ? "" : " (some missing)"));
        }
        if (directory == null) {
            throw SecAggException.protocol("no key directory yet");
        }
        try {
            SecAggClient client = secagg(directory);
            switch (step) {
                case "advertise":
                    return client.startRound(frames[0], frames[1], pending != null && pendingEnvironment,
                            Contributions.envL1Bound(bundle != null && bundle.actionRates),
                            pending != null && pendingCells);
                case "share":
                    return client.shareKeys(frames[0]);
                case "input":
                    return maskedInput(frames[0]);
                case "ack":
                    return client.consistencyCheck(frames[0]);
                default:
                    return client.unmask(frames[0]);
            }
        } catch (IllegalArgumentException | IndexOutOfBoundsException | NullPointerException | ArithmeticException
                | ClassCastException | NegativeArraySizeException err) {
            // bytes no honest aggregator sends: a typed refusal, never a crash of the caller's loop
            throw SecAggException.rejected("malformed " + step + " frame (" + err.getClass().getSimpleName() + ": "
                    + err.getMessage() + ")");
        }
    }

    /** The masked upload of the pending vector (cleared once uploaded: a second noisy copy would weaken DP). */
    public byte[] maskedInput(byte[] shareDelivery) throws SecAggException {
        if (pending == null) {
            throw SecAggException.protocol("no pending vector: the device answered no RoundRequest, "
                    + "InitialStatesRequest or CellReleaseRequest since its last upload");
        }
        if (secagg == null) {
            throw SecAggException.protocol("no secure-aggregation round in progress");
        }
        byte[] reply;
        try {
            reply = secagg.maskedInput(shareDelivery, pending);
        } catch (IllegalArgumentException err) {     // wrong length: the client's state is unchanged
            throw SecAggException.protocol(err.getMessage());
        }
        pending = null;             // on the ledger already: the client records it before the reply exists
        return reply;
    }
}
