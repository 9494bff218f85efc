package io.kvstash.wire;

import org.agrona.SemanticVersion;

/**
 * The one version of the shared-memory contract, written last into the header of every file a server or
 * client creates (control, pool, client file) and checked by whoever maps one. Packed as Agrona's
 * {@link SemanticVersion} ({@code 0x00MMmmpp}); 0 means the file's header is not written yet. A reader
 * accepts any version of its own major: minor versions only add.
 */
public final class WireVersion
{
    /**
     * Major version: a change no older reader understands. 2: a slot's word is found from its offset over the
     * alignment, not from a slot index (pools hold several slot sizes). 3: the slot offsets in responses are
     * relative to the start of the pool's data region, not file offsets; a 2.x client would read every chunk at
     * the wrong place, so it must refuse a 3.x server (and the server a 2.x client file). Every 3.x file has what
     * minors 2.1 to 2.4 added: the LOOKUP flags {@link RequestFlags#L2_WAIT} and {@link RequestFlags#L2_POLL}
     * with the tier's 16 bytes in their answers, the control file's Features word
     * ({@link io.kvstash.wire.file.ControlFileDescriptor#FEATURES_OFFSET}), the config's eviction policy word
     * ({@link io.kvstash.wire.file.ControlFileDescriptor#EVICTION_POLICY_OFFSET}), the counter {@code cold_chunks},
     * the PREPARE_RETRIEVE flag {@link RequestFlags#PREFIX}, and the doorbell of a server in its blocking wait (the
     * Features bit {@link io.kvstash.wire.file.ControlFileDescriptor#FEATURE_DOORBELL}, the control file's Asleep
     * word and the socket {@link io.kvstash.wire.file.ControlFileDescriptor#DOORBELL_FILE_NAME}).
     */
    public static final int MAJOR = 3;
    /**
     * Minor version: additions an older reader of the same major can ignore. 1: the request flag
     * {@link RequestFlags#NO_REPLY} and the counter {@code no_reply_failures}; the Features bit
     * {@link io.kvstash.wire.file.ControlFileDescriptor#FEATURE_POOL_ON_DEMAND} and the counters
     * {@code pool_bytes_configured}, {@code pool_bytes_committed} and {@code pool_commit_misses}.
     */
    public static final int MINOR = 1;
    /**
     * The first minor of major 3 whose server takes {@link RequestFlags#NO_REPLY}: a client sends the flag only to a
     * server whose control file's minor is at least this (an older one refuses it as an unknown flag).
     */
    public static final int NO_REPLY_MINOR = 1;
    /** Patch version. */
    public static final int PATCH = 0;
    /** The packed version this code writes. */
    public static final int CURRENT = SemanticVersion.compose(MAJOR, MINOR, PATCH);

    private WireVersion()
    {
    }

    /**
     * Whether a header's version is written yet.
     *
     * @param version packed version read with acquire semantics.
     * @return false while the writer has not finished the header.
     */
    public static boolean isWritten(final int version)
    {
        return 0 != version;
    }

    /**
     * Whether this code reads a file of a version.
     *
     * @param version packed version.
     * @return true for a written version of {@link #MAJOR}.
     */
    public static boolean isCompatible(final int version)
    {
        return isWritten(version) && SemanticVersion.major(version) == MAJOR;
    }

    /**
     * A version as people read it.
     *
     * @param version packed version.
     * @return e.g. {@code 1.0.0}.
     */
    public static String toString(final int version)
    {
        return SemanticVersion.toString(version);
    }

    /**
     * Why a file of a version cannot be read, for an error message.
     *
     * @param what    the file, e.g. "control file /dev/shm/kvstash/control".
     * @param version its packed version.
     * @return a one-line reason naming both versions.
     */
    public static String incompatible(final String what, final int version)
    {
        return what + " has version " + toString(version) + "; this kvstash reads " + MAJOR + ".x";
    }
}
