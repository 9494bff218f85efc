package io.kvstash.wire.file;

import io.kvstash.wire.WireVersion;
import org.agrona.BufferUtil;
import org.agrona.SemanticVersion;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The control file as the server writes it and clients and tools read it, through the one flyweight: every field at
 * the offset {@link ControlFileDescriptor} gives it, and a file is trusted only once its version is written.
 */
class ControlFileFlyweightTest
{
    private static final int ERROR_LOG_LENGTH = 4096;
    private static final int FILE_LENGTH = ControlFileDescriptor.fileLength(CountersDescriptor.LENGTH, ERROR_LOG_LENGTH);

    private final UnsafeBuffer buffer = new UnsafeBuffer(BufferUtil.allocateDirectAligned(FILE_LENGTH, 64));
    private final ControlFileFlyweight controlFile = new ControlFileFlyweight().wrap(buffer);

    @Test
    void shouldReadBackEveryFieldTheServerWritesAtTheDescriptorsOffsets()
    {
        writeAsTheServerDoes();

        final ControlFileFlyweight reader = new ControlFileFlyweight().wrap(buffer);
        assertEquals(ControlFileFlyweight.OK, reader.check());
        assertTrue(reader.hasValidSections());
        assertEquals(4242, reader.pid());
        assertEquals(0xABCDL, reader.incarnation());
        assertEquals(1_000, reader.startTimeMs());
        assertEquals(1_100, reader.heartbeatMsAcquire());
        assertEquals(ControlFileDescriptor.STATE_RUNNING, reader.stateAcquire());
        assertEquals("pool-abcd", reader.config().poolFileName());
        assertEquals(1L << 30, reader.config().poolSizeBytes());
        assertEquals(1L << 20, reader.config().dataOffset());
        assertEquals(1L << 28, reader.config().segmentBytes());
        assertEquals(4096, reader.config().alignment());
        assertEquals(256, reader.config().chunkTokens());
        assertEquals(64, reader.config().maxChunksPerRequest());
        assertEquals(8192, reader.config().maxInlineBytes());
        assertEquals(1 << 16, reader.config().requestRingCapacity());
        assertEquals(1 << 17, reader.config().responseRingCapacity());
        assertEquals(100, reader.config().heartbeatIntervalMs());
        assertEquals(5_000, reader.config().heartbeatTimeoutMs());
        assertEquals(ControlFileDescriptor.FEATURE_DOORBELL, reader.config().features());

        final int c = ControlFileDescriptor.CONFIG_OFFSET;
        assertEquals(ControlFileDescriptor.MAGIC, buffer.getLong(ControlFileDescriptor.MAGIC_OFFSET));
        assertEquals(ControlFileDescriptor.HEADER_LENGTH, buffer.getInt(ControlFileDescriptor.HEADER_LENGTH_OFFSET));
        assertEquals(16, buffer.getLong(c + ControlFileDescriptor.SLOT_TABLE_OFFSET_OFFSET));
        assertEquals(1L << 16, buffer.getLong(c + ControlFileDescriptor.SLOT_TABLE_LENGTH_OFFSET));
        assertEquals(30_000_000_000L, buffer.getLong(c + ControlFileDescriptor.LEASE_NS_OFFSET));
        assertEquals(8, buffer.getInt(c + ControlFileDescriptor.MAX_CLIENTS_OFFSET));
        assertEquals(3, buffer.getInt(c + ControlFileDescriptor.EVICTION_POLICY_OFFSET));
        assertEquals(ControlFileDescriptor.CONFIG_OFFSET, buffer.getInt(ControlFileDescriptor.CONFIG_SECTION_OFFSET));
        assertEquals(ControlFileDescriptor.CONFIG_LENGTH, buffer.getInt(ControlFileDescriptor.CONFIG_SECTION_OFFSET + 4));
        assertEquals(ControlFileDescriptor.COUNTERS_OFFSET, reader.countersOffset());
        assertEquals(CountersDescriptor.LENGTH, reader.countersLength());
        assertEquals(FILE_LENGTH - ERROR_LOG_LENGTH, reader.errorLogOffset());
        assertEquals(ERROR_LOG_LENGTH, reader.errorLogLength());
        final int labelsOffset = buffer.getInt(ControlFileDescriptor.LABELS_SECTION_OFFSET);
        final int labelsLength = buffer.getInt(ControlFileDescriptor.LABELS_SECTION_OFFSET + 4);
        assertEquals(ControlFileDescriptor.COUNTERS_OFFSET + CountersDescriptor.LENGTH, labelsOffset);
        assertEquals(CountersDescriptor.COUNT * ControlFileDescriptor.COUNTER_LABEL_LENGTH, labelsLength);
        assertEquals(reader.errorLogOffset(), labelsOffset + labelsLength, "the labels fill whole cache-line pairs");
    }

    @Test
    void shouldReadEveryCounterNameFromItsLabelRecordAndNothingForUnusedIds()
    {
        writeAsTheServerDoes();
        final ControlFileFlyweight reader = new ControlFileFlyweight().wrap(buffer);
        assertEquals(CountersDescriptor.COUNT, reader.counterLabels().count());
        int named = 0;
        for (int id = 0; id < CountersDescriptor.COUNT; id++)
        {
            final String name = CountersDescriptor.name(id);
            assertEquals(null == name ? "" : name, reader.counterLabel(id), "id " + id);
            named += null == name ? 0 : 1;
        }
        assertTrue(named > 200, "named counters and the responses table: " + named);
        assertEquals("requests.ping.ok", reader.counterLabel(CountersDescriptor.requestId(0, 0)));
        assertEquals("", reader.counterLabel(-1));
        assertEquals("", reader.counterLabel(CountersDescriptor.COUNT));

        // The record: a length and the UTF-8 bytes at 64 * id in the section.
        final int stride = ControlFileDescriptor.COUNTER_LABEL_LENGTH;
        final int record = reader.errorLogOffset() - (CountersDescriptor.COUNT - CountersDescriptor.EVICTIONS) * stride;
        assertEquals("evictions".length(), buffer.getInt(record));
        assertEquals("evictions", buffer.getStringWithoutLengthAscii(record + 4, "evictions".length()));

        final UnsafeBuffer dst = new UnsafeBuffer(new byte[ControlFileDescriptor.COUNTER_LABEL_MAX_LENGTH + 8]);
        final int length = reader.counterLabels().label(CountersDescriptor.L2_COMPLETED_TICKET, dst, 8);
        assertEquals("l2_completed_ticket", dst.getStringWithoutLengthUtf8(8, length), "copied without a String");
        assertEquals(0, reader.counterLabels().label(CountersDescriptor.COUNT - 1, dst, 0), "an unused id");
    }

    @Test
    void shouldReadADamagedOrMisplacedLabelAsNoneAndRefuseALabelThatDoesNotFit()
    {
        writeAsTheServerDoes();
        final int record = buffer.getInt(ControlFileDescriptor.LABELS_SECTION_OFFSET) +
            CountersDescriptor.ERRORS * ControlFileDescriptor.COUNTER_LABEL_LENGTH;
        final String longest = "e".repeat(ControlFileDescriptor.COUNTER_LABEL_MAX_LENGTH);
        buffer.putInt(record, longest.length() + 1);
        assertEquals("", controlFile.counterLabel(CountersDescriptor.ERRORS), "a length past the record");
        controlFile.counterLabels().label(CountersDescriptor.ERRORS, longest);
        assertEquals(longest, controlFile.counterLabel(CountersDescriptor.ERRORS));
        controlFile.counterLabels().label(CountersDescriptor.ERRORS, "errors");
        assertEquals("errors", controlFile.counterLabel(CountersDescriptor.ERRORS), "the rest of the record is cleared");
        assertEquals(0, buffer.getByte(record + 4 + "errors".length()));
        assertThrows(IllegalArgumentException.class,
            () -> controlFile.counterLabels().label(CountersDescriptor.ERRORS, longest + "e"));
        assertThrows(IllegalArgumentException.class,
            () -> controlFile.counterLabels().label(CountersDescriptor.COUNT, "past_the_section"));

        buffer.putInt(ControlFileDescriptor.LABELS_SECTION_OFFSET + 4, FILE_LENGTH);
        assertFalse(controlFile.hasValidSections(), "labels past the end of the file");
        assertEquals("", controlFile.counterLabel(CountersDescriptor.READABLE_CHUNKS), "as a file without labels");
        assertEquals(0, controlFile.counterLabels().count());
    }

    @Test
    void shouldTrustNoFileBeforeItsVersionIsWrittenNorOneOfAnotherMajor()
    {
        assertEquals(ControlFileFlyweight.NOT_A_CONTROL_FILE, controlFile.check(), "zeros: no magic");
        writeAsTheServerDoes();
        controlFile.versionRelease(0);
        assertEquals(ControlFileFlyweight.NOT_WRITTEN, controlFile.check());
        controlFile.versionRelease(SemanticVersion.compose(WireVersion.MAJOR + 1, 0, 0));
        assertEquals(ControlFileFlyweight.INCOMPATIBLE, controlFile.check());
        controlFile.versionRelease(ControlFileDescriptor.VERSION);
        assertEquals(ControlFileFlyweight.OK, controlFile.check());

        final UnsafeBuffer shortFile = new UnsafeBuffer(buffer, 0, ControlFileDescriptor.COUNTERS_OFFSET - 8);
        assertEquals(ControlFileFlyweight.NOT_A_CONTROL_FILE, new ControlFileFlyweight().wrap(shortFile).check());
    }

    @Test
    void shouldFindSectionsOutsideTheFileAndNamesOutOfRange()
    {
        writeAsTheServerDoes();
        buffer.putInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4, ERROR_LOG_LENGTH + 8);
        assertFalse(controlFile.hasValidSections());
        buffer.putInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4, ERROR_LOG_LENGTH);
        buffer.putInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET, ControlFileDescriptor.COUNTERS_OFFSET + 4);
        assertFalse(controlFile.hasValidSections(), "counters not 8-byte aligned");

        buffer.putInt(ControlFileDescriptor.CONFIG_OFFSET + ControlFileDescriptor.POOL_NAME_LENGTH_OFFSET,
            ControlFileDescriptor.POOL_NAME_MAX_LENGTH + 1);
        assertNull(controlFile.config().poolFileName());
        assertThrows(IllegalArgumentException.class,
            () -> controlFile.config().poolFileName("p".repeat(ControlFileDescriptor.POOL_NAME_MAX_LENGTH + 1)));
    }

    private void writeAsTheServerDoes()
    {
        controlFile.config()
            .poolFileName("pool-abcd")
            .pool(1L << 30, 1L << 20, 16, 1L << 16, 1L << 28, 4096)
            .store(256, 30_000_000_000L, 64, 8192)
            .clients(1 << 16, 1 << 17, 8, 100, 5_000)
            .features(ControlFileDescriptor.FEATURE_DOORBELL, 3);
        controlFile.header(4242, 0xABCDL, 1_000)
            .heartbeatMsRelease(1_100)
            .stateRelease(ControlFileDescriptor.STATE_RUNNING)
            .sections(CountersDescriptor.LENGTH, ERROR_LOG_LENGTH);
        for (int id = 0; id < CountersDescriptor.COUNT; id++)
        {
            if (null != CountersDescriptor.name(id))
            {
                controlFile.counterLabels().label(id, CountersDescriptor.name(id));
            }
        }
        controlFile.versionRelease(ControlFileDescriptor.VERSION);
    }
}
