"""NumPy references of aclnn operators, which the numpy backend runs through ``pyaclnn.ops``.

One mechanism for every operator: a :class:`Reference` holds the operator's kernel and,
for pyaclnn's own, its C declaration (the text of its CANN 8.1.RC1 header, which the
catalogue reads as it reads CANN's own headers) and its phase-1 check (the rules with
CANN's status codes, :class:`~pyaclnn.kernels.checks.CheckFailed`). Both get the call's
values in header order: a tensor is a :class:`TensorInfo` for the check and a NumPy view
for the kernel (which writes its outputs in place), a tensor list a list of them, a scalar
a NumPy scalar of its type, an ``aclDataType`` a NumPy dtype, arrays tuples, the rest
Python values. Users register theirs through ``pyaclnn.ops.register_reference``.

The references live in modules by family (``elementwise``, ``unary``, ``comparison``, ``linalg``,
``reductions``, ``normalization``, ``movement``), which register theirs when imported below; the rules
they share (torch's type promotion, broadcasting, the status of a NULL tensor) are in
``_rules``.
"""

from __future__ import annotations

from ._registry import Reference, TensorInfo, get, headers, names, register

__all__ = ["Reference", "TensorInfo", "get", "headers", "names", "register"]

# The families register their references when imported.
from . import comparison, elementwise, linalg, movement, normalization, reductions, unary  # noqa: E402, F401
