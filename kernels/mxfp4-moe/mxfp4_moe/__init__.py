"""MXFP4 (OCP MX, W4A16) MoE expert decode kernels for Muse Spark Open, their reference, and the glue.

Modules: ``format`` (E2M1/E8M0, pack/unpack, dequantize, quantize, the load-time layouts),
``reference`` (the PyTorch latent-MoE reference and stock path), ``kernel`` (Triton; imported lazily, it
needs triton), ``gluon_kernel`` (the default kernels where Triton's Gluon runs on an NVIDIA GPU; imported
lazily), ``glue`` (the ``MUSE_SPARK_MXFP4_KERNELS`` switch), ``variants`` (shape files), ``build``
(compile and cache).
"""

__version__ = "0.13.25"
