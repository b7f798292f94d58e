"""Reduction references (sums, means, cumulative sums). None yet: the CPU fallback adds them."""
