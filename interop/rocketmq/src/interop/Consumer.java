package interop;

import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Reads a topic from the first offset of every queue until nothing new arrived for idleMillis, and writes a
 * line per message to a file: "key brokerName queueId queueOffset". Prints "consumer done N" at the end.
 *
 * Args: namesrv topic outFile idleMillis maxSeconds
 */
public final class Consumer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], outFile = args[2];
        long idle = Long.parseLong(args[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000L;
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("interop-consumer-" + System.nanoTime());
        consumer.setNamesrvAddr(namesrv);
        consumer.setAutoCommit(false);
        consumer.setPollTimeoutMillis(500);
        // Every queue from its first offset, chosen by each queue's pull task when it starts (a group this new has
        // no committed offset). Not assign() then seek(q, 0): a pull task starts at assign(), and a pull in flight
        // when the seek lands once moved a queue past the 80 messages the seek had cleared (docs/interop.md).
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.start();
        // A route just after a failover may still name an address whose connection is going away; a client
        // retries, and says so on stdout.
        for (int attempt = 1; ; attempt++) {
            try {
                Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
                consumer.assign(queues);
                break;
            } catch (Exception e) {
                System.out.println("consumer retry " + attempt + ": " + e);
                if (attempt >= 20 || System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(1000);
            }
        }
        long n = 0, last = System.currentTimeMillis();
        try (PrintWriter out = new PrintWriter(new FileWriter(outFile, StandardCharsets.UTF_8))) {
            while (System.currentTimeMillis() - last < idle && System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = consumer.poll();
                for (MessageExt m : batch) {
                    out.printf("%s %s %d %d%n", m.getKeys(), m.getBrokerName(), m.getQueueId(), m.getQueueOffset());
                    n++;
                }
                if (!batch.isEmpty()) {
                    last = System.currentTimeMillis();
                    out.flush();
                }
            }
        } finally {
            System.out.println("consumer done " + n);
            consumer.shutdown();
        }
    }
}
