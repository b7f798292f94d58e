"""Environment variables the kernels and the numpy backend read at every call.

The readers of :mod:`pyaclnn._env` (the one place every ``PYACLNN_*`` variable is
read and checked), under the names the kernels use. ``value`` is ``os.environ.get`` itself:
the earlier fast path through the private bytes mapping behind ``os.environ``
is gone. Measured (benchmarks/README.md is not where this lives; the figures
are in the commit that made the change): 0.25 us for a set variable and 0.67 us
for an unset one, against about 30 us of host work per numpy-backend launch;
a launch reads at most two (the stream's simulated kernel time, and
``PYACLNN_ACCEL`` where a compiled kernel could take the call), and
``PYACLNN_NUM_THREADS`` only for calls large enough to use threads.
"""

from __future__ import annotations

from .._env import flag, integer, microseconds
from .._env import text as value

__all__ = ["flag", "integer", "microseconds", "value"]
