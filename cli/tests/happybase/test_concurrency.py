"""32 happybase clients (threads, each with its own connection, the four transport and
protocol pairs spread among them) doing puts, gets and scans against one server for
BASALT_CONCURRENCY_SECS seconds (default 60, the issue's figure; CI sets a shorter period):
no call fails, every read sees its writer's acknowledged puts, and at the end every
acknowledged put is read back."""
import os
import threading
import time

from conftest import WIRES

CLIENTS = 32


def test_32_clients_put_get_scan(server):
    seconds = float(os.environ.get("BASALT_CONCURRENCY_SECS", "60"))
    setup = server.connect()
    setup.create_table(b"load", {"cf": {"max_versions": 1}})
    errors, acked = [], [[] for _ in range(CLIENTS)]
    deadline = time.time() + seconds
    start = threading.Barrier(CLIENTS)

    def client(i):
        try:
            transport, protocol = WIRES[i % len(WIRES)]
            c = server.connect(transport, protocol)
            t = c.table(b"load")
            start.wait()
            n = 0
            while time.time() < deadline:
                keys = [b"c%02d-%06d" % (i, n + k) for k in range(5)]
                if n % 2:
                    with t.batch() as b:
                        for k in keys:
                            b.put(k, {b"cf:v": k, b"cf:n": b"%d" % i})
                else:
                    for k in keys:
                        t.put(k, {b"cf:v": k, b"cf:n": b"%d" % i})
                acked[i].extend(keys)  # acknowledged: the call returned
                n += 5
                assert t.row(keys[-1]) == {b"cf:v": keys[-1], b"cf:n": b"%d" % i}
                got = dict(t.rows(keys[:2], columns=[b"cf:v"]))
                assert got == {k: {b"cf:v": k} for k in keys[:2]}
                if n % 50 == 0:
                    rows = list(t.scan(row_prefix=b"c%02d-" % i, columns=[b"cf:v"], batch_size=100))
                    assert len(rows) == n, (len(rows), n)
                    assert all(r == v[b"cf:v"] for r, v in rows)
            c.close()
        except Exception as e:  # noqa: BLE001 - every failure is reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    total = sum(len(a) for a in acked)
    assert total > 0
    seen = {k: v for k, v in setup.table(b"load").scan(columns=[b"cf:v"], batch_size=5000)}
    missing = [k for a in acked for k in a if seen.get(k, {}).get(b"cf:v") != k]
    assert missing == [], "%d of %d acknowledged puts not read back" % (len(missing), total)
    assert len(seen) == total
    print("%d clients, %.0f s: %d puts acknowledged and read back" % (CLIENTS, seconds, total))
