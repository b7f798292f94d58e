"""Helpers of tests/test_fuzz.py, one module per job.

* :mod:`.strategies` -- what is generated (arrays, layouts, bad parameters, markers);
* :mod:`.outcomes` -- what every call must satisfy, and how an outcome is judged;
* :mod:`.references` -- the independent reference results (pyaclnn.kernels on host arrays);
* :mod:`.properties` -- the functional-API properties and the registry of all of them;
* :mod:`.lowlevel_property` -- the low-level (acl / aclnn) property and its handles;
* :mod:`.harness` -- running a property under Hypothesis in a child process, coverage accounting.

tests/ is on sys.path when pytest runs from the repository root (as for
``lowlevel`` and ``emulator_build``), so test modules import ``fuzz.<module>``.
"""
