"""Job traces: loaders (project CSV, Gavel, Shockwave, Philly-derived), the CSV writer, generators.

Every source becomes a ``Trace`` of ``TraceJob`` records; ``models`` (models.py) maps job types onto
the A100 profile or Gavel's table. See docs/traces.md.
"""

from .csv_format import dumps_csv, load_csv, parse_csv, write_csv
from .gavel_format import load_gavel, solo_throughputs
from .generate import GAVEL_GPU_MIX, TESSERAE_GPU_MIX, generate_gavel, generate_tesserae
from .loader import FORMATS, detect_format, load_trace, to_models
from .models import A100, A100_MODELS, GAVEL, GAVEL_JOB_TYPES, map_model, resolve_model
from .philly import load_philly, load_philly_dir
from .record import Trace, TraceJob
from .shipped import SHIPPED, load_shipped, shipped_path, trace_from_arg
from .shockwave_format import load_shockwave
from .summary import TraceSummary, format_summary, summarize

__all__ = [
    "Trace", "TraceJob", "load_trace", "detect_format", "FORMATS", "to_models", "load_csv", "parse_csv",
    "dumps_csv", "write_csv", "load_gavel", "load_shockwave", "load_philly", "load_philly_dir",
    "solo_throughputs", "generate_tesserae", "generate_gavel", "TESSERAE_GPU_MIX", "GAVEL_GPU_MIX",
    "A100", "GAVEL", "A100_MODELS", "GAVEL_JOB_TYPES", "map_model", "resolve_model", "SHIPPED",
    "load_shipped", "shipped_path", "trace_from_arg", "TraceSummary", "summarize", "format_summary",
]
