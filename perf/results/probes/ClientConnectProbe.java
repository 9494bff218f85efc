// Probe behind docs/BENCHMARKS.md "Server start and client connect": a server with a pool of the given MiB that
// lives the given seconds, and clients that time KvStashClient.connect with a number of pre-touch threads. Not built.
//   javac -cp tools/target/kvstash.jar -d /tmp/probe ClientConnectProbe.java
//   J="java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp tools/target/kvstash.jar:/tmp/probe"
//   $J ClientConnectProbe server /dev/shm/cp 1024 90 &  sleep 4
//   $J ClientConnectProbe client /dev/shm/cp 1; $J ClientConnectProbe client /dev/shm/cp 2
import io.kvstash.core.StoreContext;
import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import java.nio.file.*;

public class ClientConnectProbe
{
    public static void main(String[] a) throws Exception
    {
        Path dir = Paths.get(a[1]);
        if (a[0].equals("server"))
        {
            KvStashServer server = KvStashServer.launch(new ServerContext().directory(dir)
                .storeContext(new StoreContext().poolSizeBytes(Long.parseLong(a[2]) << 20)));
            System.out.println("up");
            Thread.sleep(Long.parseLong(a[3]) * 1000);
            server.close();
            return;
        }
        int threads = Integer.parseInt(a[2]);
        long t0 = System.nanoTime();
        try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir).pretouchThreads(threads)))
        {
            long t1 = System.nanoTime();
            System.out.printf("threads %d: connect %.0f ms%n", threads, (t1 - t0) / 1e6);
        }
    }
}
