"""benchmarks/timeline_picture.py still draws its picture: a quick run to a temporary path."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from test_benchmarks import _run

SVG = "{http://www.w3.org/2000/svg}"
CALLS = 3


def test_the_timeline_picture_has_a_host_row_a_stream_row_and_every_slice(tmp_path, emulator_home):
    out = tmp_path / "timeline.svg"
    proc = _run(
        "timeline_picture.py", "--calls", str(CALLS), "--kernel-us", "100", "--out", str(out),
        emulator_home=emulator_home,
    )  # fmt: skip
    assert f"wrote {out}: 2 rows" in proc.stdout, proc.stdout
    root = ET.parse(out).getroot()  # well-formed SVG
    rows = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "row"]
    assert len(rows) == 2 and rows[0] == "host: MainThread", rows
    assert re.fullmatch(r"device 0: stream 0x[0-9a-f]+ \(pyaclnn stream #\d+\)", rows[1]), rows
    slices = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "slice"]
    titles = [r.find(f"{SVG}title").text or "" for r in slices]  # type: ignore[union-attr]
    # host: CALLS eager launches, CALLS captured ones, a replay, two waits; device: CALLS kernels
    # eager, a replay slice with CALLS kernels inside, the replay's closing event record
    assert len(slices) >= 2 * CALLS + 3 + 2 * CALLS + 2, titles
    assert sum(t.startswith("grid_sampler3d (kernel,") for t in titles) == 2 * CALLS
    assert sum(t.startswith("grid_sampler3d (captured,") for t in titles) == CALLS
    assert sum(t.startswith("Graph.replay (host,") for t in titles) == 1
    assert sum(t.startswith("aclmdlRIExecuteAsync (replay,") for t in titles) == 1
    assert any(t.text and t.text.endswith(" ms") for t in root.iter(f"{SVG}text"))  # the time axis
