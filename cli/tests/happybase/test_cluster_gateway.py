"""happybase through `basalt serve --etcd`: the Thrift gateway in front of a cluster.

The Rust test `cli/tests/serve_cluster.rs` starts etcd, two `basalt regionserver`
processes on one shared store and the gateway, and names the gateway's address in
BASALT_GATEWAY (`host:port`); without it this module is skipped. The gateway detects the
transport and protocol per connection, so the `conn` fixture's four wires all reach it.

The checks are those of test_happybase.py and test_concurrency.py, imported so that they
run here against this module's `server` (pytest resolves fixtures where a test is
collected): the same calls, the same answers, over a cluster. The tests that start servers
of their own (scanner leases, forced transports) stay in test_happybase.py.
"""
import os

import happybase
import pytest

from test_concurrency import test_32_clients_put_get_scan  # noqa: F401
from test_happybase import (  # noqa: F401
    test_batch_puts_before_deletes_and_wal_off,
    test_connection_pool,
    test_counters,
    test_delete_columns_families_rows_and_timestamps,
    test_empty_qualifier_is_not_the_family,
    test_put_row_rows_columns,
    test_put_without_qualifier_is_illegal,
    test_regions,
    test_rest_of_the_idl,
    test_scan_columns_filter_timestamps,
    test_scan_ranges_prefix_limit,
    test_scan_reverse_sorted_batching,
    test_server_time_never_goes_back,
    test_table_prefix,
    test_tables_create_delete_enable_disable,
    test_timestamps_versions_and_cells,
)


class Gateway:
    """A `basalt serve --etcd` someone else started and stops."""

    def __init__(self, address):
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)

    def connect(self, transport="buffered", protocol="binary", **kw):
        return happybase.Connection(
            self.host, self.port, transport=transport, protocol=protocol, **kw
        )


@pytest.fixture(scope="module")
def server():
    address = os.environ.get("BASALT_GATEWAY")
    if not address:
        pytest.skip("BASALT_GATEWAY is not set: cli/tests/serve_cluster.rs runs this module")
    yield Gateway(address)


def test_the_gateway_serves_a_pre_split_table_across_servers(server):
    """A table of four regions: rows land in every region and read back in key order."""
    c = server.connect()
    c.create_table(b"spread", {"cf": {}})
    t = c.table(b"spread")
    keys = [b"%c%03d" % (p, i) for p in b"agmt" for i in range(25)]
    with t.batch(batch_size=20) as b:
        for k in keys:
            b.put(k, {b"cf:v": k})
    assert [k for k, _ in t.scan()] == sorted(keys)
    assert [k for k, _ in t.scan(row_start=b"g", row_stop=b"m")] == keys[25:50]
    assert [k for k, _ in t.scan(reverse=True, limit=3)] == sorted(keys, reverse=True)[:3]
    assert len(t.regions()) >= 1
    c.delete_table(b"spread", disable=True)
    assert b"spread" not in c.tables()
