"""Helpers of tests/test_fuzz.py, one module per job.

* :mod:`.strategies` -- what is generated (arrays, layouts, bad parameters, markers);
* :mod:`.outcomes` -- what every call must satisfy, and how an outcome is judged;
* :mod:`.ops` -- one module per operator of the table, named by its Python name: its
  functional-API property, its categories and its reference result (pyaclnn.kernels on host
  arrays); a new operator's fuzz is one new module there;
* :mod:`.references` -- what those references share (kernel sizes, modes, layouts);
* :mod:`.properties` -- the registry of all properties, built from the table;
* :mod:`.lowlevel_property` -- the low-level (acl / aclnn) property and its handles;
* :mod:`.harness` -- running a property under Hypothesis in a child process, coverage accounting.

tests/ is on sys.path when pytest runs from the repository root (as for
``lowlevel`` and ``emulator_build``), so test modules import ``fuzz.<module>``.
"""
