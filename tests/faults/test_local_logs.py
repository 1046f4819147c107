"""Fault cases of the local schedulers' logs, counted: host memory, bytes, temp directories.

Issue 12's adversarial run: a replica writing ``\\r`` progress without a newline raised
the host's memory with the output; temporary log directories were left behind. Each
case runs a real host process where what is counted (peak RSS, files) is its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

#: A replica printing ``\\r`` progress records, never a newline: ``RECORDS`` x 100 B.
PROGRESS_WRITER = textwrap.dedent(
    """
    import sys
    out = sys.stdout.buffer
    for batch in range(int(sys.argv[1]) // 1000):
        out.write(b"".join(b"\\r%10d%%|" % (batch * 1000 + k) + b"#" * 88 for k in range(1000)))
    """
)

#: The host: runs the writer, reads its output back through log_iter (stdout and
#: combined), and reports the growth of its peak RSS and digests of what came back.
HOST = textwrap.dedent(
    """
    import hashlib, json, resource, sys
    import anyio
    from asynctorchx.schedulers.api import Stream
    from asynctorchx.schedulers.local import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    writer, records = sys.argv[1], int(sys.argv[2])

    def app(n):
        return AppDef("p", [Role("r", "x", entrypoint=sys.executable, args=["-c", writer, str(n)])])

    async def digest(scheduler, app_id, stream):
        sha, longest, pieces = hashlib.sha256(), 0, 0
        async for line in scheduler.log_iter(app_id, "r", streams=stream):
            data = line.encode()
            longest = max(longest, len(data))
            pieces += 1
            view = memoryview(data)  # combined ends each piece with a newline of its own
            sha.update(view[:-1] if data.endswith(b"\\n") else view)
        return {"sha": sha.hexdigest(), "longest": longest, "pieces": pieces}

    async def main():
        async with create_cwd_scheduler("rss") as scheduler:
            warm = await scheduler.submit(app(1000), {})  # every code path loaded
            await scheduler.wait(warm)
            await digest(scheduler, warm, Stream.COMBINED)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            app_id = await scheduler.submit(app(records), {})
            await scheduler.wait(app_id)
            out = await digest(scheduler, app_id, Stream.STDOUT)
            combined = await digest(scheduler, app_id, Stream.COMBINED)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        expected = hashlib.sha256()
        for batch in range(records // 1000):
            expected.update(
                b"".join(b"\\r%10d%%|" % (batch * 1000 + k) + b"#" * 88 for k in range(1000))
            )
        print(json.dumps({
            "growth_kib": after - before, "expected": expected.hexdigest(),
            "stdout": out, "combined": combined,
        }))

    anyio.run(main)
    """
)


def test_50_mb_of_progress_without_newline_keeps_the_host_small_and_every_byte() -> None:
    records = 500_000  # 50 MB
    result = subprocess.run(
        [sys.executable, "-c", HOST, PROGRESS_WRITER, str(records)],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["stdout"]["sha"] == report["expected"]  # every byte, in order
    assert report["combined"]["sha"] == report["expected"]
    assert report["stdout"]["longest"] <= 4 << 20  # read in pieces of at most 4 MiB
    assert report["combined"]["longest"] <= 4 << 20
    assert report["combined"]["pieces"] >= 50_000_000 // (4 << 20)
    # the output held in memory is bounded by the 4 MiB line limit, not by its 50 MB
    assert report["growth_kib"] < 48 * 1024, report["growth_kib"]
