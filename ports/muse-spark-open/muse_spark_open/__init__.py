"""Muse Spark Open for vLLM 0.30.0: the plugin package of ports/muse-spark-open (see its README)."""

__version__ = "0.2.0"
