"""PateGail: privacy-preserving mobility generation.

Layout: ``pategail.sdk`` (folder ``sdk/``) runs on devices and never imports torch; ``pategail.server``
(``server/``) is the coordinator; ``pategail.export`` (``export/``) turns torch models into ONNX bundles;
this package holds the command line and the research tooling (data sets, metrics, baselines).
"""

__version__ = "0.1.0"
