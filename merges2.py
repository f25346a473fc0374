import os, sys, time
import streamjoin.statestore.layers as L
import streamjoin.changelog.compaction as C
import streamjoin.runtime.task as T
orig = L.Layers.write_coded_base
def wb(self, d, stem, sync):
    t = time.perf_counter()
    r = orig(self, d, stem, sync)
    print(f"merge base={len(self.base):,} delta={len(self.delta):,} {time.perf_counter()-t:.3f}s bytes {sum(x[1] for x in r[0])/1e6:.1f}MB", flush=True)
    return r
L.Layers.write_coded_base = wb
so = T.snapshot_from_store
def snap(log, store, version, **kw):
    t = time.perf_counter()
    r = so(log, store, version, **kw)
    print(f"snapshot v{version} entries={r.entries_after if hasattr(r,'entries_after') else r} {time.perf_counter()-t:.3f}s", flush=True)
    return r
T.snapshot_from_store = snap
from streamjoin.jobs.cli import main
sys.exit(main(["bench", "table", "--stores", "arranged", "--no-spark", "--in-process"] + sys.argv[1:]))
