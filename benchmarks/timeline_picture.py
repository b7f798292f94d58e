"""A picture of one pipeline's timeline: eager calls, then the same chain captured and replayed.

Runs a chain of ``--calls`` dependent ``grid_sampler3d`` calls (each call's output is the
next call's input; outputs made once, ``out=``) on one stream under
:func:`pyaclnn.profile`, first eager (one host launch per call), then captured once with
:func:`pyaclnn.graph` and replayed (one host call for the whole chain), over the host
emulator of CANN (``--backend npu``, the default) or the numpy backend, with simulated
kernel time ``--kernel-us``. The trace is rendered by hand to an SVG: one row per host
thread and per device stream, a rectangle per slice (replays enclose their kernels), a
time axis in milliseconds. No plotting library is needed.

Usage: python benchmarks/timeline_picture.py [--backend npu|numpy] [--calls N] [--kernel-us K]
                                              [--out PATH] [--trace-dir DIR]
Writes ``--out`` (default docs/images/timeline.svg) and prints its rows and slice count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from bench_overhead import progress, use_emulator  # noqa: E402

SHAPE = (1, 2, 8, 8, 8)
ROW_HEIGHT = 26
LABEL_WIDTH = 300  # the row names' column, at least
CHAR_WIDTH = 6.5  # of the 11 px sans-serif font, about: widens the column for long row names
PLOT_WIDTH = 1100
TOP = 52  # room for the title and the legend
AXIS = 30  # room for the time axis below the rows
COLOURS = {
    "host": "#4e79a7",
    "captured": "#9aa9bd",  # launches recorded into a graph, not run
    "kernel": "#f28e2b",
    "memcpy": "#59a14f",
    "memset": "#76b7b2",
    "event_record": "#e15759",
    "event_wait": "#b07aa1",
    "replay": "#f1ce63",
}


def record(backend: str, calls: int, kernel_us: int, trace_dir: str) -> str:
    """Run the pipeline under pyaclnn.profile into ``trace_dir``; the trace's path."""
    import pyaclnn

    os.environ["PYACLNN_EMU_KERNEL_US"] = str(kernel_us)  # a capture records the kernel time too
    with pyaclnn.Stream(backend=backend) as stream:
        chain = _common.SamplerChain(backend, stream, SHAPE, calls)
        queue = chain.queue
        queue()  # warm-up, not recorded: plans cached as in a steady loop
        stream.synchronize()
        with pyaclnn.Graph(backend=backend) as g, pyaclnn.profile(trace_dir, backend=backend) as p:
            queue()  # eager
            stream.synchronize()
            with pyaclnn.graph(g, stream=stream):
                queue()
            g.replay(stream)
            stream.synchronize()
        chain.close()
    pyaclnn.finalize(backend)
    return p.trace_path


def _rows(trace: dict[str, Any]) -> list[tuple[tuple[int, int], str]]:
    """((pid, tid), row name) of every row with slices: host threads first, then streams."""
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    process = {
        e["pid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    used = sorted({(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X"})
    return [(key, f"{process.get(key[0], key[0])}: {names.get(key, key[1])}") for key in used]


def _depths(slices: Sequence[dict[str, Any]]) -> list[int]:
    """How many earlier slices of the row enclose each one (a replay's kernels: 1)."""
    depths, open_ends = [], []
    for s in slices:
        end = s["ts"] + s["dur"]
        open_ends = [e for e in open_ends if e >= end and e > s["ts"]]
        depths.append(len(open_ends))
        open_ends.append(end)
    return depths


def _tick(span_us: float) -> float:
    """A round tick step (1, 2 or 5 x 10^k µs) giving about 8 ticks over ``span_us``."""
    raw = max(span_us / 8, 1e-3)
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def render(trace: dict[str, Any], title: str) -> tuple[str, int, list[str]]:
    """The SVG of ``trace``; with its number of slice rectangles and its row names."""
    rows = _rows(trace)
    slices = sorted((e for e in trace["traceEvents"] if e["ph"] == "X"), key=lambda e: (e["ts"], -e["dur"]))
    start = min((e["ts"] for e in slices), default=0.0)
    end = max((e["ts"] + e["dur"] for e in slices), default=1.0)
    span = max(end - start, 1e-3)
    scale = PLOT_WIDTH / span
    height = TOP + ROW_HEIGHT * len(rows) + AXIS
    label_width = max([LABEL_WIDTH] + [round(16 + CHAR_WIDTH * len(name)) for _, name in rows])
    width = label_width + PLOT_WIDTH + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    x = 10
    for kind, colour in COLOURS.items():  # the legend, under the title
        out.append(
            f'<rect x="{x}" y="30" width="10" height="10" fill="{colour}" stroke="#333" stroke-width="0.3"/>'
        )
        out.append(f'<text x="{x + 14}" y="39">{escape(kind.replace("_", " "))}</text>')
        x += 90
    row_of = {key: i for i, (key, _) in enumerate(rows)}
    for i, (_, name) in enumerate(rows):
        y = TOP + i * ROW_HEIGHT
        fill = "#f4f4f4" if i % 2 == 0 else "#ffffff"
        out.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW_HEIGHT}" fill="{fill}"/>')
        out.append(f'<text class="row" x="8" y="{y + ROW_HEIGHT / 2 + 4:.1f}">{escape(name)}</text>')
    by_row: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in slices:
        by_row.setdefault((e["pid"], e["tid"]), []).append(e)
    count = 0
    for key, row_slices in by_row.items():
        top = TOP + row_of[key] * ROW_HEIGHT
        for s, depth in zip(row_slices, _depths(row_slices)):
            inset = 3 + 5 * depth
            x = label_width + (s["ts"] - start) * scale
            w = max(s["dur"] * scale, 1.0)
            h = max(ROW_HEIGHT - 2 * inset, 4)
            kind = "captured" if s["args"].get("captured") else s.get("cat", "host")
            fill = COLOURS.get(kind, "#bab0ac")
            where = f"{s['ts'] - start:.1f} µs, {s['dur']:.1f} µs"
            out.append(
                f'<rect class="slice" x="{x:.2f}" y="{top + inset}" width="{w:.2f}" height="{h}" '
                f'fill="{fill}" stroke="#333" stroke-width="0.3"><title>{escape(s["name"])} '
                f"({escape(kind)}, {where})</title></rect>"
            )
            count += 1
            label = s["name"] + (" (captured)" if kind == "captured" else "")
            if w > 6.5 * len(label):  # a label only where it fits
                out.append(
                    f'<text x="{x + 3:.2f}" y="{top + inset + h / 2 + 4:.1f}" font-size="10">'
                    f"{escape(label)}</text>"
                )
    axis_y = TOP + ROW_HEIGHT * len(rows) + 4
    right = label_width + PLOT_WIDTH
    out.append(f'<line x1="{label_width}" y1="{axis_y}" x2="{right}" y2="{axis_y}" stroke="#333"/>')
    step = _tick(span)
    t = 0.0
    while t <= span + 1e-9:
        x = label_width + t * scale
        out.append(f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 5}" stroke="#333"/>')
        out.append(f'<text x="{x:.2f}" y="{axis_y + 17}" text-anchor="middle">{t / 1000:g} ms</text>')
        t += step
    out.append("</svg>")
    return "\n".join(out) + "\n", count, [name for _, name in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("npu", "numpy"), default="npu", help="npu: over the emulator")
    parser.add_argument("--calls", type=int, default=6, help="calls in the chain (default 6)")
    parser.add_argument("--kernel-us", type=int, default=100, help="simulated kernel time (default 100)")
    parser.add_argument(
        "--out", default=os.path.join(_common.REPO, "docs", "images", "timeline.svg"), help="the SVG to write"
    )
    parser.add_argument("--trace-dir", help="where pyaclnn.profile writes (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.backend == "npu":
        use_emulator()
    progress(f"recording the pipeline, {args.backend}")
    with tempfile.TemporaryDirectory() as scratch:
        trace_path = record(args.backend, args.calls, args.kernel_us, args.trace_dir or scratch)
        with open(trace_path, encoding="utf-8") as f:
            trace = json.load(f)
    title = (
        f"pyaclnn.profile: {args.calls} dependent grid_sampler3d calls eager, then captured and replayed "
        f"({args.backend} backend{' over the CANN emulator' if args.backend == 'npu' else ''}, "
        f"kernel {args.kernel_us} µs)"
    )
    svg, count, rows = render(trace, title)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(svg)
    print(f"wrote {args.out}: {len(rows)} rows, {count} slices")
    for name in rows:
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
