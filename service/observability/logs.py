"""The server's logs: one configuration for every logger (ours, uvicorn's), timestamped, as text or JSON lines.

Two settings, read from the environment by ``marginalia serve`` (docs/operations.md, "Logs"):

- ``MARGINALIA_LOG_LEVEL``: ``debug``, ``info`` (the default), ``warning``, ``error``; ``--log-level`` overrides it;
- ``MARGINALIA_LOG_FORMAT``: ``text`` (the default: ``2026-12-02T05:40:01.123Z INFO marginalia.ledger charge ...``)
  or ``json`` (one object per line: ``time``, ``level``, ``logger``, ``message`` and the event's own fields).

What is logged, by whom (never a key, a request body, a cell value, a count, or an engine's or driver's message):

- ``marginalia.access``: one line per request (:mod:`service.api.observe`): method, the route's *template*
  (``/datasets/{name}/ledger``, so no name typed into a URL is logged), status, milliseconds and the caller's key
  id and role; never a header, a query string or a body;
- ``marginalia.ledger``: one line per charge and per refund, after its transaction commits
  (:func:`service.accounting.accountant.charge_in_session`, :func:`~service.accounting.accountant.refund`): the entry,
  dataset, mechanism, cost and principal;
- ``marginalia.api``, ``marginalia.runners``, ``marginalia.engines``: errors and recoveries, with their logger named.

:func:`logging_config` is the :func:`logging.config.dictConfig` dictionary; uvicorn applies it in each worker process
too (it is part of the uvicorn settings :func:`service.api.server.uvicorn_config` builds).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

LEVEL_VARIABLE = "MARGINALIA_LOG_LEVEL"
FORMAT_VARIABLE = "MARGINALIA_LOG_FORMAT"
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
#: Where an event's own fields go on a record (``log.info(..., extra={FIELDS: {...}})``).
FIELDS = "marginalia_fields"


def log_level(given: str | None = None) -> str:
    """``given`` (the command's option) or ``MARGINALIA_LOG_LEVEL`` or ``info``, checked."""
    level = (given or os.environ.get(LEVEL_VARIABLE) or "info").lower()
    if level not in LEVELS:
        raise ValueError(f"{LEVEL_VARIABLE} (or the log level asked) must be one of {', '.join(LEVELS)}, got {level!r}")
    return level


def log_format() -> str:
    """``MARGINALIA_LOG_FORMAT`` or ``text``, checked."""
    chosen = (os.environ.get(FORMAT_VARIABLE) or "text").lower()
    if chosen not in FORMATS:
        raise ValueError(f"{FORMAT_VARIABLE} must be one of {', '.join(FORMATS)}, got {chosen!r}")
    return chosen


class UtcFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER MESSAGE`` with an ISO 8601 UTC timestamp to the millisecond, and the event's fields as
    ``key=value`` after the message."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name} {record.getMessage()}"
        fields = getattr(record, FIELDS, None)
        if fields:
            line += " " + " ".join(f"{key}={_text(value)}" for key, value in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {"time": _timestamp(record), "level": record.levelname, "logger": record.name,
                                "message": record.getMessage()}
        body.update(getattr(record, FIELDS, None) or {})
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, ensure_ascii=True)


def _timestamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def _text(value: object) -> str:
    shown = str(value)
    return json.dumps(shown) if (" " in shown or not shown) else shown


def logging_config(level: str | None = None) -> dict[str, Any]:
    """The :func:`logging.config.dictConfig` dictionary of the module docstring: every logger to stderr, one format,
    one level (uvicorn's own access log stays off: :mod:`service.api.observe` writes ours)."""
    formatter = {"()": f"{__name__}.{'JsonFormatter' if log_format() == 'json' else 'UtcFormatter'}"}
    chosen = log_level(level).upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"marginalia": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "marginalia",
                                "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": chosen},
        "loggers": {name: {"handlers": [], "level": chosen, "propagate": True}
                    for name in ("uvicorn", "uvicorn.error", "marginalia")}
        | {"uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False}},
    }


def configure(level: str | None = None) -> None:
    """Apply :func:`logging_config` in this process, Python's warnings included (``py.warnings``: a warning printed
    by a library is a line in the same format, not a bare line on stderr)."""
    import logging.config

    logging.config.dictConfig(logging_config(level))
    logging.captureWarnings(True)


def event(logger: logging.Logger, message: str, **fields: object) -> None:
    """``message`` at INFO on ``logger`` with ``fields`` (shown after it as text, as keys of the JSON line)."""
    logger.info(message, extra={FIELDS: fields})
