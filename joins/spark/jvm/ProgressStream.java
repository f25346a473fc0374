package streamjoin.flush;

/**
 * One flush stream's offsets, as JSON texts (the Python flush source's offsets, so that a
 * checkpoint can run with either source). Every method answers at once but {@link #ready()},
 * which may wait a moment (at most a fifth of a second) for the initial rows being written in
 * the driver's process: the stream waits for it itself, with sleeps that a query's stop interrupts.
 */
public interface ProgressStream {
    /**
     * Whether the join's initial rows are complete, after waiting at most a fifth of a second for
     * their writing where the driver's process runs it; raises if their writing failed.
     */
    boolean ready();

    /** The offset before the query's first. */
    String initialOffset();

    /** The join's progress now; {@code start} is the offset the next batch starts from, or null. */
    String latestOffset(String start);

    /** The query runs with {@code Trigger.AvailableNow}. */
    void prepareForTriggerAvailableNow();

    /** Spark planned a batch ending at {@code end} (a restarted query's owner is in it). */
    void planned(String end);
}
