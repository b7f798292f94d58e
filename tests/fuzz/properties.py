"""The registry of the fuzz properties: one per operator of the table (its module in
:mod:`fuzz.ops`, found by the operator's Python name) and the low-level one
(:mod:`.lowlevel_property`).

:data:`PROPERTIES` and :data:`CATEGORIES` list every property by the name the tests use.
"""

from __future__ import annotations

import operators

from . import lowlevel_property
from .lowlevel_property import LOWLEVEL_CATEGORIES, prop_lowlevel
from .strategies import release_streams

# One module per operator of the table (a new operator fails here until it has one), and the low-level API.
_MODULES = operators.per_operator_modules(
    f"{__package__}.ops", "fuzz properties (tests/fuzz/ops/<operator>.py)"
)
PROPERTIES = {**{name: module.prop for name, module in _MODULES.items()}, "lowlevel": prop_lowlevel}
CATEGORIES = {
    **{name: module.CATEGORIES for name, module in _MODULES.items()},
    "lowlevel": LOWLEVEL_CATEGORIES,
}


def release() -> None:
    """Free what the properties keep between examples: low-level handles, other-backend streams."""
    try:
        lowlevel_property.release_state()
    finally:
        release_streams()
