"""Throughput profiles: normalized isolated and packed speeds behind one lookup (docs/profiles.md).

Sources: Tesserae's A100 packing table (``a100``, default), Gavel's K80/P100/V100 table (``gavel``),
a profile CSV in the A100 table's columns, or an inline JSON pair table.
"""

from .build import build_profile
from .classes import PairMatrix
from .csv_format import load_a100_csv, parse_profile_csv, profile_csv_text, write_profile_csv
from .gavel_json import load_gavel_json
from .inline_json import profile_from_json, profile_to_json
from .keys import IsolatedRecord, JobClass, PairOption, PairRecord, ProfileKey
from .loaders import DEFAULT_PROFILE, SHIPPED, load_profile, profile_from_spec
from .table import ThroughputProfile

__all__ = [
    "DEFAULT_PROFILE",
    "SHIPPED",
    "IsolatedRecord",
    "JobClass",
    "PairMatrix",
    "PairOption",
    "PairRecord",
    "ProfileKey",
    "ThroughputProfile",
    "build_profile",
    "load_a100_csv",
    "load_gavel_json",
    "load_profile",
    "parse_profile_csv",
    "profile_csv_text",
    "profile_from_json",
    "profile_from_spec",
    "profile_to_json",
    "write_profile_csv",
]
