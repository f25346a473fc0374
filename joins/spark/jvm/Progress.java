package streamjoin.flush;

/**
 * The Python side of the flush source: an object of the driver's Python process, reached through
 * py4j's callback server. Spark asks the source for offsets on its query thread; the source asks
 * a stream this object opened, which computes them from the join's checkpoint.
 */
public interface Progress {
    /**
     * A new stream's offsets (Spark makes one stream a query start), for the source's options:
     * the join's checkpoint, its partitions and inputs, and the flags release, hold and initial.
     */
    ProgressStream open(String checkpoint, String partitions, String inputs, String release, String hold,
                        String initial);
}
