"""A warehouse's password: kept where the operator keeps secrets, never in the service database (issue 31, point 7).

A ``sql`` attach source (:mod:`service.data.attach.sources`) stores its URL *without* a password, and a
:class:`CredentialReference` saying where the password is: an environment variable of the server processes
(``--password-env VAR``, stored as ``env:VAR``) or a file the operator names (``--password-file PATH``, stored as
``file:/real/path``). The secret is read each time a connection is opened (:meth:`CredentialReference.secret`) and
put into the URL handed to the driver (:func:`with_password`), which is never stored, logged nor shown. So a backup
of the service database holds no password, and a rotation is a new secret where the reference points (a file is
read again at the next connection; an environment variable needs the processes restarted) or a new reference
(``marginalia source update``), without touching a dataset or its budget.

A URL that carries a password (``user:secret@host``, or ``?password=``) is refused wherever one would be stored
(:func:`refuse_password`); URLs without one still work for databases that authenticate otherwise (a SQLite file,
``~/.pgpass``, peer or certificate authentication).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from db.engine import has_password, transaction, with_password
from db.models import AttachSource
from service.errors import InvalidInput, ServiceError

ENV, FILE = "env", "file"
#: An environment variable's name as POSIX shells accept it.
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
#: A secrets file longer than this is not a password file (a key pair, a folder's listing, a mistake).
MAX_SECRET_BYTES = 4096


class CredentialsUnavailable(ServiceError):
    """The password a source's reference names cannot be read by this process: a setting of the server, not a
    fault of the request (503; the message names the source and the variable, never a file path or a secret)."""

    status = 503
    code = "credentials_unavailable"


@dataclass(frozen=True)
class CredentialReference:
    """Where a source's password is: ``kind`` :data:`ENV` (``name`` a variable) or :data:`FILE` (``name`` the real
    path of a file)."""

    kind: str
    name: str

    @classmethod
    def from_options(cls, password_env: str | None, password_file: Path | str | None) -> CredentialReference | None:
        """The reference ``--password-env VAR`` or ``--password-file PATH`` names (None for neither); the file must
        exist and be a file now, and is kept as its real path."""
        if password_env is not None and password_file is not None:
            raise InvalidInput("give at most one of --password-env VAR and --password-file PATH",
                               code="invalid_parameter")
        if password_env is not None:
            if not _VARIABLE.match(password_env):
                raise InvalidInput(f"--password-env {password_env!r}: not an environment variable's name (letters, "
                                   "digits and '_', not starting with a digit)", code="invalid_parameter")
            return cls(ENV, password_env)
        if password_file is not None:
            real = Path(os.path.realpath(Path(password_file).expanduser()))
            if not real.is_file():
                raise InvalidInput(f"--password-file {password_file}: no such file", code="missing_file")
            return cls(FILE, str(real))
        return None

    @classmethod
    def parse(cls, stored: str) -> CredentialReference:
        """The reference stored as ``env:VAR`` or ``file:/path`` (:meth:`stored`)."""
        kind, _, name = stored.partition(":")
        if kind not in (ENV, FILE) or not name:
            raise ValueError(f"not a credential reference: {stored[:20]!r}")
        return cls(kind, name)

    def stored(self) -> str:
        """What the service database keeps: the reference, never the secret."""
        return f"{self.kind}:{self.name}"

    def describe(self) -> str:
        """The reference for the operator (``source list``)."""
        return f"environment variable {self.name}" if self.kind == ENV else f"file {self.name}"

    def secret(self, source: str) -> str:
        """The password, read now (a file's one trailing line break dropped); :class:`CredentialsUnavailable`,
        naming ``source``, when this process cannot read it."""
        if self.kind == ENV:
            value = os.environ.get(self.name)
            if not value:
                raise CredentialsUnavailable(
                    f"source {source!r}: its password comes from the environment variable {self.name}, which is not "
                    "set (or empty) in this process; set it for every server process (and for the shell running "
                    "marginalia commands), or point the source elsewhere with `marginalia source update`")
            return value
        try:
            with open(self.name, "rb") as handle:
                raw = handle.read(MAX_SECRET_BYTES + 1)
        except OSError:
            raise CredentialsUnavailable(
                f"source {source!r}: its password file cannot be read by this process (missing, or no permission); "
                "the operator checks `marginalia source list`") from None
        try:
            text = raw.decode("utf-8") if len(raw) <= MAX_SECRET_BYTES else ""
        except UnicodeDecodeError:
            text = ""
        text = text.removesuffix("\n").removesuffix("\r")
        if not text or "\n" in text or "\r" in text:
            raise CredentialsUnavailable(
                f"source {source!r}: its password file does not hold one password (one line of UTF-8 text, at most "
                f"{MAX_SECRET_BYTES} bytes); the operator checks `marginalia source list`")
        return text


def refuse_password(url: str, option: str) -> None:
    """422 when ``url`` (given as ``option``) carries a password: the service would have to store it."""
    if has_password(url):
        raise InvalidInput(
            f"{option}: the URL holds a password, which the service database would then keep in cleartext (and every "
            "backup of it); give the URL without the password and name where the password is: `marginalia source add "
            "NAME --sql URL --password-env VAR` (or --password-file PATH), then attach through that source",
            code="password_in_url")


@dataclass(frozen=True)
class SourceConnection:
    """What connecting through a ``sql`` source needs: its name (for messages), its URL without a password, and where
    the password is (None: the database authenticates otherwise). ``needs_credentials``: migration 0016 took the
    password out and the operator has not yet said where it is."""

    name: str
    url: str
    reference: CredentialReference | None = None
    needs_credentials: bool = False

    def connect_url(self) -> str:
        """The URL for the driver, the password read now (:func:`~db.engine.with_password`): never store, log nor
        show it."""
        if self.reference is None and self.needs_credentials:
            raise CredentialsUnavailable(
                f"source {self.name!r}: its password was taken out of the service database (migration 0016) and the "
                f"operator has not yet said where it is: `marginalia source update {self.name} --password-env VAR` "
                "(or --password-file PATH)")
        return with_password(self.url, None if self.reference is None else self.reference.secret(self.name))


def source_connection(service: Engine, source_id: int) -> SourceConnection:
    """The connection of the source with id ``source_id`` (a SQL dataset's location names it), removed or not."""
    with transaction(service) as session:
        row = session.get(AttachSource, source_id)
        if row is None or row.url is None:
            raise CredentialsUnavailable(f"the source (id {source_id}) this dataset was attached through is missing "
                                         "from the service database; the operator restores it")
        reference = None if row.credentials is None else CredentialReference.parse(row.credentials)
        return SourceConnection(row.name, row.url, reference, bool(row.needs_credentials))
