"""Graph replay in constant host time: the host cost of ``Graph.replay()`` against the graph's size.

Chains of dependent ``grid_sampler3d`` calls on DeviceArrays of one stream
(``_common.SamplerChain``, each call its own output, so a graph holds one array
more per call) are captured once in a :class:`pyaclnn.Graph` of 10, 100 and
1000 calls, on the npu backend over the host emulator of CANN and on the numpy
backend. Timed, with no simulated kernel time (the host's cost only) and a
synchronize after each timed call (untimed), the contenders taking turns in
each round in a random order, best of ``--rounds``:

* eager: queueing the same 100 calls eagerly, over a ring of 8 outputs so that
  every call finds its plan in the stream's executor cache (the cheapest eager
  launch of 100 calls);
* replay N: the host time of ``g.replay()`` of the N-call graph, until it returns.

Targets, on each backend:

* a replay of 100 calls <= 0.05x their eager launches;
* a replay of the 1000-call graph <= 3x a replay of the 10-call graph.

The replayed chain's result must equal the eager chain's bit for bit (exit 1 otherwise).

Usage: python benchmarks/bench_replay.py [--quick] [--rounds R] [--json PATH] [--strict]
Exit status: 0; 1 with --strict when a target is missed; 1 when a replay differs from eager.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from bench_overhead import progress, use_emulator  # noqa: E402

SIZES = (10, 100, 1000)  # calls per graph
EAGER_CALLS = 100
RING = 8  # outputs of the eager chain: 9 plans, well within the executor cache
EAGER_TARGET = 0.05  # replay of EAGER_CALLS calls / their eager launches
GROWTH_TARGET = 3.0  # replay of the largest graph / replay of the smallest
SHAPE = (1, 1, 2, 2, 2)


def measure(backend: str, rounds: int) -> dict[str, Any]:
    """Best host seconds of the eager chain and of each graph's replay on ``backend``, and whether
    the replay of the ``EAGER_CALLS``-call graph gave the eager chain's result bit for bit."""
    import pyaclnn

    os.environ["PYACLNN_EMU_KERNEL_US"] = "0"  # the host's cost only (a capture records it)
    with pyaclnn.Stream(backend=backend) as stream:
        eager = _common.SamplerChain(backend, stream, SHAPE, EAGER_CALLS, ring=RING)
        eager.queue()
        want = eager.last.numpy()
        chains, graphs = {}, {}
        for calls in SIZES:
            chain = chains[calls] = _common.SamplerChain(backend, stream, SHAPE, calls)
            g = graphs[calls] = pyaclnn.Graph(backend=backend)
            with pyaclnn.graph(g, stream=stream):
                chain.queue()
        contenders = {"eager": eager.queue}
        for calls, g in graphs.items():
            contenders[f"replay {calls}"] = lambda g=g: g.replay(stream)
        times = _common.time_interleaved(contenders, rounds, warmup=2, after=stream.synchronize, shuffle=True)
        got = chains[EAGER_CALLS].last.numpy()
        for g in graphs.values():
            g.close()
        for chain in (eager, *chains.values()):
            chain.close()
    return {
        "seconds": {name: min(t) for name, t in times.items()},
        "identical": bool(np.array_equal(want.view(np.uint32), got.view(np.uint32))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument(
        "--rounds", type=int, help="rounds of turns, the best counts (default 200, 20 with --quick)"
    )
    parser.add_argument("--json", metavar="PATH", help="save the results as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args([a for a in (sys.argv[1:] if argv is None else argv) if a != "--"])
    rounds = args.rounds or (20 if args.quick else 200)
    if rounds < 1:
        parser.error("--rounds must be at least 1")

    home = use_emulator()
    info = _common.machine()
    info["emulator_home"] = home
    _common.print_machine(info)
    print(
        f"npu backend over the CANN emulator at {home}; grid_sampler3d chains of shape {list(SHAPE)}, "
        f"no kernel time; best of {rounds} rounds\n"
    )
    results: dict[str, Any] = {}
    rows = []
    for backend in ("npu", "numpy"):
        progress(f"timing replays, {backend}")
        r = results[backend] = measure(backend, rounds)
        s = r["seconds"]
        r["replay_to_eager"] = s[f"replay {EAGER_CALLS}"] / s["eager"]
        r["growth"] = s[f"replay {SIZES[-1]}"] / s[f"replay {SIZES[0]}"]
        rows.append(
            [
                backend,
                f"{s['eager'] * 1e6:.1f}",
                *(f"{s[f'replay {n}'] * 1e6:.1f}" for n in SIZES),
                f"{r['replay_to_eager']:.4f}",
                f"{r['growth']:.2f}",
                "yes" if r["identical"] else "NO",
            ]
        )
    print(f"Replay host time against eager launches and the graph's size (best of {rounds})")
    _common.print_table(
        [
            "backend",
            f"eager {EAGER_CALLS} calls µs",
            *(f"replay {n} µs" for n in SIZES),
            f"replay {EAGER_CALLS}/eager",
            f"replay {SIZES[-1]}/replay {SIZES[0]}",
            "bit-identical",
        ],
        rows,
    )
    met = True
    print()
    for backend, r in results.items():
        eager_met = r["replay_to_eager"] <= EAGER_TARGET
        growth_met = r["growth"] <= GROWTH_TARGET
        r["met"] = eager_met and growth_met
        met = met and r["met"]
        print(
            f"target replay of {EAGER_CALLS} calls <= {EAGER_TARGET}x their eager launches ({backend}): "
            f"{r['replay_to_eager']:.4f}, {_common.verdict(eager_met)}"
        )
        print(
            f"target replay of {SIZES[-1]} calls <= {GROWTH_TARGET:g}x replay of {SIZES[0]} ({backend}): "
            f"{r['growth']:.2f}, {_common.verdict(growth_met)}"
        )
    identical = all(r["identical"] for r in results.values())
    if not identical:
        print("replayed chain differs from the eager chain: FAILED")
    if args.json:
        payload = {"machine": info, "rounds": rounds, "results": results, "target_met": met}
        _common.save_json(args.json, payload)
    import pyaclnn

    pyaclnn.finalize()
    if not identical:
        return 1
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
