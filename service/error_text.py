"""What of an exception may be written where people read it: an answer, a job record, a log line, a paragraph of the
command line (docs/privacy.md section 1.3, "What an error may say").

An exception of this project (a :class:`~service.errors.ServiceError`, or any exception class defined in its own
packages) carries a message written to be shown: it names a dataset, a column, a parameter or a line, never a cell
value. Any other exception's message is **withheld** everywhere: a database driver, an engine or a library writes
the value it could not read into its message (DuckDB's ``Could not convert string 'Jane Doe HIV+' to INT64``,
PostgreSQL's ``invalid input syntax for type double precision: "..."``, numpy's ``invalid literal for int()``), and
a log line is read by more people than the table's steward. Of such an exception only its type (module and class)
and the frames of its traceback are shown: enough to find the bug, nothing of the data.

``MARGINALIA_DEBUG=1`` is the operator's own request, on the machine that holds the data, to see everything: the
command line then lets the full traceback reach the terminal, and the server's log line of an internal error
carries the full traceback too (messages included, so possibly cell values). Leave it unset on a server whose log
others read.
"""

from __future__ import annotations

import os
import traceback

from service.errors import ServiceError

#: The project's packages: an exception class defined in one of them carries a message written to be shown.
OWN_PACKAGES = ("service", "workloads", "estimators")
#: Environment variable: set to anything but ``0`` or empty, full tracebacks (foreign messages included) are shown.
DEBUG_VARIABLE = "MARGINALIA_DEBUG"


def debugging() -> bool:
    """Whether the operator asked for full tracebacks (``MARGINALIA_DEBUG``, module docstring)."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def is_own(exc: BaseException) -> bool:
    """Whether ``exc``'s message was written by this project to be shown (module docstring)."""
    return isinstance(exc, ServiceError) or type(exc).__module__.split(".")[0] in OWN_PACKAGES


def is_bad_input(exc: BaseException) -> bool:
    """A ValueError subclass of the project's own packages: bad input by convention (the API's 422
    ``invalid_input``, the command line's exit status 2), its message written to be shown."""
    return isinstance(exc, ValueError) and is_own(exc)


def type_name(exc: BaseException) -> str:
    """``exc``'s class as ``module.Class`` (``psycopg.errors.InvalidTextRepresentation``; a builtin without module)."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def shown_message(exc: BaseException) -> str:
    """``exc``'s message when it is our own, else its type with the message withheld."""
    if is_own(exc):
        return str(exc)
    return f"{type_name(exc)} (its message is withheld: it may quote the data)"


def shown_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` as Python prints it (the chain of causes and contexts Python would print, each with
    its frames), but with the message of every exception that is not our own withheld, and only our own exceptions'
    notes."""
    parts: list[str] = []
    seen: set[int] = set()

    def add(error: BaseException) -> None:
        seen.add(id(error))
        cause, context = error.__cause__, None if error.__suppress_context__ else error.__context__
        if cause is not None and id(cause) not in seen:
            add(cause)
            parts.append("\nThe above exception was the direct cause of the following exception:\n\n")
        elif context is not None and id(context) not in seen:
            add(context)
            parts.append("\nDuring handling of the above exception, another exception occurred:\n\n")
        if error.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_list(traceback.extract_tb(error.__traceback__)))
        if is_own(error):
            parts.append(f"{type_name(error)}: {error}\n")
            parts.extend(f"{note}\n" for note in getattr(error, "__notes__", ()))
        else:
            parts.append(f"{shown_message(error)}\n")

    add(exc)
    return "".join(parts)
