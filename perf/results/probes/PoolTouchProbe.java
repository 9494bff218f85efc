// Probe behind docs/BENCHMARKS.md "Server start and client connect": pre-touch of a 1 GiB /dev/shm pool, old
// (a write per page) against new (zeros through pwrite, a read per 64 KiB, then a write per page). Not built by Maven.
//   AG=~/.m2/repository/org/agrona/agrona/2.6.0/agrona-2.6.0.jar; javac -cp $AG PoolTouchProbe.java
//   J="java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp $AG:."
//   for m in server-old client-old client-new server-new client-old client-new; do $J PoolTouchProbe $m 1024; done
// The client modes map the file the last server mode left (/dev/shm/touchprobe2); remove it afterwards.
import java.nio.*;
import java.nio.channels.*;
import java.nio.file.*;
import org.agrona.concurrent.UnsafeBuffer;

public class PoolTouchProbe
{
    static long minflt() throws Exception
    {
        String s = new String(Files.readAllBytes(Paths.get("/proc/self/stat")));
        String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(f[7]);
    }

    public static void main(String[] a) throws Exception
    {
        String mode = a[0];
        long size = Long.parseLong(a[1]) << 20;
        Path p = Paths.get("/dev/shm/touchprobe2");
        if (mode.startsWith("server")) Files.deleteIfExists(p);
        FileChannel ch = FileChannel.open(p, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
        if (mode.startsWith("server")) ch.write(ByteBuffer.wrap(new byte[1]), size - 1);
        long seg = 1L << 30;
        int n = (int)((size + seg - 1) / seg);
        long t0 = System.nanoTime(); long f0 = minflt();
        if (mode.equals("server-new"))
        {
            ByteBuffer z = ByteBuffer.allocateDirect(1 << 20);
            for (long off = 0; off < size; off += z.capacity()) { z.clear(); while (z.hasRemaining()) ch.write(z, off + z.position()); }
        }
        long t1 = System.nanoTime(); long f1 = minflt();
        MappedByteBuffer[] m = new MappedByteBuffer[n];
        long t2 = 0, f2 = 0;
        for (int i = 0; i < n; i++)
        {
            long len = Math.min(seg, size - (long)i * seg);
            m[i] = ch.map(FileChannel.MapMode.READ_WRITE, (long)i * seg, len);
            UnsafeBuffer b = new UnsafeBuffer(m[i]);
            int sum = 0;
            if (mode.endsWith("new")) for (long pg = 0; pg < len; pg += 65536) sum += b.getByte((int)pg);
            t2 = System.nanoTime(); f2 = minflt();
            if (mode.equals("server-old")) for (long pg = 0; pg < len; pg += 4096) b.putByte((int)pg, (byte)0);
            else if (mode.equals("server-new")) for (long pg = 0; pg < len; pg += 4096) b.putByte((int)pg, (byte)0);
            else for (long pg = 0; pg < len; pg += 4096) b.getAndAddInt((int)pg, 0);
            if (sum == 42) System.out.println();
        }
        long t3 = System.nanoTime(); long f3 = minflt();
        for (int i = 0; i < n; i++)
        {
            long len = m[i].capacity();
            UnsafeBuffer b = new UnsafeBuffer(m[i]);
            for (long pg = 0; pg < len; pg += 4096) b.putByte((int)(pg + 8), (byte)1);
        }
        long t4 = System.nanoTime(); long f4 = minflt();
        System.out.printf("%-12s alloc %5.0f ms | read64 %5.0f ms %6d flt | per-page %5.0f ms %6d flt | TOTAL %5.0f ms | check %4.0f ms %5d flt%n", mode,
            (t1 - t0) / 1e6, (t2 - t1) / 1e6, f2 - f1, (t3 - t2) / 1e6, f3 - f2, (t3 - t0) / 1e6, (t4 - t3) / 1e6, f4 - f3);
    }
}
