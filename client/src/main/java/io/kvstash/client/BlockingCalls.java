package io.kvstash.client;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The synchronous calls of the API: each sends its request through the {@link RequestProxy}, waits
 * for room in the request ring only when the first try finds it full ({@link ResponseAdapter#sendOrWait}), and
 * awaits its answer through the {@link ResponseAdapter}. Owns the copy transport's chunk moves, which are runs
 * of such calls, and the response they are answered into, so a PREPARE's response stays readable meanwhile.
 * No duty cycle of its own: it runs on the caller's thread.
 * <p>
 * Allocation-free while the request ring has room; a full ring costs one capturing lambda per wait.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
final class BlockingCalls
{
    private final RequestProxy proxy;
    private final ResponseAdapter responses;
    private final ClientResponse dataResponse;
    private final int maxInlineBytes;

    /**
     * The blocking calls over a client's proxy and adapter.
     *
     * @param proxy          encodes the requests.
     * @param responses      awaits the answers.
     * @param maxInlineBytes largest copy-transport payload of the server.
     */
    BlockingCalls(final RequestProxy proxy, final ResponseAdapter responses, final int maxInlineBytes)
    {
        this.proxy = proxy;
        this.responses = responses;
        this.maxInlineBytes = maxInlineBytes;
        this.dataResponse = responses.newResponse();
    }

    /**
     * A request that carries only the common header.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param transferId transfer or 0.
     * @param flags      flags.
     * @return the adapter's response.
     */
    ClientResponse simple(final int type, final long instanceId, final long transferId, final int flags)
    {
        long correlationId = proxy.sendSimple(type, instanceId, transferId, flags);
        if (correlationId < 0)
        {
            correlationId = responses.sendOrWait(() -> proxy.sendSimple(type, instanceId, transferId, flags));
        }
        return responses.await(correlationId, responses.response());
    }

    /**
     * A request that carries only the common header and is not answered ({@link io.kvstash.wire.RequestFlags#NO_REPLY}
     * among its flags): sent, waiting only for room in the request ring when it is full, and never awaited, so
     * nothing of it stays behind in the client.
     *
     * @param type       request type (COMMIT_RETRIEVE or RELEASE).
     * @param instanceId instance.
     * @param transferId transfer.
     * @param flags      flags, {@link io.kvstash.wire.RequestFlags#NO_REPLY} among them.
     */
    void unanswered(final int type, final long instanceId, final long transferId, final int flags)
    {
        if (proxy.sendSimple(type, instanceId, transferId, flags) < 0)
        {
            responses.sendOrWait(() -> proxy.sendSimple(type, instanceId, transferId, flags));
        }
    }

    /**
     * A keyed request with precomputed chunk hashes.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param keys       key range.
     * @param flags      flags.
     * @return the adapter's response.
     */
    ClientResponse keyed(final int type, final long instanceId, final ChunkKeys keys, final int flags)
    {
        long correlationId = proxy.sendKeyed(type, instanceId, keys, flags);
        if (correlationId < 0)
        {
            correlationId = responses.sendOrWait(() -> proxy.sendKeyed(type, instanceId, keys, flags));
        }
        return responses.await(correlationId, responses.response());
    }

    /**
     * A keyed request with token ids over every full chunk of the prompt.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param tokens     token ids from the prompt's start.
     * @param tokenCount tokens used.
     * @param salt       cache salt value, 0 for none.
     * @param flags      flags.
     * @return the adapter's response.
     */
    ClientResponse tokens(
        final int type, final long instanceId, final int[] tokens, final int tokenCount, final long salt, final int flags)
    {
        long correlationId = proxy.sendTokens(type, instanceId, tokens, tokenCount, 0, -1, salt, flags);
        if (correlationId < 0)
        {
            correlationId = responses.sendOrWait(
                () -> proxy.sendTokens(type, instanceId, tokens, tokenCount, 0, -1, salt, flags));
        }
        return responses.await(correlationId, responses.response());
    }

    /**
     * REGISTER.
     *
     * @param instanceId instance.
     * @param layout     layout.
     * @return the adapter's response.
     */
    ClientResponse register(final long instanceId, final Layout layout)
    {
        long correlationId = proxy.sendRegister(instanceId, layout);
        if (correlationId < 0)
        {
            correlationId = responses.sendOrWait(() -> proxy.sendRegister(instanceId, layout));
        }
        return responses.await(correlationId, responses.response());
    }

    /**
     * LOOKUP_ALL_RANKS.
     *
     * @param model     model name.
     * @param worldSize world size.
     * @param keys      key range.
     * @param flags     flags (QUIET the only one the server allows on it).
     * @return the adapter's response.
     */
    ClientResponse lookupAllRanks(final String model, final int worldSize, final ChunkKeys keys, final int flags)
    {
        long correlationId = proxy.sendLookupAllRanks(model, worldSize, keys, flags);
        if (correlationId < 0)
        {
            correlationId = responses.sendOrWait(() -> proxy.sendLookupAllRanks(model, worldSize, keys, flags));
        }
        return responses.await(correlationId, responses.response());
    }

    /**
     * Writes bytes {@code [from, from + length)} of a chunk in WRITE_DATA messages of at most the server's
     * largest copy-transport payload, stopping at the first that fails.
     *
     * @param instanceId   instance.
     * @param transferId   the store.
     * @param slotIndex    slot entry in the prepare response.
     * @param from         first byte of the chunk to write.
     * @param length       bytes to write.
     * @param source       the bytes.
     * @param sourceOffset offset in the source of the chunk's byte {@code from}.
     * @return OK, or the status of the failed WRITE_DATA.
     */
    int writeData(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final int from,
        final int length,
        final DirectBuffer source,
        final int sourceOffset)
    {
        for (int done = 0; done < length; )
        {
            final int n = Math.min(maxInlineBytes, length - done);
            final int at = done;
            long correlationId =
                proxy.sendWriteData(instanceId, transferId, slotIndex, from + at, source, sourceOffset + at, n);
            if (correlationId < 0)
            {
                correlationId = responses.sendOrWait(() -> proxy.sendWriteData(
                    instanceId, transferId, slotIndex, from + at, source, sourceOffset + at, n));
            }
            final ClientResponse r = responses.await(correlationId, dataResponse);
            if (!r.isOk())
            {
                return r.status();
            }
            done += n;
        }
        return Status.OK;
    }

    /**
     * Reads bytes {@code [from, from + length)} of a chunk in READ_DATA messages of at most the server's largest
     * copy-transport payload, stopping at the first that fails.
     *
     * @param instanceId        instance.
     * @param transferId        the retrieve.
     * @param slotIndex         slot entry in the prepare response.
     * @param from              first byte of the chunk to read.
     * @param length            bytes to read.
     * @param destination       where the bytes go.
     * @param destinationOffset offset in the destination of the chunk's byte {@code from}.
     * @return OK, or the status of the failed READ_DATA.
     */
    int readData(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final int from,
        final int length,
        final MutableDirectBuffer destination,
        final int destinationOffset)
    {
        for (int done = 0; done < length; )
        {
            final int n = Math.min(maxInlineBytes, length - done);
            final int at = done;
            long correlationId = proxy.sendReadData(instanceId, transferId, slotIndex, from + at, n);
            if (correlationId < 0)
            {
                correlationId = responses.sendOrWait(
                    () -> proxy.sendReadData(instanceId, transferId, slotIndex, from + at, n));
            }
            final ClientResponse r = responses.await(correlationId, dataResponse);
            if (!r.isOk())
            {
                return r.status();
            }
            r.copyData(destination, destinationOffset + at);
            done += n;
        }
        return Status.OK;
    }
}
