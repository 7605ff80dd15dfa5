package interop;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.remoting.InvokeCallback;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.netty.ResponseFuture;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.header.controller.GetMetaDataResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.GetReplicaInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.ApplyBrokerIdRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.GetNextBrokerIdRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.GetNextBrokerIdResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.register.RegisterBrokerToControllerRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.BrokerHeartbeatRequestHeader;

/**
 * A controller load generator that speaks RocketMQ remoting exactly as brokers do (the requests of the broker's
 * BrokerOuterAPI, built from RocketMQ's own header classes and sent by its NettyRemotingClient), for
 * tools/bench/peers.py. It finds the leader with GET_CONTROLLER_METADATA_INFO (1005) and sends everything to it.
 *
 * <pre>
 * java interop.ControllerLoad ADDRS register N SETS CONCURRENCY
 *     registration storm: N brokers in SETS broker sets, CONCURRENCY at once, each running the broker's sequence
 *     1012 GET_NEXT_BROKER_ID, 1013 APPLY_BROKER_ID, 1003 REGISTER_BROKER (a refused apply starts again at 1012);
 *     the time until all have ids.
 * java interop.ControllerLoad ADDRS heartbeat N SETS INFLIGHT SECONDS
 *     registers N brokers (as above), then keeps INFLIGHT BROKER_HEARTBEAT (904) requests in flight for
 *     SECONDS (the first fifth is warm-up, not counted): acknowledged/s, p50/p99.
 * java interop.ControllerLoad ADDRS steady N SETS RATE SECONDS
 *     registers N brokers, then each sends RATE heartbeats a second (spread evenly) for SECONDS: p50/p99.
 * java interop.ControllerLoad ADDRS script N SETS
 *     N brokers in SETS broker sets, driven by commands on stdin (see script()): the rows that need the caller
 *     between steps (a restart, 20 kills, RSS at one size) run on one set of registered brokers.
 * java interop.ControllerLoad ADDRS failover N SETS INFLIGHT
 *     registers N brokers, heartbeats them (INFLIGHT in flight), prints {"ready": ...} with the leader, then on
 *     the line "killed" on stdin (sent right after the leader was killed) stops the load and measures the time
 *     until a new leader answers GET_REPLICA_INFO (1004) and accepts a heartbeat (904).
 * </pre>
 *
 * ADDRS: the controllers' remoting addresses, ';'-separated. One JSON line per result on stdout; each carries the
 * process CPU seconds of this JVM (cpu_s) and the wall seconds (wall_s), so a reader sees it is not the limit.
 */
public class ControllerLoad {
    static final String CLUSTER = "PeersCluster";
    static final long TIMEOUT_MS = 5000;
    /** The broker-set names' prefix (-Dpeers.prefix): distinct per run, so that each run registers new sets. */
    static final String PREFIX = System.getProperty("peers.prefix", "peers");

    final List<String> addrs;
    final NettyRemotingClient client;
    volatile String leader;

    ControllerLoad(List<String> addrs) {
        this.addrs = addrs;
        NettyClientConfig config = new NettyClientConfig();
        config.setClientAsyncSemaphoreValue(1 << 20);
        this.client = new NettyRemotingClient(config);
        this.client.start();
    }

    static final class Broker {
        final String set;
        final String addr;
        long id = -1;

        Broker(String set, String addr) {
            this.set = set;
            this.addr = addr;
        }
    }

    static double cpuSeconds() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
        }
        return -1;
    }

    /** The address whose 1005 answer says it is the leader, or null when none does (yet). */
    String findLeader(String exclude) {
        for (String a : addrs) {
            if (a.equals(exclude)) {
                continue;
            }
            try {
                RemotingCommand r = client.invokeSync(a, RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_GET_METADATA_INFO, null), 1000);
                if (r != null && r.getCode() == ResponseCode.SUCCESS) {
                    GetMetaDataResponseHeader h = r.decodeCommandCustomHeader(GetMetaDataResponseHeader.class);
                    if (h.isLeader()) {
                        return a;
                    }
                }
            } catch (Exception e) {
                // not serving (yet): ask the next one
            }
        }
        return null;
    }

    /** The leader once it serves: it says so to 1005 and answers a 1012 with SUCCESS (a newly elected
     *  DLedgerController says it leads before it has caught up its state machine, and refuses until then). */
    String awaitLeader(long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            String l = findLeader(null);
            if (l != null) {
                leader = l;
                try {
                    if (sync(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, new GetNextBrokerIdRequestHeader(CLUSTER, PREFIX + "-ready")).getCode() == ResponseCode.SUCCESS) {
                        return l;
                    }
                } catch (Exception e) {
                    // not serving yet
                }
            }
            Thread.sleep(50); // polling the controllers' answers: there is nothing to wait on
        }
        throw new IllegalStateException("no controller says it is the leader within " + timeoutMs + " ms: " + addrs);
    }

    static List<Broker> brokers(int n, int sets) {
        List<Broker> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            // a distinct fake address per broker: 127.0.0.1 with a port that no broker serves
            out.add(new Broker(String.format("%s-%05d", PREFIX, i % sets), "127.0.0.1:" + (20000 + i)));
        }
        return out;
    }

    RemotingCommand sync(int code, org.apache.rocketmq.remoting.CommandCustomHeader header) throws Exception {
        return client.invokeSync(leader, RemotingCommand.createRequestCommand(code, header), TIMEOUT_MS);
    }

    static final long REGISTER_DEADLINE_MS = 60_000;

    /** The broker's registration sequence (ReplicasManager): 1012, 1013, 1003; a refused apply starts again at
     *  1012 and so, after a short pause, does any other failure (as a broker retries on its next period), until
     *  REGISTER_DEADLINE_MS. The number of attempts after the first. */
    int register(Broker b) throws Exception {
        int retries = 0;
        long deadline = System.currentTimeMillis() + REGISTER_DEADLINE_MS;
        String last = null;
        for (int attempt = 0; System.currentTimeMillis() < deadline; attempt++) {
            if (attempt > 0 && last != null) {
                Thread.sleep(20); // a retry's back-off after a failure, bounded by the deadline
            }
            last = null;
            RemotingCommand r;
            try {
                r = sync(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, new GetNextBrokerIdRequestHeader(CLUSTER, b.set));
            } catch (Exception e) {
                last = "1012 " + e;
                retries++;
                continue;
            }
            if (r.getCode() != ResponseCode.SUCCESS) {
                last = "1012 " + b.set + ": " + r.getCode() + " " + r.getRemark();
                retries++;
                continue;
            }
            long next = r.decodeCommandCustomHeader(GetNextBrokerIdResponseHeader.class).getNextBrokerId();
            String check = b.addr + ";" + System.currentTimeMillis();
            try {
                r = sync(RequestCode.CONTROLLER_APPLY_BROKER_ID, new ApplyBrokerIdRequestHeader(CLUSTER, b.set, next, check));
                if (r.getCode() != ResponseCode.SUCCESS) {
                    retries++; // another broker of the set took this id first: ask again, as ReplicasManager does
                    continue;
                }
                r = sync(RequestCode.CONTROLLER_REGISTER_BROKER, new RegisterBrokerToControllerRequestHeader(CLUSTER, b.set, next, b.addr));
            } catch (Exception e) {
                last = "1013/1003 " + e;
                retries++;
                continue;
            }
            if (r.getCode() != ResponseCode.SUCCESS) {
                last = "1003 " + b.set + "/" + next + ": " + r.getCode() + " " + r.getRemark();
                retries++;
                continue;
            }
            b.id = next;
            return retries;
        }
        throw new IllegalStateException(b.set + ": no id within " + REGISTER_DEADLINE_MS + " ms, last: " + last);
    }

    /** Registers every broker, `concurrency` at once; the result line. */
    Map<String, Object> registerAll(List<Broker> brokers, int sets, int concurrency) throws Exception {
        double cpu0 = cpuSeconds();
        long t0 = System.nanoTime();
        ExecutorService pool = Executors.newFixedThreadPool(concurrency);
        AtomicInteger retries = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        AtomicLong lastError = new AtomicLong();
        String[] firstError = new String[1];
        for (Broker b : brokers) {
            pool.execute(() -> {
                try {
                    retries.addAndGet(register(b));
                } catch (Exception e) {
                    errors.incrementAndGet();
                    synchronized (firstError) {
                        if (firstError[0] == null) {
                            firstError[0] = String.valueOf(e);
                        }
                    }
                }
            });
        }
        pool.shutdown();
        pool.awaitTermination(1, TimeUnit.HOURS);
        double wall = (System.nanoTime() - t0) / 1e9;
        Map<String, Set<Long>> ids = new HashMap<>();
        int registered = 0;
        int duplicates = 0;
        for (Broker b : brokers) {
            if (b.id >= 0) {
                registered++;
                if (!ids.computeIfAbsent(b.set, k -> new HashSet<>()).add(b.id)) {
                    duplicates++;
                }
            }
        }
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("mode", "register");
        out.put("brokers", brokers.size());
        out.put("sets", sets);
        out.put("concurrency", concurrency);
        out.put("registered", registered);
        out.put("duplicate_ids", duplicates);
        out.put("retries", retries.get());
        out.put("errors", errors.get());
        out.put("first_error", firstError[0]);
        out.put("seconds", wall);
        out.put("cpu_s", cpuSeconds() - cpu0);
        out.put("wall_s", wall);
        return out;
    }

    static BrokerHeartbeatRequestHeader heartbeat(Broker b) {
        // the fields BrokerOuterAPI.sendHeartbeatToController sets
        BrokerHeartbeatRequestHeader h = new BrokerHeartbeatRequestHeader();
        h.setClusterName(CLUSTER);
        h.setBrokerAddr(b.addr);
        h.setBrokerName(b.set);
        h.setEpoch(0);
        h.setMaxOffset(0L);
        h.setConfirmOffset(0L);
        h.setHeartbeatTimeoutMills(600_000L); // no broker expires while the benchmark runs
        h.setElectionPriority(0);
        h.setBrokerId(b.id);
        return h;
    }

    /** Latencies (us) of acknowledged requests inside the measured window, and the failures. */
    static final class Record {
        final long[] lat;
        final AtomicInteger n = new AtomicInteger();
        final AtomicLong acked = new AtomicLong();
        final AtomicLong errors = new AtomicLong();
        final AtomicLong totalAcked = new AtomicLong(); // warm-up included: what reached the controller's log
        volatile long windowStart = Long.MAX_VALUE;
        volatile long windowEnd = Long.MAX_VALUE;

        Record(int cap) {
            lat = new long[cap];
        }

        final AtomicLong sentInWindow = new AtomicLong();

        /** Called when a request is sent: whether it belongs to the measured window. */
        boolean sent(long sentNanos) {
            boolean in = sentNanos >= windowStart && sentNanos < windowEnd;
            if (in) {
                sentInWindow.incrementAndGet();
            }
            return in;
        }

        /** A request sent in the window counts however late its answer comes (an overloaded controller's
         *  late answers are its latency); one never answered by the end of the drain counts as unanswered. */
        void done(long sentNanos, boolean ok) {
            long now = System.nanoTime();
            if (ok) {
                totalAcked.incrementAndGet();
            }
            if (sentNanos < windowStart || sentNanos >= windowEnd) {
                return;
            }
            if (!ok) {
                errors.incrementAndGet();
                return;
            }
            acked.incrementAndGet();
            int i = n.getAndIncrement();
            if (i < lat.length) {
                lat[i] = (now - sentNanos) / 1000;
            }
        }

        void summary(Map<String, Object> out, double seconds) {
            int k = Math.min(n.get(), lat.length);
            long[] s = Arrays.copyOf(lat, k);
            Arrays.sort(s);
            out.put("acknowledged", acked.get());
            out.put("total_acknowledged", totalAcked.get());
            out.put("errors", errors.get());
            out.put("sent", sentInWindow.get());
            out.put("unanswered", sentInWindow.get() - acked.get() - errors.get());
            out.put("per_s", acked.get() / seconds);
            out.put("p50_ms", k == 0 ? null : s[(int) (0.50 * (k - 1))] / 1000.0);
            out.put("p99_ms", k == 0 ? null : s[(int) (0.99 * (k - 1))] / 1000.0);
            out.put("max_ms", k == 0 ? null : s[k - 1] / 1000.0);
        }
    }

    void send(Broker b, Record rec, Runnable after) {
        long sent = System.nanoTime();
        rec.sent(sent);
        RemotingCommand req = RemotingCommand.createRequestCommand(RequestCode.BROKER_HEARTBEAT, heartbeat(b));
        try {
            client.invokeAsync(leader, req, TIMEOUT_MS, new InvokeCallback() {
                @Override
                public void operationComplete(ResponseFuture f) {
                    RemotingCommand r = f.getResponseCommand();
                    rec.done(sent, r != null && r.getCode() == ResponseCode.SUCCESS);
                    if (after != null) {
                        after.run();
                    }
                }
            });
        } catch (Exception e) {
            rec.done(sent, false);
            if (after != null) {
                after.run();
            }
        }
    }

    /** Saturation: `inflight` requests always outstanding (each completion sends the next). */
    Map<String, Object> saturate(List<Broker> brokers, int inflight, double seconds) throws Exception {
        return saturate(brokers, inflight, seconds, 0);
    }

    /** Saturation for `seconds` (the first fifth warm-up), or with `count` > 0 until `count` heartbeats were sent
     *  or `seconds` (when > 0) passed, whichever first (no warm-up: every one counts; seconds in the result is
     *  then the time they took). */
    Map<String, Object> saturate(List<Broker> brokers, int inflight, double seconds, long count) throws Exception {
        Record rec = new Record(4_000_000);
        AtomicLong next = new AtomicLong();
        long warm = count > 0 ? 0 : (long) (seconds * 0.2 * 1e9);
        long t0 = System.nanoTime();
        rec.windowStart = t0 + warm;
        rec.windowEnd = count > 0 && seconds <= 0 ? Long.MAX_VALUE : t0 + (long) (seconds * 1e9);
        AtomicInteger outstanding = new AtomicInteger();
        Object idle = new Object();
        Runnable[] loop = new Runnable[1];
        loop[0] = () -> {
            if (System.nanoTime() >= rec.windowEnd || (count > 0 && next.get() >= count)) {
                if (outstanding.decrementAndGet() == 0) {
                    synchronized (idle) {
                        idle.notifyAll();
                    }
                }
                return;
            }
            send(brokers.get((int) (next.getAndIncrement() % brokers.size())), rec, loop[0]);
        };
        double cpu0 = -1;
        outstanding.set(inflight);
        for (int i = 0; i < inflight; i++) {
            loop[0].run();
        }
        long sleepUntil = rec.windowStart;
        while (System.nanoTime() < sleepUntil) {
            Thread.sleep(Math.max(1, (sleepUntil - System.nanoTime()) / 1_000_000)); // the warm-up's end, a timed phase
        }
        cpu0 = cpuSeconds();
        synchronized (idle) {
            while (outstanding.get() > 0) {
                idle.wait(1000);
            }
        }
        double measured = (count > 0 ? Math.min(System.nanoTime(), rec.windowEnd) - t0 : rec.windowEnd - rec.windowStart) / 1e9;
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("mode", "heartbeat");
        out.put("count", count);
        out.put("brokers", brokers.size());
        out.put("inflight", inflight);
        out.put("seconds", measured);
        rec.summary(out, measured);
        out.put("cpu_s", cpuSeconds() - cpu0);
        out.put("wall_s", measured);
        return out;
    }

    /** Every broker `rate` heartbeats a second, spread evenly over each period, for `seconds`. */
    Map<String, Object> steady(List<Broker> brokers, double rate, double seconds) throws Exception {
        Record rec = new Record(4_000_000);
        long t0 = System.nanoTime();
        long warm = (long) (Math.min(2.0, seconds * 0.2) * 1e9);
        rec.windowStart = t0 + warm;
        rec.windowEnd = t0 + (long) (seconds * 1e9);
        double perSecond = brokers.size() * rate;
        long sent = 0;
        int i = 0;
        double cpu0 = Double.NaN;
        AtomicInteger pending = new AtomicInteger();
        Object idle = new Object();
        Runnable answered = () -> {
            if (pending.decrementAndGet() == 0) {
                synchronized (idle) {
                    idle.notifyAll();
                }
            }
        };
        while (true) {
            long now = System.nanoTime();
            if (now >= rec.windowEnd) {
                break;
            }
            if (Double.isNaN(cpu0) && now >= rec.windowStart) {
                cpu0 = cpuSeconds();
            }
            long due = (long) ((now - t0) / 1e9 * perSecond);
            for (; sent < due; sent++) {
                pending.incrementAndGet();
                send(brokers.get(i), rec, answered);
                i = (i + 1) % brokers.size();
            }
            Thread.sleep(5); // the send schedule's tick (a pacing clock, not a wait for anything)
        }
        long deadline = System.nanoTime() + TIMEOUT_MS * 2_000_000L; // every request answers or times out by then
        synchronized (idle) {
            while (pending.get() > 0 && System.nanoTime() < deadline) {
                idle.wait(100);
            }
        }
        double measured = (rec.windowEnd - rec.windowStart) / 1e9;
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("mode", "steady");
        out.put("brokers", brokers.size());
        out.put("rate_per_broker", rate);
        out.put("seconds", measured);
        rec.summary(out, measured);
        out.put("cpu_s", cpuSeconds() - (Double.isNaN(cpu0) ? 0 : cpu0));
        out.put("wall_s", measured);
        return out;
    }

    /** After "killed" on stdin: the time until a new leader answers 1004 and accepts 904. */
    Map<String, Object> failover(List<Broker> brokers, int inflight) throws Exception {
        Record rec = new Record(1);
        rec.windowStart = 0;
        AtomicLong next = new AtomicLong();
        AtomicInteger stop = new AtomicInteger();
        Semaphore slots = new Semaphore(inflight);
        Thread load = new Thread(() -> {
            while (stop.get() == 0) {
                try {
                    slots.acquire();
                } catch (InterruptedException e) {
                    return;
                }
                send(brokers.get((int) (next.getAndIncrement() % brokers.size())), rec, slots::release);
            }
        });
        return afterKill(brokers, rec, stop, load);
    }

    /** The same under the realistic load: every broker `rate` heartbeats a second, paced as in steady(). */
    Map<String, Object> failoverSteady(List<Broker> brokers, double rate) throws Exception {
        Record rec = new Record(1);
        rec.windowStart = 0;
        AtomicInteger stop = new AtomicInteger();
        Thread load = new Thread(() -> {
            double perSecond = brokers.size() * rate;
            long t0 = System.nanoTime();
            long sent = 0;
            int i = 0;
            while (stop.get() == 0) {
                long due = (long) ((System.nanoTime() - t0) / 1e9 * perSecond);
                for (; sent < due && stop.get() == 0; sent++) {
                    send(brokers.get(i), rec, null);
                    i = (i + 1) % brokers.size();
                }
                try {
                    Thread.sleep(5); // the send schedule's tick (a pacing clock, not a wait for anything)
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        Map<String, Object> out = afterKill(brokers, rec, stop, load);
        out.put("rate_per_broker", rate);
        return out;
    }

    static final java.io.BufferedReader IN = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));

    Map<String, Object> afterKill(List<Broker> brokers, Record rec, AtomicInteger stop, Thread load) throws Exception {
        load.setDaemon(true);
        load.start();
        String old = leader;
        emit(Map.of("mode", "failover", "ready", true, "leader", old));
        String line;
        while ((line = IN.readLine()) != null && !line.trim().equals("killed")) {
            // wait for the kill
        }
        long t0 = System.nanoTime();
        long ackedBefore = rec.totalAcked.get();
        // the load stops with the leader: sent to a dead address it would only spin on refused connections, on
        // the cores the survivors need (brokers retry once a heartbeat period, not in a loop)
        stop.set(1);
        double cpu0 = cpuSeconds();
        Broker probe = brokers.get(0);
        long leaderAt = -1;
        String now = null;
        while ((System.nanoTime() - t0) < 120e9) {
            now = findLeader(old);
            if (now != null) {
                if (leaderAt < 0) {
                    leaderAt = System.nanoTime();
                }
                leader = now;
                try {
                    RemotingCommand r = sync(RequestCode.CONTROLLER_GET_REPLICA_INFO, new GetReplicaInfoRequestHeader(probe.set));
                    if (r.getCode() == ResponseCode.SUCCESS) {
                        RemotingCommand h = sync(RequestCode.BROKER_HEARTBEAT, heartbeat(probe));
                        if (h.getCode() == ResponseCode.SUCCESS) {
                            break;
                        }
                    }
                } catch (Exception e) {
                    // the new leader is not serving yet
                }
            }
            Thread.sleep(10); // polling: a dead leader sends no signal
        }
        double took = (System.nanoTime() - t0) / 1e9;
        stop.set(1);
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("mode", "failover");
        out.put("brokers", brokers.size());
        out.put("old_leader", old);
        out.put("new_leader", now);
        out.put("leader_found_s", leaderAt < 0 ? null : (leaderAt - t0) / 1e9);
        out.put("serving_s", now == null ? null : took);
        out.put("acknowledged_before_kill", ackedBefore);
        out.put("cpu_s", cpuSeconds() - cpu0);
        out.put("wall_s", took);
        return out;
    }

    /** Commands from stdin, one JSON line each (two for failover: ready, then the result), over one list of
     *  brokers that grows as `register` asks: register K (the first K have ids), steady K RATE SECONDS,
     *  saturate K INFLIGHT SECONDS COUNT, failover K RATE (then "killed"), quit. */
    int script(List<Broker> all, int sets) throws Exception {
        int registered = 0;
        String line;
        while ((line = IN.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            int k = w.length > 1 ? Math.min(Integer.parseInt(w[1]), all.size()) : 0;
            switch (w[0]) {
                case "register": {
                    Map<String, Object> reg = registerAll(all.subList(Math.min(registered, k), k), sets, 64);
                    reg.put("leader", leader);
                    reg.put("total", k);
                    emit(reg);
                    if ((int) reg.get("registered") != k - Math.min(registered, k)) {
                        return 1;
                    }
                    registered = Math.max(registered, k);
                    break;
                }
                case "steady":
                    emit(steady(all.subList(0, k), Double.parseDouble(w[2]), Double.parseDouble(w[3])));
                    break;
                case "saturate":
                    emit(saturate(all.subList(0, k), Integer.parseInt(w[2]), Double.parseDouble(w[3]), Long.parseLong(w[4])));
                    break;
                case "failover":
                    emit(failoverSteady(all.subList(0, k), Double.parseDouble(w[2])));
                    break;
                case "quit":
                    return 0;
                default:
                    System.err.println("unknown command " + line);
                    return 2;
            }
        }
        return 0;
    }

    static void emit(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (sb.length() > 1) {
                sb.append(", ");
            }
            sb.append('"').append(e.getKey()).append("\": ");
            Object v = e.getValue();
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                if (v instanceof Double && (((Double) v).isNaN() || ((Double) v).isInfinite())) {
                    sb.append("null");
                } else {
                    sb.append(v instanceof Double ? String.format(Locale.ROOT, "%.6f", (Double) v) : v.toString());
                }
            } else {
                sb.append('"').append(v.toString().replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            }
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: ControllerLoad ADDRS register|heartbeat|steady|failover N SETS [...]");
            System.exit(2);
        }
        ControllerLoad load = new ControllerLoad(Arrays.asList(args[0].split(";")));
        String mode = args[1];
        int n = Integer.parseInt(args[2]);
        int sets = Integer.parseInt(args[3]);
        int code = 0;
        if (mode.equals("script")) {
            try {
                load.awaitLeader(60_000);
                code = load.script(brokers(n, sets), sets);
                load.client.shutdown();
            } catch (Throwable e) {
                // the caller waits for a line: a failure must end the process, whatever thread is still alive
                e.printStackTrace();
                Runtime.getRuntime().halt(3);
            }
            System.exit(code);
        }
        try {
            load.awaitLeader(60_000);
            List<Broker> brokers = brokers(n, sets);
            int concurrency = mode.equals("register") && args.length > 4 ? Integer.parseInt(args[4]) : 64;
            Map<String, Object> reg = load.registerAll(brokers, sets, concurrency);
            reg.put("leader", load.leader);
            emit(reg);
            if ((int) reg.get("registered") != n) {
                code = 1;
            } else if (mode.equals("heartbeat")) {
                emit(load.saturate(brokers, Integer.parseInt(args[4]), Double.parseDouble(args[5])));
            } else if (mode.equals("steady")) {
                emit(load.steady(brokers, Double.parseDouble(args[4]), Double.parseDouble(args[5])));
            } else if (mode.equals("failover")) {
                emit(load.failover(brokers, Integer.parseInt(args[4])));
            } else if (!mode.equals("register")) {
                System.err.println("unknown mode " + mode);
                code = 2;
            }
        } finally {
            load.client.shutdown();
        }
        System.exit(code);
    }
}
