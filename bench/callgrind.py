#!/usr/bin/env python3
"""Instructions and mallocs per operation of Basalt and fjall, from callgrind.

Runs the bench's `opcost` suite under callgrind and turns its phases into figures:

    cargo build --release -p basalt-bench
    python3 bench/callgrind.py [--out DIR] [opcost arguments...]
    # e.g. python3 bench/callgrind.py --records 100000 --operations 50000

It builds nothing: it runs `target/release/basalt-bench` (under $CARGO_TARGET_DIR if set)
as

    valgrind --tool=callgrind --dump-after='*opcost::phase_end*' \
        --callgrind-out-file=DIR/cg.out.%p basalt-bench opcost <arguments>

Every phase of the suite ends with one call of `opcost::phase_end`, which prints
`OPCOST <engine> <phase> <ops>`; callgrind writes a dump each time that function returns
(DIR/cg.out.<pid>.1, .2, ... in order; the remainder at exit goes to one more file). Dump i
is paired with the i-th OPCOST line. Callgrind's default, one profile for all threads, is
kept, so the background threads' work (WAL, flush, compaction, tokio workers) is charged to
the phase in which it ran. For each dump the script reads the total instructions (its
`totals:` line) and counts the calls of the global allocator's entry points (the bench uses
mimalloc: `mi_malloc_aligned`, `mi_zalloc_aligned`, `mi_realloc_aligned`, which
`__rust_alloc`, `__rust_alloc_zeroed` and `__rust_realloc` call) from outside mimalloc:
a "malloc" is one of those calls, reallocations included (the table shows their share);
calls of libc's `malloc`/`calloc`/`realloc` (C code, thread start-up) are shown apart.

Output: the bench's own lines, a table, then for each measured phase (put, get_cached,
scan_row, get_missed)

    RESULT opcost/<phase> basalt=<instr/op> fjall=<instr/op> ratio=<b/f> unit=instructions better=lower
    RESULT opcost/<phase>_mallocs basalt=.. fjall=.. ratio=.. unit=mallocs better=lower

and `RESULT opcost/miss_cost` (get_missed minus get_cached, instructions per get). The
instructions of fjall's idle worker loop (see SPIN below) are left out. A put
includes its share of the flush (and compactions) after the load; scan_row is per row of
100-row scans. The figures count user-space instructions only: the kernel's share (WAL
writes, the reads of missed blocks from the OS page cache) is not in them.

Options:
    --out DIR   keep the dump files (and the bench's output, stdout.txt) in DIR
    -h, --help  this text
Everything else goes to the bench (`--records N --operations N --threads N --engines L`,
and the common ones such as `--block-size`, `--dir`). Needs valgrind; the standard
library only.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# The marker function, as callgrind names it (demangled; legacy mangling adds `::h<hash>`).
DUMP_PATTERN = "*opcost::phase_end*"
# The global allocator's entry points (mimalloc's `GlobalAlloc` calls them).
RUST_ALLOC = ("mi_malloc_aligned", "mi_zalloc_aligned", "mi_realloc_aligned")
# libc's allocator, for C code that does not go through the global allocator.
LIBC_ALLOC = ("malloc", "calloc", "realloc")
# fjall's worker loop (its source file) and the channel it spins on: with 2 or more workers
# (fjall's default on 2+ cores), worker 0 puts every compaction request it receives back on
# the channel for another worker and receives again, often the same request, until another
# worker takes it. Under valgrind, which runs one thread at a time, that loop can run for a
# whole phase (50 billion instructions in one run's `put`, next to none in the next). Its
# instructions are idle waiting, not work: they are left out of the figures (the table shows
# them). One worker would not spin but deadlocks fjall 3.1: the worker blocks sending a flush
# request on its own channel, full of the rotation requests writers queued meanwhile.
SPIN_FILE = re.compile(r"fjall-[^/]*/src/worker_pool\.rs$")
SPIN_CALLEE = "flume::"
# The phases that are figures, in report order.
MEASURED = ("put", "get_cached", "scan_row", "get_missed")
ENGINES = ("basalt", "fjall")


def usage():
    print(__doc__.strip())


def parse_dump(path):
    """(total instructions, {callee: calls from outside mimalloc}, spin instructions) of a dump.

    The spin is fjall's worker loop (see SPIN_FILE): every instruction of the functions of
    that source file (with what they inlined) and of its code inlined elsewhere, and every
    call it makes into the channel (`flume`); its calls of anything else (flushes,
    compactions, the journal) are work, not spin.
    """
    names = {}  # compressed function names: "(id)" -> name
    files = {}  # compressed file names
    total = None
    summary = None
    calls = {}
    spin = 0
    caller = ""
    callee = None
    fn_file = ""  # the file of the current function (fl=)
    cur_file = ""  # the file of the next cost lines (fl=, fi=, fe=)
    call_cost_next = False  # the next cost line is a call's inclusive cost
    spin_call = False

    def in_spin(fn_file, cur_file):
        # Code of a function of the loop's file (whatever it inlined), or code of that file
        # inlined elsewhere (the loop itself, in the thread's start function).
        return SPIN_FILE.search(fn_file) is not None or SPIN_FILE.search(cur_file) is not None

    def name_of(table, spec):
        # `(id) name` defines id, `(id)` refers to it, a bare name has no id.
        m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
            return m.group(2)
        return table.get(m.group(1), spec)

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                # A cost line: position, then the Ir count (the only event).
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if call_cost_next:
                    call_cost_next = False
                    if spin_call:
                        spin += cost
                elif in_spin(fn_file, cur_file):
                    spin += cost
            elif line.startswith("fl="):
                fn_file = cur_file = name_of(files, line[3:].rstrip("\n"))
            elif line.startswith(("fi=", "fe=")):
                cur_file = name_of(files, line[3:].rstrip("\n"))
            elif line.startswith("fn="):
                caller = name_of(names, line[3:].rstrip("\n"))
                callee = None
                cur_file = fn_file
            elif line.startswith("cfn="):
                callee = name_of(names, line[4:].rstrip("\n"))
            elif line.startswith(("cfi=", "cfl=")):
                name_of(files, line[4:].rstrip("\n"))
            elif line.startswith("calls="):
                call_cost_next = True
                spin_call = (in_spin(fn_file, cur_file) and callee is not None
                             and SPIN_CALLEE in callee)
                if callee is not None:
                    n = int(line[6:].split()[0])
                    internal = caller.startswith(("mi_", "_mi_")) and callee.startswith("mi_")
                    if not internal:
                        calls[callee] = calls.get(callee, 0) + n
            elif line.startswith("totals:"):
                total = int(line.split()[1])
            elif line.startswith("summary:"):
                summary = int(line.split()[1])
    if total is None:
        total = summary
    if total is None:
        raise SystemExit(f"callgrind.py: no totals or summary line in {path}")
    return total, calls, spin


def dump_files(out_dir):
    """The dumps of the run in `out_dir`, in order: (number, path); the final one last."""
    numbered, final = [], []
    for name in os.listdir(out_dir):
        m = re.match(r"cg\.out\.(\d+)(?:\.(\d+))?(?:-\d+)?$", name)
        if not m:
            continue
        path = os.path.join(out_dir, name)
        if m.group(2) is None:
            final.append((10**9, path))
        else:
            numbered.append((int(m.group(2)), path))
    numbered.sort()
    return numbered + final


def num(v):
    """As the bench prints figures: whole numbers when large, three decimals when small."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3f}"


def result_line(name, unit, values):
    parts = [f"RESULT opcost/{name}"]
    for e in ENGINES:
        if e in values:
            parts.append(f"{e}={num(values[e])}")
    if all(e in values for e in ENGINES) and values["fjall"] != 0:
        parts.append(f"ratio={values['basalt'] / values['fjall']:.3f}")
    parts.append(f"unit={unit} better=lower")
    print(" ".join(parts))


def main(argv):
    out = None
    passed = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            usage()
            return 0
        if a == "--out":
            if i + 1 >= len(argv):
                print("callgrind.py: --out needs a directory", file=sys.stderr)
                return 2
            out = argv[i + 1]
            i += 2
            continue
        passed.append(a)
        i += 1

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    binary = os.path.join(target, "release", "basalt-bench")
    if not os.path.exists(binary):
        print(f"callgrind.py: {binary} not found: cargo build --release -p basalt-bench",
              file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("callgrind.py: valgrind not found", file=sys.stderr)
        return 2

    if out is not None:
        os.makedirs(out, exist_ok=True)
        if dump_files(out):
            print(f"callgrind.py: {out} already holds cg.out.* files", file=sys.stderr)
            return 2
        work = out
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="basalt-callgrind-")
        work = tmp.name
    try:
        return run(binary, passed, work)
    finally:
        if tmp is not None:
            tmp.cleanup()


def run(binary, passed, work):
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--dump-after={DUMP_PATTERN}",
        f"--callgrind-out-file={os.path.join(work, 'cg.out.%p')}",
        binary,
        "opcost",
    ] + passed
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(binary)))
    print(f"binary : {binary} (built {built})")
    print("running: " + " ".join(cmd), flush=True)
    start = time.monotonic()
    marks = []  # (engine, phase, ops), in order
    stdout_lines = []
    with open(os.path.join(work, "valgrind.txt"), "w+", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        for line in proc.stdout:
            stdout_lines.append(line)
            print(line, end="", flush=True)
            if line.startswith("OPCOST "):
                _, engine, phase, ops = line.split()
                marks.append((engine, phase, int(ops)))
        rc = proc.wait()
        err.seek(0)
        valgrind_out = err.read()
    elapsed = time.monotonic() - start
    with open(os.path.join(work, "stdout.txt"), "w", encoding="utf-8") as f:
        f.writelines(stdout_lines)
    if rc != 0:
        print(valgrind_out[-4000:], file=sys.stderr)
        print(f"callgrind.py: the bench failed (exit {rc})", file=sys.stderr)
        return 1
    collected = re.findall(r"Collected : (\d+)", valgrind_out)
    program_total = int(collected[-1]) if collected else None

    dumps = dump_files(work)
    if len(dumps) < len(marks):
        print(f"callgrind.py: {len(marks)} OPCOST lines but {len(dumps)} dumps: does "
              f"{DUMP_PATTERN} match the marker function?", file=sys.stderr)
        return 1
    parsed = [parse_dump(p) for _, p in dumps]
    all_total = sum(t for t, _, _ in parsed)

    # engine -> phase -> (ops, instructions, rust allocs, libc allocs)
    phases = {}
    print()
    print(f"callgrind run: {elapsed:.0f} s; {len(dumps)} dumps")
    print(f"{'engine':<7} {'phase':<11} {'ops':>9} {'instructions':>15} {'spin':>13} "
          f"{'instr/op':>11} {'mallocs':>11} {'mallocs/op':>10} {'realloc/op':>10} "
          f"{'libc/op':>8}")
    spun = []
    for (engine, phase, ops), (total, calls, spin) in zip(marks, parsed):
        rust = sum(calls.get(n, 0) for n in RUST_ALLOC)
        realloc = calls.get("mi_realloc_aligned", 0)
        libc = sum(calls.get(n, 0) for n in LIBC_ALLOC)
        work = total - spin
        phases.setdefault(engine, {})[phase] = (ops, work, rust, libc)
        if spin > total // 100:
            spun.append(f"{engine} {phase}")

        def per(v, ops=ops):
            return f"{v / ops:.3f}" if ops else "-"

        print(f"{engine:<7} {phase:<11} {ops:>9} {total:>15} {spin:>13} "
              f"{(num(work / ops) if ops else '-'):>11} {rust:>11} {per(rust):>10} "
              f"{per(realloc):>10} {per(libc):>8}")
    rest = sum(t for t, _, _ in parsed[len(marks):])
    print(f"{'(exit)':<7} {'':<11} {'':>9} {rest:>15}")
    print("spin: instructions of fjall's idle worker loop (worker_tick re-queueing a "
          "compaction request), left out of instr/op")
    if spun:
        print("note: fjall's worker loop spun in " + ", ".join(spun)
              + " (over 1% of the phase; left out)")
    print(f"dumps add up to {all_total} instructions", end="")
    if program_total:
        print(f"; callgrind collected {program_total} "
              f"({100.0 * all_total / program_total:.2f}%)")
    else:
        print()
    print()

    def per_op(engine, phase, field):
        ops, total, rust, _ = phases[engine][phase]
        v = {"instr": total, "mallocs": rust}[field]
        return v / ops if ops else None

    engines = [e for e in ENGINES if e in phases]
    print(f"{'per operation':<22}" + "".join(f"{e:>14}" for e in engines)
          + ("   basalt/fjall" if len(engines) == 2 else ""))
    rows = []
    for phase in MEASURED:
        for field, unit, name in (("instr", "instructions", phase),
                                  ("mallocs", "mallocs", phase + "_mallocs")):
            values = {}
            for e in engines:
                if phase in phases[e] and phases[e][phase][0] > 0:
                    values[e] = per_op(e, phase, field)
            if values:
                rows.append((name, unit, values))
    miss = {}
    for e in engines:
        p = phases[e]
        if all(k in p and p[k][0] > 0 for k in ("get_cached", "get_missed")):
            miss[e] = per_op(e, "get_missed", "instr") - per_op(e, "get_cached", "instr")
    if miss:
        rows.append(("miss_cost", "instructions", miss))
    for name, unit, values in rows:
        line = f"{name:<22}" + "".join(
            f"{(num(values[e]) if e in values else '-'):>14}" for e in engines)
        if len(values) == 2 and values["fjall"]:
            line += f"   {values['basalt'] / values['fjall']:>12.3f}"
        print(line)
    print()
    for name, unit, values in rows:
        result_line(name, unit, values)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
