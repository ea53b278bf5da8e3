"""Fixtures for the happybase suite: a `basalt serve` process per test module.

The binary is `$BASALT_BIN` (the Rust test `cli/tests/happybase.rs` sets it to the binary
cargo built), else target/release/basalt. Each server gets a fresh data directory and a free
port (`--port 0`, and a free info port; the server prints `listening on ADDR` once it listens) and is stopped with
SIGTERM at the end, which must close the engine cleanly (exit status 0).
"""
import itertools
import os
import pathlib
import signal
import subprocess
import tempfile

import happybase
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def basalt_bin():
    env = os.environ.get("BASALT_BIN")
    if env:
        return env
    target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    return str(pathlib.Path(target) / "release" / "basalt")


class Server:
    """A running `basalt serve` over a temporary directory."""

    def __init__(self, *flags, data_dir=None):
        # A directory prepared beforehand (a `tempfile.TemporaryDirectory`), or a fresh one.
        self.dir = data_dir or tempfile.TemporaryDirectory(prefix="basalt-happybase-")
        self.proc = subprocess.Popen(
            [basalt_bin(), "serve", self.dir.name, "--port", "0", "--info-port", "0", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError("server did not start: %r %s" % (line, self.proc.stderr.read()))
        self.host, port = line.split()[-1].rsplit(":", 1)
        self.port = int(port)

    def connect(self, transport="buffered", protocol="binary", **kw):
        return happybase.Connection(
            self.host, self.port, transport=transport, protocol=protocol, **kw
        )

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        finally:
            self.proc.kill()
            self.dir.cleanup()
        stderr = self.proc.stderr.read()
        assert code == 0, "server exit %s: %s" % (code, stderr)
        assert "engine closed" in stderr, stderr


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


WIRES = [
    ("buffered", "binary"),
    ("buffered", "compact"),
    ("framed", "binary"),
    ("framed", "compact"),
]


@pytest.fixture(params=WIRES, ids=["-".join(w) for w in WIRES])
def conn(request, server):
    transport, protocol = request.param
    c = server.connect(transport, protocol)
    yield c
    c.close()


_names = itertools.count()


@pytest.fixture
def table(conn):
    """A fresh table with families cf (3 versions, the IDL's default) and cg (1 version)."""
    name = ("t%d" % next(_names)).encode()
    conn.create_table(name, {"cf": {}, "cg": {"max_versions": 1}})
    yield conn.table(name)
    conn.delete_table(name, disable=True)
