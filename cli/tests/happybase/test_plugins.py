"""Plugins through happybase against `basalt serve`: the example validation and counter
plugins (examples/plugins, components committed with their sha256) uploaded and attached
with the `basalt` shell, then exercised by happybase over the Thrift gateway, which runs
them as the embedded engine does; the sum endpoint through the shell on the same data."""
import signal
import subprocess
import tempfile

import pytest

from conftest import ROOT, Server, basalt_bin

EXAMPLES = ROOT / "examples" / "plugins"


def sha(name):
    return (EXAMPLES / (name + ".wasm.sha256")).read_text().split()[0]


def shell(data_dir, script):
    out = subprocess.run(
        [basalt_bin(), "shell", data_dir, "-n"],
        input=script,
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "ERROR" not in out.stdout, out.stdout
    return out.stdout


def test_plugins_serve_happybase_as_they_serve_the_engine():
    data = tempfile.TemporaryDirectory(prefix="basalt-plugins-")
    validation, counter, total = sha("validation"), sha("counter"), sha("sum")
    shell(
        data.name,
        "\n".join(
            [
                "upload_coprocessor '%s/validation.wasm'" % EXAMPLES,
                "upload_coprocessor '%s/counter.wasm'" % EXAMPLES,
                "upload_coprocessor '%s/sum.wasm'" % EXAMPLES,
                "create 'users', 'info'",
                "alter 'users', METHOD => 'table_att', 'coprocessor' => 'plugin:%s'" % validation,
                "create 'user_stats', 'f'",
                "create 'follows', 'f'",
                "alter 'follows', METHOD => 'table_att', 'coprocessor' => 'plugin:%s||stats=user_stats'"
                % counter,
            ]
        ),
    )
    server = Server(data_dir=data)
    try:
        conn = server.connect()
        users = conn.table(b"users")
        users.put(b"ada", {b"info:age": b"36"})
        with pytest.raises(Exception) as refused:
            users.put(b"bob", {b"info:age": b"200"})
        assert 'age "200" is not a decimal number from 0 to 150' in str(refused.value)
        assert users.row(b"bob") == {}
        assert users.row(b"ada") == {b"info:age": b"36"}

        follows = conn.table(b"follows")
        for edge, on in [(b"ada|bob", b"1"), (b"cid|bob", b"1"), (b"ada|cid", b"1"), (b"ada|bob", b"0")]:
            follows.put(edge, {b"f:on": on})
        with follows.batch() as b:
            b.put(b"dee|bob", {b"f:on": b"1"})
            b.put(b"dee|ada", {b"f:on": b"1"})
        stats = conn.table(b"user_stats")
        assert stats.counter_get(b"bob", b"f:followers") == 2
        assert stats.counter_get(b"ada", b"f:following") == 1
        assert stats.counter_get(b"dee", b"f:following") == 2
        assert stats.counter_get(b"cid", b"f:followers") == 1
        for row, n in [(b"r1", 5), (b"r2", 7), (b"r3", -2)]:
            conn.table(b"user_stats").counter_inc(row, b"f:n", n)
        conn.close()
    finally:
        # Stopped by hand: Server.stop would remove the directory the shell reads next.
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 0, server.proc.stderr.read()
    # The sum endpoint over what happybase wrote, through the shell.
    out = shell(data.name, "call_endpoint 'user_stats', '%s', 'f:n'\naggregate 'user_stats', 'sum', 'f:n'" % total)
    # 10 (5 + 7 - 2) over 3 values, as the built-in aggregation's sum.
    assert "\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x0A\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x03" in out, out
    assert "SUM = 10" in out, out
    data.cleanup()
