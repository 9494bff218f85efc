package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.AtomicBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class PipelineErrorsTest
{
    static final Layout LAYOUT = Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false);

    static StoreContext storeContext()
    {
        return new StoreContext().poolSizeBytes(64 * 4096L).alignment(4096).conclude();
    }

    /**
     * A slot table that throws from its release stores once armed: a fault inside the reserve stage.
     */
    static AtomicBuffer faultySlotTable(final StoreContext context, final AtomicBoolean armed)
    {
        final AtomicBuffer real = KvStore.newSlotTable(context);
        return (AtomicBuffer)Proxy.newProxyInstance(AtomicBuffer.class.getClassLoader(),
            new Class<?>[]{ AtomicBuffer.class },
            (proxy, method, args) ->
            {
                if (armed.get() && method.getName().equals("putLongRelease"))
                {
                    throw new IllegalStateException("injected slot table fault");
                }
                try
                {
                    return method.invoke(real, args);
                }
                catch (final InvocationTargetException ex)
                {
                    throw ex.getCause();
                }
            });
    }

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    void shouldAnswerServerErrorAndKeepServingWhenAStageThrows(final ThreadingMode mode)
    {
        final StoreContext storeContext = storeContext();
        final AtomicBoolean armed = new AtomicBoolean();
        final List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final PipelineContext context = new PipelineContext()
            .storeContext(storeContext)
            .threadingMode(mode)
            .waitMode(WaitMode.YIELDING)
            .slotTable(faultySlotTable(storeContext, armed))
            .errorHandler(errors::add)
            .responseSink(router);
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.register(1, LAYOUT).status);
            armed.set(true);
            final StoreCommand failed = caller.keyed(RequestType.PREPARE_STORE, 1, ChunkKeys.ofIds(1, 2), 0);
            assertEquals(Status.SERVER_ERROR, failed.status);
            assertEquals(0, failed.outTransferId);
            armed.set(false);
            assertEquals(Status.OK, caller.call(c -> c.type = RequestType.PING).status);
            assertEquals(Status.OK, caller.keyed(RequestType.LOOKUP, 1, ChunkKeys.ofIds(7), 0).status);
            assertEquals(1, pipeline.counters().get(CountersDescriptor.ERRORS));
            assertEquals(1, errors.size());
            assertTrue(errors.get(0).getMessage().contains("injected"));
        }
    }

    @Test
    void shouldCountAndLogASinkFailureAndGoOn()
    {
        final StoreContext storeContext = storeContext();
        final List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final AtomicBoolean failNext = new AtomicBoolean(true);
        final PipelineContext context = new PipelineContext()
            .storeContext(storeContext)
            .threadingMode(ThreadingMode.SHARED)
            .errorHandler(errors::add)
            .responseSink(event ->
            {
                if (failNext.getAndSet(false))
                {
                    throw new IllegalStateException("sink down");
                }
                router.onResponse(event);
            });
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            final long lost = pipeline.claim();
            pipeline.event(lost).reset().type = RequestType.PING;
            pipeline.publish(lost);
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.call(c -> c.type = RequestType.PING).status);
            assertEquals(1, errors.size());
            assertEquals(1, pipeline.counters().get(CountersDescriptor.ERRORS));
            assertEquals(2, pipeline.counters().get(CountersDescriptor.requestId(RequestType.PING, Status.OK)));
        }
    }

    @Test
    void shouldPassARequestRejectedAtDecodeThroughEveryStageUntouched()
    {
        final StoreContext storeContext = storeContext();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final PipelineContext context = new PipelineContext()
            .storeContext(storeContext)
            .threadingMode(ThreadingMode.SHARED)
            .responseSink(router);
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            final long sequence = pipeline.claim();
            final RequestEvent event = pipeline.event(sequence);
            final StoreCommand command = event.reset();
            command.type = RequestType.REGISTER;
            command.instanceId = 5;
            event.clientIndex = 0;
            event.rejectAtDecode(Status.MALFORMED, "short record");
            pipeline.publish(sequence);
            assertEquals(Status.UNKNOWN_INSTANCE, caller.keyed(RequestType.LOOKUP, 5, ChunkKeys.ofIds(1), 0).status);
            assertEquals(1, pipeline.counters().get(CountersDescriptor.requestId(RequestType.REGISTER, Status.MALFORMED)));
            assertEquals(Status.UNKNOWN_TYPE, caller.call(c -> c.type = 99).status);
        }
    }
}
