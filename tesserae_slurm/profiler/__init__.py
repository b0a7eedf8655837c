"""The profiler behind `tesserae profile`: the model zoo trained alone and in pairs (docs/profiling.md).

Needs the ``torch`` extra at run time; importing the package does not import torch.
"""
