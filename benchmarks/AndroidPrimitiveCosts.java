import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.security.SecureRandom;

import org.pategail.core.secagg.Checksum;
import org.pategail.core.secagg.Crypto;
import org.pategail.core.secagg.Noise;
import org.pategail.core.secagg.Prg;
import org.pategail.core.secagg.Shamir;

/**
 * Where a Java device's CPU goes in one secure round with n = 100 (all pairs) and M = 4,096: each primitive
 * run as many times as the client runs it in that round, timed with the thread's CPU clock after warm-up.
 * Run by benchmarks/android_secagg_round.py (javac against the core's classes).
 */
public final class AndroidPrimitiveCosts {
    public static void main(String[] args) throws Exception {
        int n = 100, m = 4096, t = n / 2 + 1, reps = Integer.parseInt(args.length > 0 ? args[0] : "10");
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        SecureRandom random = new SecureRandom();
        byte[] key = Crypto.randomKey(random), peer = Crypto.x25519Public(Crypto.randomKey(random));
        byte[] signing = Crypto.randomKey(random), pub = Crypto.ed25519Public(signing);
        byte[] msg = new byte[80], sig = Crypto.sign(signing, msg);
        int[] xs = new int[n];
        for (int i = 0; i < n; i++) {
            xs[i] = i + 1;
        }
        byte[] plain = new byte[16 + 66], aad = new byte[16];
        byte[] sealed = Crypto.seal(key, plain, aad, random);
        Noise noise = new Noise(random);
        String[] names = {"masks: 100 expansions of 2M + 1 words (AES)", "X25519: 199 agreements",
                "Ed25519: 149 verifications + 5 signatures", "Shamir: 2 splits, 100 holders, t = 51",
                "AES-GCM: 99 seals + 99 opens", "noise: 2 shares of M (SecureRandom)", "checksum of 2M words"};
        double[] best = new double[names.length];
        java.util.Arrays.fill(best, Double.MAX_VALUE);
        for (int rep = 0; rep < reps; rep++) {
            double[] ms = new double[names.length];
            long c = mx.getCurrentThreadCpuTime();
            for (int i = 0; i < n; i++) {
                Prg.expandMask(key, 2 * m);
            }
            ms[0] = lap(mx, c);
            c = mx.getCurrentThreadCpuTime();
            for (int i = 0; i < 2 * (n - 1) + 1; i++) {
                Crypto.agree(key, peer);
            }
            ms[1] = lap(mx, c);
            c = mx.getCurrentThreadCpuTime();
            for (int i = 0; i < (n - 1) + (t - 1); i++) {
                Crypto.verify(pub, sig, msg);
            }
            for (int i = 0; i < 5; i++) {
                Crypto.sign(signing, msg);
            }
            ms[2] = lap(mx, c);
            c = mx.getCurrentThreadCpuTime();
            Shamir.split(key, xs, t, random);
            Shamir.split(key, xs, t, random);
            ms[3] = lap(mx, c);
            c = mx.getCurrentThreadCpuTime();
            for (int i = 0; i < n - 1; i++) {
                Crypto.seal(key, plain, aad, random);
                Crypto.openSealed(key, sealed, aad);
            }
            ms[4] = lap(mx, c);
            c = mx.getCurrentThreadCpuTime();
            noise.discreteLaplaceShare(2000.0 * (1 << 24), 70, m);
            noise.discreteLaplaceShare(2000.0 * (1 << 24), 70, m);
            ms[5] = lap(mx, c);
            c = mx.getCurrentThreadCpuTime();
            Checksum.checksum(new long[2 * m], Checksum.weights(key, 2 * m), 0L);
            ms[6] = lap(mx, c);
            for (int i = 0; i < names.length; i++) {
                best[i] = Math.min(best[i], ms[i]);
            }
        }
        double total = 0;
        for (int i = 0; i < names.length; i++) {
            System.out.printf("| %s | %.1f |%n", names[i], best[i]);
            total += best[i];
        }
        System.out.printf("| sum | %.1f |%n", total);
    }

    private static double lap(ThreadMXBean mx, long start) {
        return (mx.getCurrentThreadCpuTime() - start) / 1e6;
    }
}
