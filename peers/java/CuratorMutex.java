// CuratorMutex: Apache Curator's InterProcessMutex driven by the workload dlbench runs: N
// clients, each with its own CuratorFramework (its own ZooKeeper session), as N application
// processes would; each picks a key uniformly from --keys keys (1 = hot key), acquire then
// release at once, for --warmup + --seconds. Prints one JSON line: acquisitions completed in
// the measured window, acquire latency percentiles of the operations that started in it.
//
// Documented usage: one started CuratorFramework per process, one InterProcessMutex per lock
// path (reused: the mutex is the application's handle on that lock), acquire(time, unit),
// release().

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorMutex {
    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        a.put("clients", "8");
        a.put("keys", "1");
        a.put("seconds", "5");
        a.put("warmup", "1");
        a.put("prefix", "peer");
        a.put("seed", "1");
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                System.err.println("curator-mutex: bad argument " + argv[i]);
                System.exit(2);
            }
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        String endpoints = a.get("endpoints");
        if (endpoints == null) {
            System.err.println("curator-mutex: --endpoints is required");
            System.exit(2);
        }
        int clients = Integer.parseInt(a.get("clients"));
        int keys = Integer.parseInt(a.get("keys"));
        double seconds = Double.parseDouble(a.get("seconds"));
        double warmup = Double.parseDouble(a.get("warmup"));
        String prefix = a.get("prefix");
        long seed = Long.parseLong(a.get("seed"));

        List<CuratorFramework> cfs = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            CuratorFramework cf = CuratorFrameworkFactory.newClient(endpoints, 10_000, 10_000, new ExponentialBackoffRetry(100, 3));
            cf.start();
            if (!cf.blockUntilConnected(30, TimeUnit.SECONDS)) {
                System.err.println("curator-mutex: no connection to " + endpoints);
                System.exit(1);
            }
            cfs.add(cf);
        }
        long start = System.nanoTime();
        long begin = start + (long) (warmup * 1e9);
        long end = begin + (long) (seconds * 1e9);
        int[] counts = new int[clients];
        int[] errors = new int[clients];
        List<List<Double>> lats = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            final int c = i;
            final List<Double> lat = new ArrayList<>();
            lats.add(lat);
            Thread t = new Thread(() -> {
                Random rng = new Random(seed * 1_000_003L + c);
                Map<Integer, InterProcessMutex> mutexes = new HashMap<>();
                while (true) {
                    long t0 = System.nanoTime();
                    if (t0 >= end) {
                        return;
                    }
                    int k = rng.nextInt(keys);
                    InterProcessMutex m = mutexes.computeIfAbsent(k, x -> new InterProcessMutex(cfs.get(c), "/" + prefix + "/" + prefix + "-" + x));
                    try {
                        if (!m.acquire(5, TimeUnit.SECONDS)) {
                            errors[c]++;
                            continue;
                        }
                        long t1 = System.nanoTime();
                        m.release();
                        if (t1 >= begin && t1 <= end) {
                            counts[c]++;
                            if (t0 >= begin) {
                                lat.add((t1 - t0) / 1e3);
                            }
                        }
                    } catch (Exception e) {
                        errors[c]++;
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        for (CuratorFramework cf : cfs) {
            cf.close();
        }
        long total = 0, errs = 0;
        List<Double> all = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            total += counts[i];
            errs += errors[i];
            all.addAll(lats.get(i));
        }
        Collections.sort(all);
        String version = "";
        // Debian's jars carry Maven's pom.properties, not an Implementation-Version.
        try (java.io.InputStream in = InterProcessMutex.class.getResourceAsStream("/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            if (in != null) {
                java.util.Properties p = new java.util.Properties();
                p.load(in);
                version = p.getProperty("version", "");
            }
        }
        System.out.printf("{\"client\": \"Curator %s InterProcessMutex\", \"clients\": %d, \"keys\": %d, \"acquisitions\": %d, \"seconds\": %s, "
                + "\"per_sec\": %s, \"errors\": %d, \"p50_us\": %s, \"p99_us\": %s}%n",
            version, clients, keys, total, seconds, total / seconds, errs, pct(all, 0.5), pct(all, 0.99));
    }

    static String pct(List<Double> v, double q) {
        if (v.isEmpty()) {
            return "null";
        }
        return String.valueOf(v.get(Math.min(v.size() - 1, (int) (q * v.size()))));
    }
}
