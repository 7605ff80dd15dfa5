package interop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * A real HDFS on 127.0.0.1 for the audit's hdfs:// test: one NameNode and one DataNode (MiniDFSCluster, Hadoop's
 * own classes), every address on loopback, ports chosen by the kernel.
 *
 * <pre>java -Xmx256m -cp 'build/classes:build/lib/*' interop.MiniHdfs BASEDIR [LOCAL_DIR HDFS_PATH]...</pre>
 *
 * Copies each LOCAL_DIR to HDFS_PATH, prints "READY hdfs://127.0.0.1:PORT" and serves until its standard input
 * closes (the test holds the pipe: the cluster ends with the test however it ends), then shuts down.
 */
public final class MiniHdfs {
    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length % 2 == 0) {
            System.err.println("usage: MiniHdfs BASEDIR [LOCAL_DIR HDFS_PATH]...");
            System.exit(2);
        }
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, args[0]);
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.set("dfs.replication", "1");
        conf.set("dfs.permissions.enabled", "false");
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .numDataNodes(1)
                .nameNodePort(0)
                .checkDataNodeAddrConfig(true)
                .build();
        try {
            cluster.waitActive();
            FileSystem fs = cluster.getFileSystem();
            for (int i = 1; i + 1 < args.length; i += 2) {
                fs.copyFromLocalFile(false, true, new Path(args[i]), new Path(args[i + 1]));
            }
            System.out.println("READY hdfs://127.0.0.1:" + cluster.getNameNodePort());
            System.out.flush();
            while (System.in.read() != -1) {
                // serve until the test closes the pipe
            }
        } finally {
            cluster.shutdown();
        }
    }
}
