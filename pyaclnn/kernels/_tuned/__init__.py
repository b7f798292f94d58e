"""Tuned NumPy paths of the kernels: the reference's results, faster.

:mod:`pyaclnn.kernels.max_pool3d` and :mod:`pyaclnn.kernels.grid_sampler3d`
are the specification; the modules here compute the same (max pooling: the
same bits; grid sampling: the same coordinates, another summation order) with
chunking, caching and worker threads, and take the arguments of a plan of
:mod:`pyaclnn.kernels.checks` without validating them. The numpy backend
chooses between them, the compiled kernels and the reference
(``pyaclnn.backends.numpy._kernels``).
"""
