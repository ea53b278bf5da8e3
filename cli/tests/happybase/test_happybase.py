"""Every happybase 1.3 call against `basalt serve`, in both transports and both protocols
(the `conn` fixture is parametrized), with HBase's semantics where they differ from the
obvious: exclusive timestamp bounds, puts before deletes in one batch, 8-byte big-endian
counters, `maxVersions` as sent, empty rows skipped."""
import struct
import time

import happybase
import pytest
from thriftpy2.thrift import TApplicationException

import Hbase_thrift  # registered by happybase when it loads its IDL


def test_tables_create_delete_enable_disable(conn):
    name = b"admin_" + str(id(conn)).encode()
    assert name not in conn.tables()
    conn.create_table(
        name,
        {
            "a": {"max_versions": 5, "time_to_live": 3600, "bloom_filter_type": "ROW"},
            "b": {"in_memory": True, "block_cache_enabled": True, "compression": "LZ4"},
        },
    )
    assert name in conn.tables()
    with pytest.raises(Hbase_thrift.AlreadyExists):
        conn.create_table(name, {"a": {}})
    assert conn.is_table_enabled(name)
    conn.disable_table(name)
    assert not conn.is_table_enabled(name)
    conn.enable_table(name)
    assert conn.is_table_enabled(name)
    fams = conn.table(name).families()
    assert set(fams) == {b"a", b"b"}
    assert fams[b"a"]["max_versions"] == 5
    assert fams[b"a"]["time_to_live"] == 3600
    assert fams[b"a"]["bloom_filter_type"] == b"ROW"
    assert fams[b"b"]["in_memory"] is True
    assert fams[b"b"]["block_cache_enabled"] is True
    assert fams[b"b"]["compression"] == b"LZ4"
    # TTL <= 0 (happybase's default -1) is forever.
    assert fams[b"b"]["time_to_live"] == 2**31 - 1
    conn.compact_table(name)
    conn.compact_table(name, major=True)
    conn.delete_table(name, disable=True)
    assert name not in conn.tables()
    with pytest.raises(Hbase_thrift.IOError):
        conn.delete_table(name)


def test_regions(table):
    regions = table.regions()
    assert len(regions) == 1
    r = regions[0]
    assert r["start_key"] == b"" and r["end_key"] == b""
    assert r["version"] == 1 and r["port"] > 0 and r["name"]
    # compact / majorCompact take a region's name (that region only), as HBase's.
    table.put(b"rc", {b"cf:a": b"1"})
    table.connection.client.majorCompact(r["name"])
    table.connection.client.compact(r["name"])
    assert table.row(b"rc") == {b"cf:a": b"1"}
    bogus = r["name"].rsplit(b",", 1)[0] + b",999999"
    with pytest.raises(Hbase_thrift.IOError):
        table.connection.client.majorCompact(bogus)


def test_put_row_rows_columns(table):
    table.put(b"r1", {b"cf:a": b"1", b"cf:b": b"2", b"cg:x": b"3"})
    table.put(b"r2", {b"cf:a": b"4"})
    assert table.row(b"r1") == {b"cf:a": b"1", b"cf:b": b"2", b"cg:x": b"3"}
    assert table.row(b"r1", columns=[b"cf:a", b"cg"]) == {b"cf:a": b"1", b"cg:x": b"3"}
    assert table.row(b"missing") == {}
    rows = table.rows([b"r1", b"missing", b"r2"])
    assert [k for k, _ in rows] == [b"r1", b"r2"], "missing rows are skipped"
    assert table.rows([b"r1", b"r2"], columns=[b"cf:a"]) == [
        (b"r1", {b"cf:a": b"1"}),
        (b"r2", {b"cf:a": b"4"}),
    ]
    row = table.row(b"r1", include_timestamp=True)
    value, ts = row[b"cf:a"]
    assert value == b"1" and ts > 0


def test_empty_qualifier_is_not_the_family(table):
    # HBase (HBASE-9549): "cf:" is the empty qualifier, "cf" the whole family.
    table.put(b"r", {b"cf:": b"empty", b"cf:q": b"q"})
    assert table.row(b"r", columns=[b"cf:"]) == {b"cf:": b"empty"}
    assert table.row(b"r", columns=[b"cf"]) == {b"cf:": b"empty", b"cf:q": b"q"}


def test_timestamps_versions_and_cells(table):
    for ts in (10, 20, 30, 40):
        table.put(b"r", {b"cf:a": b"v%d" % ts, b"cg:a": b"g%d" % ts}, timestamp=ts)
    # cf keeps 3 versions (the maxVersions=3 happybase sends for {}), cg 1.
    assert table.cells(b"r", b"cf:a") == [b"v40", b"v30", b"v20"]
    assert table.cells(b"r", b"cg:a") == [b"g40"]
    assert table.cells(b"r", b"cf:a", versions=2, include_timestamp=True) == [
        (b"v40", 40),
        (b"v30", 30),
    ]
    # Read timestamps are exclusive upper bounds, as HBase's setTimeRange(0, ts).
    assert table.cells(b"r", b"cf:a", timestamp=40) == [b"v30", b"v20"]
    assert table.row(b"r", timestamp=40) == {b"cf:a": b"v30"}
    assert table.row(b"r", columns=[b"cf:a"], timestamp=31, include_timestamp=True) == {
        b"cf:a": (b"v30", 30)
    }
    assert table.rows([b"r"], timestamp=21) == [(b"r", {b"cf:a": b"v20"})]
    assert table.row(b"r", timestamp=10) == {}


def test_delete_columns_families_rows_and_timestamps(table):
    for ts in (1, 2, 3):
        table.put(b"r", {b"cf:a": b"a%d" % ts, b"cf:b": b"b", b"cg:c": b"c"}, timestamp=ts)
    # A column delete at ts removes every version <= ts.
    table.delete(b"r", columns=[b"cf:a"], timestamp=2)
    assert table.cells(b"r", b"cf:a") == [b"a3"]
    table.delete(b"r", columns=[b"cf:a"])
    assert table.cells(b"r", b"cf:a") == []
    # A family delete.
    table.delete(b"r", columns=[b"cf"])
    assert table.row(b"r") == {b"cg:c": b"c"}
    # The whole row (happybase sends one delete per family).
    table.delete(b"r")
    assert table.row(b"r") == {}


def test_batch_puts_before_deletes_and_wal_off(table):
    table.put(b"old", {b"cf:a": b"x"})
    with table.batch(wal=False) as b:
        b.put(b"r1", {b"cf:a": b"1"})
        b.delete(b"old")
        b.put(b"r2", {b"cf:a": b"2"})
    assert table.row(b"r1") == {b"cf:a": b"1"}
    assert table.row(b"r2") == {b"cf:a": b"2"}
    assert table.row(b"old") == {}
    # One batch with a put and a delete of the same column: HBase applies the puts first,
    # then the deletes, so the column ends up deleted.
    b = table.batch()
    b.put(b"x", {b"cf:a": b"put"})
    b.delete(b"x", columns=[b"cf:a"])
    b.send()
    assert table.row(b"x") == {}
    # Timestamped batches, and batch_size sending on the way.
    with table.batch(timestamp=123, batch_size=3) as b:
        for i in range(10):
            b.put(b"ts%02d" % i, {b"cf:a": b"%d" % i})
    assert table.row(b"ts07", include_timestamp=True) == {b"cf:a": (b"7", 123)}
    with table.batch(transaction=True) as b:
        b.put(b"tx", {b"cf:a": b"1"})
    assert table.row(b"tx") == {b"cf:a": b"1"}
    table.put(b"nowal", {b"cf:a": b"1"}, wal=False)
    assert table.row(b"nowal") == {b"cf:a": b"1"}
    table.delete(b"nowal", wal=False)
    assert table.row(b"nowal") == {}


def test_put_without_qualifier_is_illegal(table):
    with pytest.raises(Hbase_thrift.IllegalArgument):
        table.put(b"r", {b"cf": b"x"})
    with pytest.raises(Hbase_thrift.IOError):
        table.put(b"r", {b"nofamily:q": b"x"})


def test_counters(table):
    assert table.counter_get(b"c", b"cf:n") == 0
    assert table.counter_inc(b"c", b"cf:n") == 1
    assert table.counter_inc(b"c", b"cf:n", value=10) == 11
    assert table.counter_dec(b"c", b"cf:n", value=3) == 8
    assert table.counter_dec(b"c", b"cf:n") == 7
    # Increments within one millisecond take timestamps past the wall clock (each newer than
    # the last, as HBase's); the put that follows is stamped no older than them.
    table.counter_set(b"c", b"cf:n", 42)
    assert table.counter_get(b"c", b"cf:n") == 42
    # Stored as an 8-byte big-endian value.
    assert table.row(b"c")[b"cf:n"] == struct.pack(">q", 42)
    table.put(b"c", {b"cf:s": b"abc"})
    with pytest.raises((Hbase_thrift.IllegalArgument, Hbase_thrift.IOError)):
        table.counter_inc(b"c", b"cf:s")


def test_server_time_never_goes_back(table):
    # Issue 44's sequence: an increment, a read (an increment by 0), a put at server time,
    # an increment: the put is not hidden under the increments' timestamps.
    assert table.counter_inc(b"k", b"cf:n", 10) == 10
    assert table.counter_get(b"k", b"cf:n") == 10
    table.counter_set(b"k", b"cf:n", 0)
    assert table.counter_inc(b"k", b"cf:n") == 1
    # A burst runs the increments' timestamps ahead of the wall clock; a put and a delete
    # at server time right after it still come after it.
    for _ in range(200):
        table.counter_inc(b"b", b"cf:n")
    table.counter_set(b"b", b"cf:n", 5)
    assert table.counter_get(b"b", b"cf:n") == 5
    table.delete(b"b", columns=[b"cf:n"])
    assert table.row(b"b") == {}


def fill(table, n=20):
    with table.batch() as b:
        for i in range(n):
            b.put(b"row%02d" % i, {b"cf:a": b"a%d" % i, b"cf:b": b"b%d" % i, b"cg:c": b"c%d" % i})


def keys(rows):
    return [k for k, _ in rows]


def test_scan_ranges_prefix_limit(table):
    fill(table)
    table.put(b"other", {b"cf:a": b"o"})
    assert len(list(table.scan())) == 21
    assert keys(table.scan(row_prefix=b"row1")) == [b"row%02d" % i for i in range(10, 20)]
    assert keys(table.scan(row_start=b"row05", row_stop=b"row08")) == [b"row05", b"row06", b"row07"]
    assert keys(table.scan(row_start=b"row18")) == [b"row18", b"row19"]
    assert keys(table.scan(row_stop=b"row02")) == [b"other", b"row00", b"row01"]
    assert keys(table.scan(limit=4)) == [b"other", b"row00", b"row01", b"row02"]
    assert keys(table.scan(row_prefix=b"row", limit=3, batch_size=1)) == [b"row00", b"row01", b"row02"]
    assert len(list(table.scan(batch_size=7))) == 21


def test_scan_columns_filter_timestamps(table):
    fill(table, 5)
    assert list(table.scan(row_prefix=b"row00", columns=[b"cf:a"])) == [(b"row00", {b"cf:a": b"a0"})]
    assert list(table.scan(row_prefix=b"row00", columns=[b"cg"])) == [(b"row00", {b"cg:c": b"c0"})]
    rows = list(table.scan(filter=b"SingleColumnValueFilter('cf', 'a', =, 'binary:a3')"))
    assert keys(rows) == [b"row03"]
    rows = list(table.scan(filter=b"PrefixFilter('row0') AND KeyOnlyFilter()", limit=2))
    assert rows == [
        (b"row00", {b"cf:a": b"", b"cf:b": b"", b"cg:c": b""}),
        (b"row01", {b"cf:a": b"", b"cf:b": b"", b"cg:c": b""}),
    ]
    with pytest.raises(Hbase_thrift.IOError):
        list(table.scan(filter=b"NoSuchFilter()"))
    table.put(b"row00", {b"cf:a": b"new"}, timestamp=2**42)
    assert table.row(b"row00")[b"cf:a"] == b"new"
    old = dict(table.scan(row_prefix=b"row00", timestamp=2**42, include_timestamp=True))
    assert old[b"row00"][b"cf:a"][0] == b"a0"


def test_scan_reverse_sorted_batching(table):
    fill(table, 6)
    assert keys(table.scan(reverse=True)) == [b"row%02d" % i for i in range(5, -1, -1)]
    assert keys(table.scan(row_prefix=b"row0", reverse=True, limit=2)) == [b"row05", b"row04"]
    assert keys(table.scan(row_start=b"row03", row_stop=b"row01", reverse=True)) == [b"row03", b"row02"]
    (k, cols), = table.scan(row_prefix=b"row01", sorted_columns=True)
    assert list(cols.items()) == [(b"cf:a", b"a1"), (b"cf:b", b"b1"), (b"cg:c", b"c1")]
    # scan_batching splits a row into results of at most that many cells.
    parts = list(table.scan(row_prefix=b"row01", scan_batching=2))
    assert [k for k, _ in parts] == [b"row01", b"row01"]
    assert [len(c) for _, c in parts] == [2, 1]


def test_connection_pool(server):
    pool = happybase.ConnectionPool(3, host=server.host, port=server.port)
    with pool.connection() as c:
        c.create_table(b"pooled", {"cf": {}})
        c.table(b"pooled").put(b"r", {b"cf:a": b"1"})
    seen = []
    for _ in range(5):
        with pool.connection() as c:
            seen.append(c.table(b"pooled").row(b"r"))
    assert seen == [{b"cf:a": b"1"}] * 5
    with pool.connection() as c:
        c.delete_table(b"pooled", disable=True)


def test_table_prefix(server):
    c = server.connect(table_prefix=b"app")
    c.create_table(b"users", {"cf": {}})
    assert b"users" in c.tables()
    assert b"app_users" in server.connect().tables()
    c.delete_table(b"users", disable=True)


def test_rest_of_the_idl(conn, table):
    """The methods happybase does not call, through its Thrift client."""
    cl, t = conn.client, table.name
    M = Hbase_thrift.Mutation
    cl.mutateRow(t, b"m", [M(column=b"cf:a", value=b"1"), M(column=b"cf:b", value=b"2")], {})
    cl.mutateRowTs(t, b"m", [M(column=b"cf:a", value=b"old")], 5, {})
    assert [r.row for r in cl.getRow(t, b"m", {})] == [b"m"]
    assert cl.getRow(t, b"m", {})[0].columns[b"cf:a"].value == b"1"
    assert cl.getRowTs(t, b"m", 6, {})[0].columns[b"cf:a"].value == b"old"
    assert [r.row for r in cl.getRows(t, [b"m", b"nope"], {})] == [b"m"]
    assert cl.getRowsTs(t, [b"m"], 6, {})[0].columns == {b"cf:a": Hbase_thrift.TCell(b"old", 5)}
    assert [c.value for c in cl.get(t, b"m", b"cf:a", {})] == [b"1"]
    assert [c.value for c in cl.getVer(t, b"m", b"cf:a", 5, {})] == [b"1", b"old"]
    assert [c.value for c in cl.getVerTs(t, b"m", b"cf:a", 6, 5, {})] == [b"old"]
    cl.increment(Hbase_thrift.TIncrement(table=t, row=b"i", column=b"cf:n", ammount=3))
    cl.incrementRows([Hbase_thrift.TIncrement(table=t, row=b"i", column=b"cf:n", ammount=4)])
    assert cl.atomicIncrement(t, b"i", b"cf:n", 0) == 7
    cells = cl.append(Hbase_thrift.TAppend(table=t, row=b"m", columns=[b"cf:b"], values=[b"x"]))
    assert [c.value for c in cells] == [b"2x"]
    assert cl.checkAndPut(t, b"m", b"cf:b", b"2x", M(column=b"cf:c", value=b"ok"), {}) is True
    assert cl.checkAndPut(t, b"m", b"cf:b", b"nope", M(column=b"cf:c", value=b"no"), {}) is False
    assert table.row(b"m")[b"cf:c"] == b"ok"
    cl.deleteAll(t, b"m", b"cf:c", {})
    assert b"cf:c" not in table.row(b"m")
    cl.deleteAllTs(t, b"m", b"cf:a", 5, {})
    assert table.cells(b"m", b"cf:a") == [b"1"]
    for r in (b"s1", b"s2", b"s3", b"t1"):
        table.put(r, {b"cf:a": r})

    def drain(sid):
        out = []
        while True:
            rows = cl.scannerGet(sid)
            if not rows:
                break
            out += [r.row for r in rows]
        cl.scannerClose(sid)
        return out

    assert drain(cl.scannerOpen(t, b"s2", [b"cf:a"], {})) == [b"s2", b"s3", b"t1"]
    assert drain(cl.scannerOpenWithStop(t, b"s1", b"s3", [], {})) == [b"s1", b"s2"]
    assert drain(cl.scannerOpenWithPrefix(t, b"s", [], {})) == [b"s1", b"s2", b"s3"]
    assert drain(cl.scannerOpenTs(t, b"s", [], 2**62, {})) == [b"s1", b"s2", b"s3", b"t1"]
    assert drain(cl.scannerOpenWithStopTs(t, b"s", b"t", [], 2**62, {})) == [b"s1", b"s2", b"s3"]
    with pytest.raises(Hbase_thrift.IllegalArgument):
        cl.scannerGetList(987654, 1)
    with pytest.raises(Hbase_thrift.IllegalArgument):
        cl.scannerClose(987654)
    info = cl.getRegionInfo(t + b",s1,99999999999999")
    assert info.startKey == b"" and info.version == 1
    cl.deleteAllRowTs(t, b"s1", 2**62, {})
    cl.deleteAllRow(t, b"s2", {})
    assert table.row(b"s1") == {} and table.row(b"s2") == {}
    # An unsupported method: a Thrift application exception, and the connection goes on.
    with pytest.raises(TApplicationException):
        cl.getRowOrBefore(t, b"s", b"cf")
    assert table.row(b"s3") == {b"cf:a": b"s3"}


def test_scanner_lease_expires():
    from conftest import Server

    s = Server("--scanner-lease", "1")
    try:
        c = s.connect()
        c.create_table(b"lease", {"cf": {}})
        t = c.table(b"lease")
        for i in range(3):
            t.put(b"r%d" % i, {b"cf:a": b"1"})
        sid = c.client.scannerOpenWithScan(b"lease", Hbase_thrift.TScan(caching=1), {})
        assert len(c.client.scannerGetList(sid, 1)) == 1
        time.sleep(2.5)
        with pytest.raises(Hbase_thrift.IllegalArgument):
            c.client.scannerGetList(sid, 1)
        # A scan used within its lease keeps going.
        assert len(list(t.scan(batch_size=1))) == 3
    finally:
        s.stop()


def test_forced_transport_and_protocol():
    from conftest import Server

    s = Server("--framed", "--compact")
    try:
        assert s.connect("framed", "compact").tables() == []
        with pytest.raises(Exception):
            s.connect("buffered", "binary", timeout=5000).tables()
        # The refused client did not hurt the server.
        assert s.connect("framed", "compact").tables() == []
    finally:
        s.stop()
