package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.process.ChildJvm;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The client side of a server test, in a process of its own ({@link ChildJvm}), for the tests
 * that run the server's duty cycle themselves on a test clock in their own JVM: a client's file lock is held per
 * process, so a client in the server's JVM would hide what the server sees of a client in another. Modes:
 * <pre>
 * client DIR                 connects a KvStashClient, registers instance 1 and prints CONNECTED; then "close" on
 *                            standard input closes it and prints CLOSED
 * file DIR INDEX LENGTH      writes a client file by hand, as KvStashClient does, so that the test decides when
 *                            it is published: creates it, locks it, sizes it and prints LOCKED; then
 *                            "publish INCARNATION REQUEST_CAPACITY RESPONSE_CAPACITY" writes its header and prints
 *                            PUBLISHED
 * </pre>
 * Either mode exits at the end of its standard input; its locks go with the process.
 */
final class ClientProcess
{
    /** Printed once the client is connected and registered. */
    static final String CONNECTED = "CONNECTED";
    /** Printed once the client is closed. */
    static final String CLOSED = "CLOSED";
    /** Printed once the hand-made client file is created, locked and sized. */
    static final String LOCKED = "LOCKED";
    /** Printed once the hand-made client file's header is written. */
    static final String PUBLISHED = "PUBLISHED";
    /** The layout the client mode registers. */
    static final Layout LAYOUT = Layout.of("llama", 1, 0, 2, 128, Dtype.BFLOAT16, false);

    private ClientProcess()
    {
    }

    /**
     * Starts a mode in a short-lived child JVM, its standard error kept for the message of a failed wait.
     *
     * @param args mode and its arguments.
     * @return the running child.
     * @throws IOException when the process cannot start.
     */
    static ChildJvm start(final String... args) throws IOException
    {
        final List<String> jvmOptions = new ArrayList<>();
        jvmOptions.add("-Xmx" + ChildJvm.DEFAULT_HEAP);
        jvmOptions.addAll(ChildJvm.SHORT_LIVED_OPTIONS);
        return new ChildJvm.Options()
            .jvmOptions(jvmOptions)
            .captureStandardError(true)
            .name("client-process")
            .start(ClientProcess.class.getName(), List.of(args));
    }

    /**
     * Runs a mode (see the class comment).
     *
     * @param args mode and its arguments.
     * @throws Exception on a failure (the test sees the exit code and the missing line).
     */
    public static void main(final String[] args) throws Exception
    {
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        switch (args[0])
        {
            case "client" -> client(Path.of(args[1]), in);
            case "file" -> file(Path.of(args[1]), Long.parseLong(args[2]), Integer.parseInt(args[3]), in);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static void client(final Path dir, final BufferedReader in) throws Exception
    {
        final KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir));
        final ClientResponse registered = client.register(1, LAYOUT);
        if (!registered.isOk())
        {
            throw new IllegalStateException(registered.toString());
        }
        say(CONNECTED + " " + Long.toHexString(client.incarnation()));
        String line;
        while (null != (line = in.readLine()))
        {
            if ("close".equals(line))
            {
                client.close();
                say(CLOSED);
            }
        }
    }

    private static void file(final Path dir, final long index, final int length, final BufferedReader in)
        throws Exception
    {
        final Path file = dir.resolve(ClientFileDescriptor.fileName(ProcessHandle.current().pid(), index));
        Files.createFile(file);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
            FileLock lock = channel.lock())
        {
            if (!lock.isValid())
            {
                throw new IllegalStateException("no lock on " + file);
            }
            channel.write(ByteBuffer.wrap(new byte[1]), length - 1);
            say(LOCKED + " " + file);
            String line;
            while (null != (line = in.readLine()))
            {
                final String[] words = line.split(" ");
                if ("publish".equals(words[0]))
                {
                    final MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
                    final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, ClientFileDescriptor.HEADER_LENGTH);
                    ClientFileDescriptor.writeHeader(header, ProcessHandle.current().pid(), Long.parseLong(words[1]),
                        Integer.parseInt(words[2]), Integer.parseInt(words[3]), 0);
                    say(PUBLISHED);
                }
            }
        }
    }

    private static void say(final String line)
    {
        System.out.println(line);
        System.out.flush();
    }
}
