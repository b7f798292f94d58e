"""Linear algebra references (the matmul family, convolution). None yet: the CPU fallback adds them."""
