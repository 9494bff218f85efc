package io.kvstash.core;

/**
 * How the store chooses which readable chunk gives up its slot, and where a newly stored chunk enters that
 * order. Every policy keeps pins and NO_SPACE as they are: a pinned chunk is never chosen, and a store is
 * refused only when every readable chunk of its class (and every other class's region) is pinned or reserved.
 * The code is a contract with journal readers: a capture records its policy by code and replays under it.
 */
public enum EvictionPolicy
{
    /**
     * Exact least recently used: a hit moves the chunk to the most recent end in range order, a store appends
     * in range order. Every exact-LRU replay figure holds under it.
     */
    LRU(0, "lru"),

    /**
     * Chain-aware LRU: the store learns each chunk's parent from the ranges it sees (the chunk before it in a
     * range, or the last hit of the instance's previous LOOKUP for the first chunk of a store), keeps a
     * chain's descendants older than its ancestors, and so evicts a chain from its tail: a chunk goes before
     * the prefix that makes it reachable.
     */
    CHAIN(1, "chain"),

    /**
     * Chain-aware segmented LRU with history: a probation and a protected segment per size class; a hit
     * promotes to protected, and a stored chunk whose key was referenced before (a frequency sketch of every
     * LOOKUP key, aged) enters protected directly, so a popular prefix survives being evicted once.
     */
    SLRU(2, "slru"),

    /**
     * {@link #SLRU} with admission: the store learns, by kind of range (continuation or new prompt, range
     * length in half octaves, the range's last chunk or not), how often a stored chunk is read back, and stores the
     * chunks of a kind read back at under half the average rate cold, at the evict-first end of probation; its
     * protected segment holds at most 40 % of a class's slots (60 % under {@link #SLRU}).
     */
    SLRU_ADMIT(3, "slru-admit");

    /** The policy {@code --eviction default} names: the one that won on the measured traces. */
    public static final EvictionPolicy DEFAULT = SLRU_ADMIT;

    private final int code;
    private final String label;

    EvictionPolicy(final int code, final String label)
    {
        this.code = code;
        this.label = label;
    }

    /**
     * Code recorded in journal headers.
     *
     * @return code.
     */
    public int code()
    {
        return code;
    }

    /**
     * Name on the command line and in reports.
     *
     * @return name.
     */
    public String label()
    {
        return label;
    }

    /**
     * Whether this policy learns chains and keeps a chain's descendants older than its ancestors.
     *
     * @return true for every policy but {@link #LRU}.
     */
    public boolean chainAware()
    {
        return this != LRU;
    }

    /**
     * Whether this policy keeps a probation and a protected segment with a key history.
     *
     * @return true for {@link #SLRU} and {@link #SLRU_ADMIT}.
     */
    public boolean segmented()
    {
        return this == SLRU || this == SLRU_ADMIT;
    }

    /**
     * Most of a size class's slots the protected segment holds, in percent: 60 under {@link #SLRU}, 40 under
     * {@link #SLRU_ADMIT} (its admission keeps the one-off prompts out of probation, so probation can be smaller
     * than protected without losing their reuse; 60 lost up to 3.3 % against exact LRU on the conversation trace at
     * 32,768 chunks), 0 for the unsegmented policies. Fixed in code; measured on traces (docs/results/eviction-notes-2026-12-05.md).
     *
     * @return percent of the class's slots.
     */
    public int protectedSharePercent()
    {
        return this == SLRU ? 60 : this == SLRU_ADMIT ? 40 : 0;
    }

    /**
     * The policy of a journal code.
     *
     * @param code a {@link #code()}.
     * @return policy.
     * @throws IllegalArgumentException when no policy has the code.
     */
    public static EvictionPolicy ofCode(final int code)
    {
        for (final EvictionPolicy policy : values())
        {
            if (policy.code == code)
            {
                return policy;
            }
        }
        throw new IllegalArgumentException("unknown eviction policy code " + code);
    }

    /**
     * The policy of a command-line name; {@code default} names {@link #DEFAULT}.
     *
     * @param name a {@link #label()} or {@code default}.
     * @return policy.
     * @throws IllegalArgumentException when no policy has the name; the message lists them.
     */
    public static EvictionPolicy ofName(final String name)
    {
        if ("default".equals(name))
        {
            return DEFAULT;
        }
        for (final EvictionPolicy policy : values())
        {
            if (policy.label.equals(name))
            {
                return policy;
            }
        }
        throw new IllegalArgumentException("unknown eviction policy '" + name + "': give " + names());
    }

    /**
     * Every name {@link #ofName} accepts.
     *
     * @return names joined with ", ".
     */
    public static String names()
    {
        final StringBuilder names = new StringBuilder();
        for (final EvictionPolicy policy : values())
        {
            names.append(policy.label).append(", ");
        }
        return names.append("default").toString();
    }
}
