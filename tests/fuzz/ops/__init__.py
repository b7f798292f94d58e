"""One module per operator of the table, named by its Python name (``max_pool3d_with_argmax``,
...): the operator's fuzz property and its reference result, side by side.

Each module has

* ``CATEGORIES`` -- the broken things its property draws, one category per run;
* ``prop(backend, category, data, counts)`` -- a valid call with one thing broken, handed to
  :func:`fuzz.outcomes.judge`;
* ``reference(args)`` -- what the call must return, from pyaclnn.kernels called directly on
  host arrays. It restates the functional layer's argument handling (expanding kernel sizes,
  reading modes and layouts) on purpose: an independent oracle for the numpy backend, so it
  must not share that code.

:mod:`fuzz.properties` finds these modules by the table's names
(``operators.per_operator_modules``): an operator without its module here, or a module here
of an operator the table does not have, fails at collection. Modules whose name starts with
``_`` are helpers, not operators.
"""
