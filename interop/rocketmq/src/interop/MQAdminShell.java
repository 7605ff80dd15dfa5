package interop;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * mqadmin's commands one after another in one JVM, for the tests that run many of them: the `mqadmin` script
 * starts a JVM per command (about 6 s on 2 cores, 2 s of it Netty's shutdown quiet period before the JVM may
 * exit). Each command goes through MQAdminStartup.main0, the method the script's main calls, with the same
 * null RPCHook (so mqadmin's own conf/tools.yml under ROCKETMQ_HOME signs requests, as with the script).
 *
 * Protocol (cli/rocketmq.py's MQAdminShell): prints READY once. Then each stdin line is one command, its
 * arguments separated by tabs; everything the command printed to stdout or stderr is written out, followed by
 * a line DONE (on a line of its own). A property a command's -n set does not outlive it. EOF on stdin ends the JVM.
 */
public final class MQAdminShell {
    static final String READY = "--- interop.MQAdminShell ready";
    static final String DONE = "--- interop.MQAdminShell done";

    public static void main(String[] args) throws Exception {
        PrintStream out = System.out, err = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println(READY);
        out.flush();
        for (String line; (line = in.readLine()) != null; ) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
            System.clearProperty(MixAll.NAMESRV_ADDR_PROPERTY);
            System.setOut(capture);
            System.setErr(capture);
            try {
                MQAdminStartup.main0(line.split("\t", -1), null);
            } catch (Throwable t) {
                t.printStackTrace(capture);
            } finally {
                System.setOut(out);
                System.setErr(err);
            }
            byte[] text = buf.toByteArray();
            out.write(text);
            if (text.length > 0 && text[text.length - 1] != '\n') {
                out.println();
            }
            out.println(DONE);
            out.flush();
        }
    }
}
