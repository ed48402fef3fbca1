"""The Python client of the Marginalia HTTP API, for analysts' notebooks, stewards' scripts and
auditors. It speaks HTTP only (httpx) and imports neither FastAPI, SQLAlchemy nor JAX::

    from service.client import Client

    with Client("http://127.0.0.1:8000", api_key) as mg:
        mg.datasets()                                    # names and domains
        mg.budget("adult")                               # what is spent and what can still be spent
        release = mg.release_marginals("adult", "gaussian", "all-2way", epsilon=1.0, delta=1e-6)  # stewards
        release["budget"]                                # its cost in the budget's own epsilon
        mg.marginal(release["release_id"], ["age", "income>50K"])   # a DataFrame, free
        mg.synthetic(release["release_id"], rows=1000)              # a DataFrame, free
        mg.ledger("adult")                               # auditors and stewards

Every error the server reports is raised as :class:`MarginaliaError` carrying its ``code``,
``message`` and HTTP ``status``. Charging calls send an ``Idempotency-Key`` and retry connection
failures with the same key, so a retry never charges twice. No call takes a seed: the server draws
every random value from its cryptographically secure source (whoever chose a release's seed could
subtract its noise).

Analysts fit regressions with :meth:`Client.fit_linear` / :meth:`Client.fit_logistic`; the answer is
a :class:`service.fitted.FittedRegression` with ``coef_``, ``predict`` and ``predict_proba``, plus
``release_id`` (the release that answered) and ``cost`` (zero when a stored release could answer).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import pandas as pd

from service.fitted import FittedRegression

Workload = str | Sequence[Sequence[str]] | Sequence[dict[str, object]]


class MarginaliaError(Exception):
    """An error answered by the server (or a transport failure, with status 0)."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.code = code
        self.message = message
        self.status = status


class Client:
    """A connection to one Marginalia server with one API key.

    ``http`` replaces the underlying :class:`httpx.Client` (tests pass FastAPI's ``TestClient``).
    ``retries`` is how often a charging request is re-sent, with the same idempotency key, after
    a connection failure or while the server still runs the first attempt.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = 300.0,
        retries: int = 3,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self._domains: dict[str, dict[str, dict[str, object]]] = {}
        headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        if http is None:
            self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        else:
            self._http = http
            self._http.headers.update(headers)

    # plumbing ---------------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, json: object = None, params: dict[str, object] | None = None,
                 headers: dict[str, str] | None = None) -> Any:
        try:
            response = self._http.request(method, path, json=json, params=params, headers=headers)
        except httpx.TransportError as exc:
            raise MarginaliaError("connection_error", f"{method} {self.url}{path}: {exc}", 0) from exc
        if response.status_code >= 400:
            raise _error_of(response)
        return response.json()

    def _charging(self, path: str, body: dict[str, object], idempotency_key: str | None) -> Any:
        """POST a request that may spend budget: one idempotency key for every attempt."""
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        for attempt in range(self.retries + 1):
            try:
                return self._request("POST", path, json=body, headers=headers)
            except MarginaliaError as exc:
                retriable = exc.status == 0 or exc.code == "idempotency_in_progress"
                if not retriable or attempt == self.retries:
                    raise
                time.sleep(min(0.5 * 2**attempt, 10.0))
        raise AssertionError("unreachable")  # pragma: no cover

    # service ----------------------------------------------------------------------------------
    def health(self) -> dict[str, str]:
        return self._request("GET", "/health")

    # datasets ---------------------------------------------------------------------------------
    def datasets(self) -> list[dict[str, object]]:
        """Every dataset this key may see: ``name``, ``domain`` (and ``rows`` for stewards)."""
        return self._request("GET", "/datasets")

    def domain(self, name: str) -> dict[str, dict[str, object]]:
        """``{column: {"size": k, "kind": "categorical" | "ordinal"}}`` in table order (a dataset's
        domain never changes, so it is asked once per client)."""
        if name not in self._domains:
            self._domains[name] = self._request("GET", f"/datasets/{_segment(name)}")["domain"]
        return self._domains[name]

    def load_dataset(
        self,
        name: str,
        csv: str,
        *,
        domain: dict[str, object] | None = None,
        categorical: Sequence[str] = (),
        bins: dict[str, object] | None = None,
    ) -> dict[str, object]:
        """Stewards: load a table from CSV text, coded 0..size-1 with ``domain`` or raw with a
        public binning spec ``bins``. The data goes in; no route ever sends rows back."""
        body: dict[str, object] = {"name": name, "csv": csv}
        if domain is not None:
            body["domain"] = domain
            body["categorical"] = list(categorical)
        if bins is not None:
            body["bins"] = bins
        return self._request("POST", "/datasets", json=body)

    # budgets ----------------------------------------------------------------------------------
    def budget(self, name: str) -> dict[str, float]:
        """Totals, what is spent (the composed ``epsilon_spent``; delta; rho) and what can still be spent:
        ``epsilon_spendable`` and ``delta_spendable`` for one (epsilon, delta) release, ``rho_spendable`` for
        one zCDP release (docs/privacy.md 6.3)."""
        return self._request("GET", f"/datasets/{_segment(name)}/budget")

    def set_budget(self, name: str, epsilon: float, delta: float = 0.0,
                   delta_reserve: float | None = None) -> dict[str, float]:
        """Stewards: set the dataset's total budget (epsilon, delta); ``delta_reserve`` is the part of
        delta kept for (epsilon, delta) charges made after zCDP charges have started (default: a tenth
        of delta; 0 gives it all to zCDP releases)."""
        body: dict[str, object] = {"epsilon": epsilon, "delta": delta}
        if delta_reserve is not None:
            body["delta_reserve"] = delta_reserve
        return self._request("PUT", f"/datasets/{_segment(name)}/budget", json=body)

    # releases ---------------------------------------------------------------------------------
    def release_marginals(
        self,
        name: str,
        mechanism: str,
        workload: Workload = "all-2way",
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        *,
        options: dict[str, object] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, object]:
        """Stewards: release a marginal workload; spends budget. Returns ``release_id``, ``cost`` and
        ``budget`` (the budget's composed epsilon spent before and after, with a note when that is not
        just the release's epsilon).

        ``workload`` is ``"all-2way"``-style, ``"target:COL"``, or a list of attribute lists (or
        ``{"attributes": [...], "weight": w}``). A 409 ``budget_exceeded`` error says what can still be spent."""
        body: dict[str, object] = {"mechanism": mechanism, "workload": _workload(workload)}
        for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho)):
            if value is not None:
                body[key] = value
        if options:
            body["options"] = dict(options)
        return self._charging(f"/datasets/{_segment(name)}/releases/marginals", body, idempotency_key)

    def fit_linear(self, name: str, target: str, features: Sequence[str] | None = None, method: str = "dd-ssp",
                   epsilon: float | None = None, delta: float | None = None, release: int | None = None,
                   **options: Any) -> FittedRegression:
        """A private linear regression of ``target`` (methods dd-ssp, adassp, aim-synth). Free when a
        stored release can answer; otherwise a new release is made with ``epsilon``/``delta`` and charged.
        ``options``: ``intercept`` (default True), ``idempotency_key``."""
        return self._fit("linear", name, target, features, method, epsilon, delta, release, options)

    def fit_logistic(self, name: str, target: str, features: Sequence[str] | None = None, method: str = "dd-ssp",
                     epsilon: float | None = None, delta: float | None = None, release: int | None = None,
                     **options: Any) -> FittedRegression:
        """A private logistic regression of a binary ``target`` (dd-ssp, objpert, aim-synth); as
        :meth:`fit_linear`."""
        return self._fit("logistic", name, target, features, method, epsilon, delta, release, options)

    def _fit(self, task: str, name: str, target: str, features: Sequence[str] | None, method: str,
             epsilon: float | None, delta: float | None, release: int | None,
             options: dict[str, Any]) -> FittedRegression:
        unknown = set(options) - {"intercept", "idempotency_key"}
        if unknown:
            raise TypeError(f"unknown option(s) {sorted(unknown)}; allowed: intercept, idempotency_key")
        body: dict[str, object] = {"target": target, "method": method, "intercept": options.get("intercept", True)}
        for key, value in (("features", None if features is None else list(features)), ("epsilon", epsilon),
                           ("delta", delta), ("release", release)):
            if value is not None:
                body[key] = value
        answer = self._charging(f"/datasets/{_segment(name)}/fit/{task}", body, options.get("idempotency_key"))
        return FittedRegression(answer, self.domain(name))

    def releases(self, name: str | None = None) -> list[dict[str, object]]:
        return self._request("GET", "/releases", params=None if name is None else {"dataset": name})

    def release(self, release_id: int) -> dict[str, object]:
        return self._request("GET", f"/releases/{int(release_id)}")

    def marginal(self, release: int, attrs: Sequence[str]) -> pd.DataFrame:
        """A marginal estimated from a release (free): one row per cell, a column per attribute
        (its code) and ``count``."""
        answer = self._request("POST", f"/releases/{int(release)}/marginal", json={"attributes": list(attrs)})
        return marginal_frame(answer["attributes"], answer["shape"], answer["counts"])

    def synthetic(self, release: int, rows: int) -> pd.DataFrame:
        """``rows`` synthetic records drawn from a release (free), one column per attribute, with fresh
        randomness of the server's."""
        answer = self._request("POST", f"/releases/{int(release)}/synthetic", json={"rows": rows})
        return pd.DataFrame({c: answer["data"][c] for c in answer["columns"]}, columns=answer["columns"])

    # ledger -----------------------------------------------------------------------------------
    def ledger(self, name: str) -> pd.DataFrame:
        """Auditors and stewards: the dataset's privacy ledger, oldest entry first."""
        entries = self._request("GET", f"/datasets/{_segment(name)}/ledger")["entries"]
        columns = ["entry_id", "entry", "release_id", "release_status", "mechanism", "epsilon", "delta", "rho",
                   "epsilon_priced", "epsilon_spent_after", "principal", "note", "created_at"]
        return pd.DataFrame(entries, columns=columns)


def marginal_frame(attributes: Sequence[str], shape: Sequence[int], counts: object) -> pd.DataFrame:
    """Long format of a marginal table: every cell (codes in C order) with its count."""
    import numpy as np

    table = np.asarray(counts, dtype=float).reshape(tuple(shape))
    index = np.indices(table.shape).reshape(len(shape), -1)
    frame = pd.DataFrame({a: index[i] for i, a in enumerate(attributes)})
    frame["count"] = table.ravel()
    return frame


def _workload(workload: Workload) -> object:
    if isinstance(workload, str):
        return workload
    return [dict(e) if isinstance(e, dict) else list(e) for e in workload]


def _segment(name: str) -> str:
    """A dataset name as one URL path segment."""
    from urllib.parse import quote

    return quote(name, safe="")


def _error_of(response: httpx.Response) -> MarginaliaError:
    try:
        body = response.json()
        return MarginaliaError(str(body["error"]), str(body["message"]), response.status_code)
    except (ValueError, KeyError, TypeError):
        return MarginaliaError("http_error", response.text[:500] or response.reason_phrase, response.status_code)
