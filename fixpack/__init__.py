"""fixpack: a patch-series fix pack manager for vLLM / vllm-gaudi images.

The engine (this package) imports neither click nor rich; :mod:`fixpack.cli` is the terminal front.
Start at :mod:`fixpack.engine` (apply, status, revert, lock) and :mod:`fixpack.loader` (the pack).
"""

__version__ = "0.1.0"
