"""tidegate: gradient collectives for data-parallel training.

``import tidegate.torch`` registers the torch.distributed backend ``"tidegate"``; the C and C++
API (libtidegate) is documented in the repository's README.
"""

__version__ = "0.1.0"
