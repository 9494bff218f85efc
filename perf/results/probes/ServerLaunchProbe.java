// Probe behind docs/BENCHMARKS.md "Server start and client connect": KvStashServer.launch and close with pools of the
// sizes given in MiB, on one jar. Not built by Maven.
//   javac -cp tools/target/kvstash.jar -d /tmp/probe ServerLaunchProbe.java
//   java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp tools/target/kvstash.jar:/tmp/probe ServerLaunchProbe 1024 4096
import io.kvstash.core.StoreContext;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import java.nio.file.*;

public class ServerLaunchProbe
{
    public static void main(String[] a) throws Exception
    {
        for (String arg : a)
        {
            long size = Long.parseLong(arg) << 20;
            Path dir = Paths.get("/dev/shm/launchprobe-" + System.nanoTime());
            long t0 = System.nanoTime();
            KvStashServer server = KvStashServer.launch(new ServerContext().directory(dir).storeContext(new StoreContext().poolSizeBytes(size)));
            long t1 = System.nanoTime();
            server.close();
            long t2 = System.nanoTime();
            System.out.printf("pool %5d MiB: launch %6.0f ms, close %5.0f ms%n", size >> 20, (t1 - t0) / 1e6, (t2 - t1) / 1e6);
        }
    }
}
