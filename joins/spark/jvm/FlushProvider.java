package streamjoin.flush;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM flush source (streamjoin.spark.flush_jvm): a stream of no rows whose offsets the
 * {@link Progress} that the driver's Python process registered computes, from the source's
 * options (the Python flush source's). Every batch plans no partitions, so no task reads it.
 */
public final class FlushProvider implements TableProvider {
    private static final String[] OPTIONS = {"checkpoint", "partitions", "inputs", "release", "hold", "initial"};
    private static final StructType SCHEMA = new StructType().add("_sj_flush", DataTypes.LongType);
    private static final long FIRST_PAUSE_MS = 10;
    private static final long LONGEST_PAUSE_MS = 50;
    private static volatile Progress registered;

    /** The driver's Python process registers its Progress once (the last one registered is asked). */
    public static void register(Progress progress) {
        registered = progress;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return SCHEMA;
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        String[] options = new String[OPTIONS.length];
        for (int i = 0; i < OPTIONS.length; i++) {
            options[i] = properties.getOrDefault(OPTIONS[i], "");
        }
        return new FlushTable(options);
    }

    private static final class FlushTable implements Table, SupportsRead {
        private final String[] options;

        FlushTable(String[] options) {
            this.options = options;
        }

        @Override
        public String name() {
            return "streamjoin_flush";
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap scanOptions) {
            return () -> new Scan() {
                @Override
                public StructType readSchema() {
                    return SCHEMA;
                }

                @Override
                public String description() {
                    return "streamjoin_flush";
                }

                @Override
                public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
                    Progress progress = registered;
                    if (progress == null) {
                        throw new IllegalStateException("streamjoin's flush source is read by the joins that "
                            + "add it (streamjoin.spark.flush_jvm), which register the driver's Python process "
                            + "first; none has in this driver");
                    }
                    return new FlushStream(progress.open(options[0], options[1], options[2], options[3],
                                                         options[4], options[5]));
                }
            };
        }
    }

    private static final class JsonOffset extends Offset {
        private final String json;

        JsonOffset(String json) {
            this.json = json;
        }

        @Override
        public String json() {
            return json;
        }
    }

    private static final class FlushStream implements MicroBatchStream, SupportsTriggerAvailableNow {
        private final ProgressStream stream;
        private boolean ready;

        FlushStream(ProgressStream stream) {
            this.stream = stream;
        }

        /**
         * Wait for the join's initial rows: ask {@link ProgressStream#ready()} (which, in the
         * process writing them, waits a moment for the writing itself) with short sleeps between
         * the questions, which a query's stop interrupts.
         */
        private void awaitReady() {
            long pause = FIRST_PAUSE_MS;
            while (!ready) {
                ready = stream.ready();
                if (!ready) {
                    try {
                        Thread.sleep(pause);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        FlushProvider.<RuntimeException>rethrow(e);   // as Spark's stop expects it
                    }
                    pause = Math.min(pause * 3 / 2, LONGEST_PAUSE_MS);
                }
            }
        }

        @Override
        public Offset initialOffset() {
            awaitReady();
            return new JsonOffset(stream.initialOffset());
        }

        @Override
        public Offset deserializeOffset(String json) {
            return new JsonOffset(json);
        }

        @Override
        public Offset latestOffset() {
            throw new UnsupportedOperationException("streamjoin's flush source takes latestOffset(start, limit)");
        }

        @Override
        public Offset latestOffset(Offset start, ReadLimit limit) {
            awaitReady();
            return new JsonOffset(stream.latestOffset(start == null ? null : start.json()));
        }

        @Override
        public ReadLimit getDefaultReadLimit() {
            return ReadLimit.allAvailable();
        }

        @Override
        public void prepareForTriggerAvailableNow() {
            stream.prepareForTriggerAvailableNow();
        }

        @Override
        public InputPartition[] planInputPartitions(Offset start, Offset end) {
            stream.planned(end.json());
            return new InputPartition[0];
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new NoRows();
        }

        @Override
        public void commit(Offset end) {
        }

        @Override
        public void stop() {
        }
    }

    private static final class NoRows implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("streamjoin's flush source has no partitions");
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> void rethrow(Throwable e) throws E {
        throw (E) e;
    }
}
