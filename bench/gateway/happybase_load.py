"""The gateway suite's client (bench/src/gateway.rs runs it): happybase batch puts and a
full scan against a running `basalt serve`, timed, as a happybase user would write them.

Usage: happybase_load.py HOST PORT ROWS BATCH
Prints one JSON line: {"rows": N, "put_secs": s, "scanned": n, "scan_secs": s}.
Rows are `row%010d` with one 100-byte cell `f:v`, the same work the suite does through the
Rust API.
"""
import json
import sys
import time

import happybase

host, port, rows, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
conn = happybase.Connection(host, port, autoconnect=True)
conn.create_table("bench", {"f": dict()})
table = conn.table("bench")
value = b"v" * 100
start = time.perf_counter()
with table.batch(batch_size=batch) as b:
    for i in range(rows):
        b.put(b"row%010d" % i, {b"f:v": value})
put_secs = time.perf_counter() - start
start = time.perf_counter()
scanned = 0
for _key, _data in table.scan(batch_size=batch):
    scanned += 1
scan_secs = time.perf_counter() - start
conn.close()
print(json.dumps({"rows": rows, "put_secs": put_secs, "scanned": scanned, "scan_secs": scan_secs}))
