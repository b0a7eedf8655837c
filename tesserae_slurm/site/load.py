"""Where the site's configuration comes from: ``--config PATH``, else ``$TESSERAE_CONFIG``, else
``/etc/tesserae/tesserae.yaml``, else the defaults; YAML read with one-line errors.

``check_policy=False`` (tsbatch, the admin commands, the page) skips ``scheduler.check_scheduler``:
those commands never schedule, and it would load the engine and a profile on every call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..model import InputError
from .config import SiteConfig, parse_config

DEFAULT_PATH = "/etc/tesserae/tesserae.yaml"


def config_from_mapping(raw: Any, where: str = "config", check_policy: bool = True) -> SiteConfig:
    cfg = parse_config(raw, where)
    if check_policy:
        from .scheduler import check_scheduler
        check_scheduler(cfg, where)
    return cfg


def resolve_config(explicit: str | Path | None = None, check_policy: bool = True) -> tuple[SiteConfig, str]:
    """The configuration and where it came from (for messages)."""
    path = explicit or os.environ.get("TESSERAE_CONFIG")
    if path:
        return load_config(path, check_policy), str(path)
    if Path(DEFAULT_PATH).is_file():
        return load_config(DEFAULT_PATH, check_policy), DEFAULT_PATH
    return SiteConfig(), "built-in defaults"


def load_config(path: str | Path, check_policy: bool = True) -> SiteConfig:
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"{p}: cannot read config ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{p}: malformed YAML{at}: {getattr(exc, 'problem', exc)}") from None
    return config_from_mapping(raw, str(p), check_policy)
