"""The math of the four operators in pure NumPy (no ACL types).

``max_pool3d`` and ``grid_sampler3d`` compute; ``checks`` holds the shape
rules and parameter checks of phase 1 with the NPU's status codes. The numpy
backend runs them, the tests compare them with PyTorch, and ``selftest``
compares the NPU with them.
"""
