package org.pategail.core;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;
import org.pategail.core.secagg.Bytes;

/**
 * A verified model bundle (the Python SDK's {@code bundle.load_bundle}): manifest.json's format and version,
 * every listed file's size and SHA-256, plain file names, the runtime range, and the cell table. Only
 * java.io and org.json (Android's own JSON API), so it runs unchanged on minSdk 26.
 */
public final class Bundle {
    public static final String MANIFEST = "manifest.json";
    public static final String FORMAT = "pategail-model-bundle";
    public static final int FORMAT_VERSION = 1;
    static final String[] DISCRIMINATOR_ROLES = {"training", "eval", "optimizer", "inference"};
    static final String[] POLICY_TRAINING_ROLES = {"training", "eval", "optimizer"};

    public final File root;
    public final JSONObject manifest;
    /** SHA-256 of manifest.json: the bundle's identity. */
    public final String sha256;
    public final File policy;
    public final File training;
    public final File eval;
    public final File optimizer;
    public final File inference;
    public final File checkpoint;
    /** Cell centres (n_cells, 2): latitude, longitude in degrees. */
    public final double[][] cells;
    public final double alpha;
    public final int candidates;
    /** The environment vector ends with the action-rate part (the manifest's environment.action_rates). */
    public final boolean actionRates;
    /**
     * Days at which the device's initial-state contribution reaches full weight (the manifest's
     * environment.initial_states_days_cap; {@link Contributions#DAYS_CAP} when absent).
     */
    public final int initialStatesDaysCap;
    public final double learningRate;
    public final float expertLabel;
    public final float generatedLabel;
    public final int nParameters;
    /** SHA-256 of the bundle's policy model (the policy in use until a PolicyUpdate is accepted). */
    public final String policySha256;
    /** The policy's maximum-likelihood training artifacts (DP-FedAvg runs); null in other bundles. */
    public final PolicyTraining policyTraining;
    /**
     * A privately released cell table ({@code cells} chosen from a public map by the run's first release): the
     * (lat, lon) of every square of that public map (the manifest's environment.universe, universe.csv). The
     * device's days stay on the public map; it reads them on {@code cells} through {@link #table}. Null: the days
     * are on {@code cells} themselves.
     */
    public final double[][] universe;
    /** The cell of {@code cells} each square of {@link #universe} moves to; null without a universe. */
    public final int[] table;

    /**
     * The manifest's {@code policy_training} section (the Python SDK's {@code PolicyTrainingSpec}): the policy's
     * training, eval and SGD optimizer models for ONNX Runtime's training API, its initial checkpoint, and the
     * trainable parameters in the order of the flat vector a FedAvgRequest carries.
     */
    public static final class PolicyTraining {
        public final File training;
        public final File eval;
        public final File optimizer;
        public final File checkpoint;
        /** Names of the trainable parameters, in flat-vector order (unmodifiable). */
        public final List<String> names;
        private final int[][] shapes;
        /** Length of the flat parameter vector: the sum of the shapes' products. */
        public final long nParameters;
        /** What the optimizer model's learning rate is the SGD rate times ({@code optimizer.learning_rate_scale};
         * the Python SDK's {@code SGD_LEARNING_RATE_SCALE}; 1 in bundles that do not declare it). */
        public final double learningRateScale;

        PolicyTraining(File[] models, File checkpoint, List<String> names, int[][] shapes, long nParameters,
                       double learningRateScale) {
            this.training = models[0];
            this.eval = models[1];
            this.optimizer = models[2];
            this.checkpoint = checkpoint;
            this.names = Collections.unmodifiableList(new ArrayList<>(names));
            this.shapes = shapes;
            this.nParameters = nParameters;
            this.learningRateScale = learningRateScale;
        }

        /** The shape of parameter {@code i} (a copy). */
        public int[] shape(int i) {
            return shapes[i].clone();
        }
    }

    private Bundle(File root, JSONObject manifest, String sha256, File[] models, File checkpoint, double[][] cells,
                   double alpha, int candidates, boolean actionRates, int initialStatesDaysCap,
                   double learningRate, float expert,
                   float generated,
                   int nParameters, String policySha256, PolicyTraining policyTraining, Universe universe) {
        this.root = root;
        this.manifest = manifest;
        this.sha256 = sha256;
        this.policy = models[0];
        this.training = models[1];
        this.eval = models[2];
        this.optimizer = models[3];
        this.inference = models[4];
        this.checkpoint = checkpoint;
        this.cells = cells;
        this.alpha = alpha;
        this.candidates = candidates;
        this.actionRates = actionRates;
        this.initialStatesDaysCap = initialStatesDaysCap;
        this.learningRate = learningRate;
        this.expertLabel = expert;
        this.generatedLabel = generated;
        this.nParameters = nParameters;
        this.policySha256 = policySha256;
        this.policyTraining = policyTraining;
        this.universe = universe == null ? null : universe.squares;
        this.table = universe == null ? null : universe.table;
    }

    /** The cells the device's stored days are on: the public map's squares, or the cell table itself. */
    public double[][] dayCells() {
        return universe == null ? cells : universe;
    }

    /** {@code days} (on {@link #dayCells}) on the cell table: moved through {@link #table} when there is one. */
    public int[][] onTable(int[][] days) {
        return table == null ? days : CellUniverse.onTable(days, table);
    }

    /** A public map read from universe.csv: its squares' (lat, lon) and the cell each moves to. */
    public static final class Universe {
        public final double[][] squares;
        public final int[] table;

        Universe(double[][] squares, int[] table) {
            this.squares = squares;
            this.table = table;
        }
    }

    public static byte[] readAll(File f) throws IOException {
        return readAll(new FileInputStream(f));
    }

    /** Everything {@code stream} holds (closed at the end). */
    public static byte[] readAll(InputStream stream) throws IOException {
        try (InputStream in = stream) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[1 << 16];
            int n;
            while ((n = in.read(buf)) > 0) {
                out.write(buf, 0, n);
            }
            return out.toByteArray();
        }
    }

    public static String sha256Hex(byte[] data) {
        try {
            return Bytes.hex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (NoSuchAlgorithmException err) {
            throw new IllegalStateException(err);
        }
    }

    public static String sha256File(File f) throws IOException {
        try (InputStream in = new FileInputStream(f)) {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 20];
            int n;
            while ((n = in.read(buf)) > 0) {
                md.update(buf, 0, n);
            }
            return Bytes.hex(md.digest());
        } catch (NoSuchAlgorithmException err) {
            throw new IllegalStateException(err);
        }
    }

    /** (1, 19, 2) from "1.19.2" (suffixes such as "+cpu" or "rc1" ignored). */
    static int[] parseVersion(String text) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("^\\s*(\\d+(?:\\.\\d+)*)").matcher(text);
        if (!m.find()) {
            throw new IllegalArgumentException("not a version: " + text);
        }
        String[] parts = m.group(1).split("\\.");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = Integer.parseInt(parts[i]);
        }
        return out;
    }

    /** Python tuple order: element by element, a shorter prefix first. */
    static int compareVersions(int[] a, int[] b) {
        for (int i = 0; i < Math.min(a.length, b.length); i++) {
            if (a[i] != b[i]) {
                return Integer.compare(a[i], b[i]);
            }
        }
        return Integer.compare(a.length, b.length);
    }

    /**
     * Read and verify the bundle at {@code dir} for a runtime of version {@code runtimeVersion} (the ONNX
     * Runtime the app ships, e.g. "1.19.2"; null for a trainer that is not ONNX Runtime and checks the
     * discriminator's declared form itself). Throws BundleException with a one-line reason on any mismatch.
     */
    @SuppressWarnings("unchecked")     // Android's JSONObject.keys() is typed; older org.json builds are raw
    public static Bundle load(File dir, String runtimeVersion) throws BundleException {
        File manifestFile = new File(dir, MANIFEST);
        if (!manifestFile.isFile()) {
            throw new BundleException(dir + ": not a model bundle (no " + MANIFEST + ")");
        }
        byte[] raw;
        try {
            raw = readAll(manifestFile);
        } catch (IOException err) {
            throw new BundleException(manifestFile + ": unreadable (" + err.getMessage() + ")");
        }
        JSONObject m;
        try {
            m = new JSONObject(new String(raw, StandardCharsets.UTF_8));
        } catch (JSONException err) {
            throw new BundleException(manifestFile + ": not valid JSON (" + err.getMessage() + ")");
        }
        if (!FORMAT.equals(m.optString("format"))) {
            throw new BundleException(manifestFile + ": not a " + FORMAT + " manifest");
        }
        if (m.optInt("format_version", -1) != FORMAT_VERSION) {
            throw new BundleException(manifestFile + ": format version " + m.opt("format_version")
                    + "; this SDK reads version " + FORMAT_VERSION);
        }
        try {
            JSONObject files = m.getJSONObject("files");
            JSONObject requires = m.getJSONObject("requires");
            String lo = requires.getString("onnxruntime_min"), hi = requires.getString("onnxruntime_below");
            int[] v = runtimeVersion == null ? null : parseVersion(runtimeVersion);
            if (v != null && (compareVersions(parseVersion(lo), v) > 0 || compareVersions(v, parseVersion(hi)) >= 0)) {
                throw new BundleException("bundle needs onnxruntime >= " + lo + " and < " + hi
                        + ", but onnxruntime " + runtimeVersion + " is installed");
            }
            for (Iterator<String> it = files.keys(); it.hasNext(); ) {
                String name = it.next();
                JSONObject entry = files.getJSONObject(name);
                if (name.isEmpty() || name.contains("/") || name.contains("\\") || name.equals(".")
                        || name.equals("..")) {
                    throw new BundleException(manifestFile + ": file name '" + name + "' is not a plain name in the bundle");
                }
                File f = new File(dir, name);
                if (!f.isFile()) {
                    throw new BundleException(dir + ": " + name + " is missing");
                }
                if (f.length() != entry.getLong("bytes") || !sha256File(f).equals(entry.getString("sha256"))) {
                    throw new BundleException(f + ": SHA-256 does not match the manifest (file altered or truncated)");
                }
            }
            int maxIr = requires.getInt("max_ir_version"), maxOpset = requires.getInt("max_opset");
            JSONObject disc = m.getJSONObject("discriminator");
            File[] models = new File[5];
            models[0] = model(dir, m.getJSONObject("policy").getJSONObject("model"), maxIr, maxOpset, files);
            for (int i = 0; i < DISCRIMINATOR_ROLES.length; i++) {
                models[i + 1] = model(dir, disc.getJSONObject("models").getJSONObject(DISCRIMINATOR_ROLES[i]), maxIr,
                        maxOpset, files);
            }
            File checkpoint = listed(dir, disc.getString("checkpoint"), files);
            int nParameters = 0;
            JSONArray params = disc.getJSONArray("parameters");
            for (int i = 0; i < params.length(); i++) {
                JSONArray shape = params.getJSONObject(i).getJSONArray("shape");
                int size = 1;
                for (int j = 0; j < shape.length(); j++) {
                    size *= shape.getInt(j);
                }
                nParameters += size;
            }
            PolicyTraining policyTraining = policyTraining(dir, m.opt("policy_training"), maxIr, maxOpset, files);
            if (!m.has("environment")) {
                throw new BundleException(dir + ": a models-only bundle (no cell table); devices cannot run it");
            }
            JSONObject env = m.getJSONObject("environment");
            Object rates = env.opt("action_rates");
            if (rates != null && !(rates instanceof Boolean)) {
                throw new BundleException(manifestFile + ": environment.action_rates must be true or false");
            }
            Object cap = env.opt("initial_states_days_cap");
            if (cap != null && !(cap instanceof Integer && (Integer) cap >= 1)) {
                throw new BundleException(manifestFile
                        + ": environment.initial_states_days_cap must be a whole number of days >= 1");
            }
            int daysCap = cap == null ? Contributions.DAYS_CAP : (Integer) cap;
            for (String key : new String[]{"replay", "input_scaling"}) {
                if (disc.has(key)) {
                    // the coordinator would read scores trained without it as trained with it: refuse, never mis-train
                    throw new BundleException(manifestFile + ": discriminator." + key + ": this core trains without "
                            + "it (train with disc_replay_share 0 and disc_owner_scaling off for Java devices)");
                }
            }
            if (env.has("initial_states")) {
                listed(dir, env.getString("initial_states"), files);
            }
            double[][] cells = readCells(listed(dir, env.getString("cells"), files), env.getInt("n_cells"));
            if (cells.length != m.getJSONObject("policy").getJSONObject("config").getInt("n_cells")) {
                throw new BundleException(manifestFile + ": the cell table and the policy disagree on the number of cells");
            }
            Universe universe = null;
            if (env.has("universe")) {
                universe = readUniverse(listed(dir, env.getString("universe"), files), env.getInt("n_universe"),
                        cells);
            }
            if (m.has("privacy")) {
                try {
                    org.pategail.core.secagg.PrivacyPlan.fromManifest(m.getJSONObject("privacy"));
                } catch (IllegalArgumentException err) {
                    throw new BundleException(manifestFile + ": malformed privacy plan (" + err.getMessage() + ")");
                }
            }
            JSONObject labels = disc.getJSONObject("labels");
            return new Bundle(dir, m, sha256Hex(raw), models, checkpoint, cells, env.getDouble("alpha"),
                    env.getInt("candidates"), Boolean.TRUE.equals(rates), daysCap,
                    disc.getJSONObject("optimizer").getDouble("learning_rate"),
                    (float) labels.getDouble("expert"), (float) labels.getDouble("generated"), nParameters,
                    files.getJSONObject(models[0].getName()).getString("sha256"), policyTraining, universe);
        } catch (JSONException | IllegalArgumentException err) {
            throw new BundleException(manifestFile + ": malformed manifest (" + err.getMessage() + ")");
        } catch (IOException err) {
            throw new BundleException(dir + ": unreadable (" + err.getMessage() + ")");
        }
    }

    private static File listed(File dir, String name, JSONObject files) throws BundleException {
        if (!files.has(name)) {
            throw new BundleException(new File(dir, MANIFEST) + ": " + name + " is used but has no hash in 'files'");
        }
        return new File(dir, name);
    }

    /** The {@code policy_training} section verified as the Python SDK does; null when absent. */
    private static PolicyTraining policyTraining(File dir, Object section, int maxIr, int maxOpset, JSONObject files)
            throws BundleException, JSONException {
        if (section == null || JSONObject.NULL.equals(section)) {
            return null;
        }
        if (!(section instanceof JSONObject)) {
            throw new JSONException("policy_training is not an object");
        }
        JSONObject s = (JSONObject) section;
        File[] models = new File[POLICY_TRAINING_ROLES.length];
        for (int i = 0; i < models.length; i++) {
            models[i] = model(dir, s.getJSONObject("models").getJSONObject(POLICY_TRAINING_ROLES[i]), maxIr, maxOpset,
                    files);
        }
        File checkpoint = listed(dir, s.getString("checkpoint"), files);
        JSONArray params = s.getJSONArray("parameters");
        List<String> names = new ArrayList<>();
        int[][] shapes = new int[params.length()][];
        long total = 0;
        try {
            for (int i = 0; i < shapes.length; i++) {
                JSONObject p = params.getJSONObject(i);
                names.add(p.getString("name"));
                JSONArray shape = p.getJSONArray("shape");
                shapes[i] = new int[shape.length()];
                long size = 1;
                for (int j = 0; j < shapes[i].length; j++) {
                    shapes[i][j] = shape.getInt(j);
                    size = Math.multiplyExact(size, shapes[i][j]);
                }
                total = Math.addExact(total, size);
            }
        } catch (ArithmeticException err) {
            total = -1;                         // no real vector has that many parameters: it cannot match
        }
        if (total != s.getLong("n_parameters")) {
            throw new BundleException(new File(dir, MANIFEST)
                    + ": policy_training: the parameter shapes do not add up to n_parameters");
        }
        JSONObject optimizer = s.optJSONObject("optimizer");
        double scale = optimizer == null ? 1.0 : optimizer.optDouble("learning_rate_scale", 1.0);
        if (!(scale > 0 && !Double.isInfinite(scale))) {
            throw new BundleException(new File(dir, MANIFEST)
                    + ": policy_training: the optimizer's learning_rate_scale must be > 0");
        }
        return new PolicyTraining(models, checkpoint, names, shapes, total, scale);
    }

    private static File model(File dir, JSONObject d, int maxIr, int maxOpset, JSONObject files)
            throws BundleException, JSONException {
        String file = d.getString("file");
        if (d.getInt("ir_version") > maxIr || d.getInt("opset") > maxOpset) {
            throw new BundleException(file + ": IR " + d.getInt("ir_version") + " / opset " + d.getInt("opset")
                    + " above what the bundle allows (IR <= " + maxIr + ", opset <= " + maxOpset + ")");
        }
        return listed(dir, file, files);
    }

    /**
     * The public map in {@code f} (header "square,lat,lon,cell", one row per square in order, {@code nUniverse}
     * rows) checked as the Python SDK's {@code Environment.read} checks it: integer cell ids, coordinates in
     * range, every square moved to a cell of {@code cells}, and every cell a square of the map that moves to itself
     * (the released table is a subset of the map). BundleException "invalid public map (...)" otherwise.
     */
    public static Universe readUniverse(File f, int nUniverse, double[][] cells) throws IOException, BundleException {
        double[][] rows = readTable(f, "square,lat,lon,cell");
        String problem = null;
        double[][] squares = new double[rows.length][];
        int[] table = new int[rows.length];
        if (rows.length != nUniverse) {
            problem = "one row per square of the public map, in order";
        }
        for (int i = 0; problem == null && i < rows.length; i++) {
            squares[i] = new double[]{rows[i][1], rows[i][2]};
            if (rows[i][0] != i) {
                problem = "one row per square of the public map, in order";
            }
        }
        for (int i = 0; problem == null && i < rows.length; i++) {
            if (rows[i][3] != Math.rint(rows[i][3])) {
                problem = "cell ids must be integers";
            }
        }
        for (int i = 0; problem == null && i < rows.length; i++) {
            double lat = squares[i][0], lon = squares[i][1];
            if (!(Math.abs(lat) <= 90 && Math.abs(lon) <= 180)) {
                problem = "coordinates out of range";
            }
        }
        for (int i = 0; problem == null && i < rows.length; i++) {
            double c = rows[i][3];
            if (!(c >= 0 && c < cells.length)) {
                problem = "a square moves to a cell outside the table of " + cells.length;
            } else {
                table[i] = (int) c;
            }
        }
        if (problem == null) {
            boolean[] held = new boolean[cells.length];
            for (int i = 0; i < rows.length; i++) {
                double[] cell = cells[table[i]];
                held[table[i]] |= squares[i][0] == cell[0] && squares[i][1] == cell[1];
            }
            for (boolean h : held) {
                if (!h) {
                    problem = "a cell of the table is no square of the public map that moves to itself";
                    break;
                }
            }
        }
        if (problem != null) {
            throw new BundleException(f + ": invalid public map (" + problem + ")");
        }
        return new Universe(squares, table);
    }

    /** The rows of a CSV table under {@code header}, every field a number (the Python SDK's {@code _read_table}). */
    private static double[][] readTable(File f, String header) throws IOException, BundleException {
        String text = new String(readAll(f), StandardCharsets.UTF_8);
        String[] lines = text.isEmpty() ? new String[0] : text.split("\r\n|\n|\r", -1);
        int n = lines.length > 0 && lines[lines.length - 1].isEmpty() ? lines.length - 1 : lines.length;
        if (n == 0 || !lines[0].equals(header)) {
            throw new BundleException(f + ": header must be '" + header + "'");
        }
        int width = header.split(",").length;
        double[][] rows = new double[n - 1][width];
        for (int i = 1; i < n; i++) {
            String[] parts = lines[i].split(",", -1);
            try {
                if (parts.length != width) {
                    throw new NumberFormatException();
                }
                for (int j = 0; j < width; j++) {
                    rows[i - 1][j] = pythonFloat(parts[j]);
                }
            } catch (NumberFormatException err) {
                throw new BundleException(f + ": malformed row");
            }
        }
        return rows;
    }

    private static final java.util.regex.Pattern FLOAT = java.util.regex.Pattern.compile(
            "[+-]?(?:inf|infinity|nan|(?:\\d(?:_?\\d)*(?:\\.(?:\\d(?:_?\\d)*)?)?|\\.\\d(?:_?\\d)*)"
                    + "(?:e[+-]?\\d(?:_?\\d)*)?)", java.util.regex.Pattern.CASE_INSENSITIVE);

    /** A number as Python's {@code float(text)} reads it ("nan", "inf", "1_000", surrounding blanks); else
     * NumberFormatException. */
    static double pythonFloat(String text) {
        int a = 0, b = text.length();
        while (a < b && Character.isWhitespace(text.charAt(a))) {
            a++;
        }
        while (b > a && Character.isWhitespace(text.charAt(b - 1))) {
            b--;
        }
        String t = text.substring(a, b);
        if (!FLOAT.matcher(t).matches()) {
            throw new NumberFormatException(text);
        }
        String body = t.replaceFirst("^[+-]", "").toLowerCase(java.util.Locale.ROOT);
        boolean negative = t.startsWith("-");
        if (body.startsWith("inf")) {
            return negative ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
        }
        if (body.equals("nan")) {
            return Double.NaN;
        }
        return Double.parseDouble(t.replace("_", ""));
    }

    private static double[][] readCells(File f, int nCells) throws IOException, BundleException {
        String[] lines = new String(readAll(f), StandardCharsets.UTF_8).split("\n");
        if (lines.length == 0 || !lines[0].equals("cell,lat,lon")) {
            throw new BundleException(f + ": header must be 'cell,lat,lon'");
        }
        List<double[]> rows = new ArrayList<>();
        for (int i = 1; i < lines.length; i++) {
            if (lines[i].isEmpty()) {
                continue;
            }
            String[] parts = lines[i].split(",");
            try {
                if (parts.length != 3) {
                    throw new NumberFormatException();
                }
                double lat = Double.parseDouble(parts[1]), lon = Double.parseDouble(parts[2]);
                if (!(Math.abs(lat) <= 90 && Math.abs(lon) <= 180)) {
                    throw new BundleException(f + ": row " + i + ": coordinates out of range");
                }
                rows.add(new double[]{lat, lon});
            } catch (NumberFormatException err) {
                throw new BundleException(f + ": malformed row " + i);
            }
        }
        if (rows.size() != nCells) {
            throw new BundleException(f + ": cell table inconsistent with the manifest");
        }
        return rows.toArray(new double[0][]);
    }
}
