package interop;

import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * Sends numbered messages to one topic, one at a time, and writes a line per acknowledged send (SEND_OK) to
 * a file: "seq brokerName queueId queueOffset msgId". Runs until the stop file exists or the time is up.
 *
 * Args: namesrv topic ackFile stopFile maxSeconds [pauseMillis [timeline]]
 * pauseMillis (default 0): a pause after each send, to bound the message count of a long run.
 * timeline (tools/bench/broker_failover_peers.py): one send every pauseMillis (a send that takes longer is
 * followed by the next at once, a failed one too: no pause of its own), and a stdout line per send, acknowledged
 * or not, with the wall-clock milliseconds it started and ended:
 * "send ok START END seq brokerName queueId queueOffset" or "send fail START END seq reason (rootCause: message)".
 */
public final class Producer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], ackFile = args[2], stopFile = args[3];
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000L;
        long pause = args.length > 5 ? Long.parseLong(args[5]) : 0L;
        boolean timeline = args.length > 6 && "timeline".equals(args[6]);
        DefaultMQProducer producer = new DefaultMQProducer("interop-producer");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(3000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setPollNameServerInterval(1000);
        producer.start();
        long acked = 0, failed = 0;
        try (PrintWriter out = new PrintWriter(new FileWriter(ackFile, StandardCharsets.UTF_8, true))) {
            long next = System.currentTimeMillis();
            for (long seq = 0; System.currentTimeMillis() < deadline && !Files.exists(Paths.get(stopFile)); seq++) {
                Message msg = new Message(topic, "interop", Long.toString(seq),
                    ("message " + seq).getBytes(StandardCharsets.UTF_8));
                if (timeline) {
                    long wait = next - System.currentTimeMillis();
                    if (wait > 0) {
                        Thread.sleep(wait);
                    }
                    long start = System.currentTimeMillis();
                    next = start + pause;
                    try {
                        SendResult r = producer.send(msg);
                        long end = System.currentTimeMillis();
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            out.printf("%d %s %d %d %s%n", seq, r.getMessageQueue().getBrokerName(),
                                r.getMessageQueue().getQueueId(), r.getQueueOffset(), r.getMsgId());
                            out.flush();
                            acked++;
                            System.out.println("send ok " + start + " " + end + " " + seq + " "
                                + r.getMessageQueue().getBrokerName() + " " + r.getMessageQueue().getQueueId() + " "
                                + r.getQueueOffset());
                        } else {
                            failed++;
                            System.out.println("send fail " + start + " " + end + " " + seq + " " + r.getSendStatus());
                        }
                    } catch (Exception e) {
                        long end = System.currentTimeMillis();
                        failed++;
                        Throwable cause = e;  // the client's MQClientException says only that it failed
                        while (cause.getCause() != null && cause.getCause() != cause) {
                            cause = cause.getCause();
                        }
                        System.out.println("send fail " + start + " " + end + " " + seq + " "
                            + e.getClass().getSimpleName() + " (" + cause.getClass().getSimpleName() + ": "
                            + String.valueOf(cause.getMessage()).split("\n")[0] + ")");
                    }
                    continue;
                }
                try {
                    SendResult r = producer.send(msg);
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        out.printf("%d %s %d %d %s%n", seq, r.getMessageQueue().getBrokerName(),
                            r.getMessageQueue().getQueueId(), r.getQueueOffset(), r.getMsgId());
                        out.flush();
                        acked++;
                        if (acked == 1 || acked % 50 == 0) {
                            System.out.println("acked " + acked + " failed " + failed);
                        }
                        if (pause > 0) {
                            Thread.sleep(pause);
                        }
                    } else {
                        failed++;
                        System.out.println("not ok " + seq + " " + r.getSendStatus());
                    }
                } catch (Exception e) {
                    failed++;
                    System.out.println("failed " + seq + " " + e.getClass().getSimpleName() + ": "
                        + String.valueOf(e.getMessage()).split("\n")[0]);
                    Thread.sleep(100);  // a broker gone: give the route a moment before the next attempt
                }
            }
        } finally {
            System.out.println("producer done acked " + acked + " failed " + failed);
            producer.shutdown();
        }
    }
}
