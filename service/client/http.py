"""The Python client of the Marginalia HTTP API, for analysts' notebooks, stewards' scripts and
auditors. It speaks HTTP only (httpx) and imports neither FastAPI, SQLAlchemy nor JAX::

    from service.client import Client

    with Client("http://127.0.0.1:8000", api_key) as mg:
        mg.datasets()                                    # names and domains
        mg.budget("adult")                               # what is spent and what can still be spent
        mg.plan_release("adult", "gaussian", "all-2way", epsilon=1.0, delta=1e-6)  # its charge, spending nothing
        release = mg.release_marginals("adult", "gaussian", "all-2way", epsilon=1.0, delta=1e-6)  # stewards
        release["budget"]                                # its cost in the budget's own epsilon
        mg.marginal(release["release_id"], ["age", "income>50K"])   # a DataFrame, free
        mg.synthetic(release["release_id"], rows=1000)              # a DataFrame, free
        mg.ledger("adult")                               # auditors and stewards

Every error the server reports is raised as :class:`MarginaliaError` carrying its ``code``,
``message`` and HTTP ``status``. Charging calls send an ``Idempotency-Key`` and retry connection
failures with the same key, so a retry never charges twice. They also ask the server to work in
the background (``Prefer: respond-async``) and poll the job it answers with, so a release that takes
minutes neither hits a timeout nor looks hung: ``progress=True`` draws its steps and its model fit
on stderr (or pass a function, called with each job report). Attaching and migrating a table, which read
every row, are followed the same way (without a key: they spend nothing, and are not re-sent). No call
takes a seed: the server draws every random value from its cryptographically secure source (whoever
chose a release's seed could subtract its noise).

Answers say what backs them: a marginal whose attributes the release never measured together
comes with ``frame.attrs["coverage"]`` and an :class:`ExtrapolationWarning`; a regression from such a
release is refused unless ``allow_unmeasured=True``. Columns whose table's binning spec or domain labels them come
back with their labels (``[25, 30)``, ``Private``) instead of codes (``labels=False`` for the codes), and every answer
says what it cost (``frame.attrs["cost"]``: nothing, the release paid).

Analysts fit regressions with :meth:`Client.fit_linear` / :meth:`Client.fit_logistic`; the answer is
a :class:`service.client.fitted.FittedRegression` that predicts on the data's own scale (a linear target in its
units, a logistic one as its labels; scikit-learn's ``classes_``, ``feature_names_in_``, ``score``), plus
``release_id`` (the release that answered) and ``cost`` (zero when a stored release could answer).
"""

from __future__ import annotations

import sys
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pandas as pd

from service.client.collections import CollectionsClient
from service.client.errors import MarginaliaError
from service.client.fitted import ExtrapolationWarning, FittedRegression
from service.client.labels import labelled
from service.client.spend import Device

Workload = str | Sequence[Sequence[str]] | Sequence[dict[str, object]]
#: ``True`` (a line on stderr), ``False``, or a function called with every job report (``GET /jobs/{id}``).
ProgressOption = bool | Callable[[dict[str, Any]], None]
FIT_PHASE = "fitting the model"  # service.progress.FIT_PHASE (the client imports nothing of the server)
#: The options of :meth:`Client.fit_linear` that the client itself reads; every other option is a method's setting.
_CLIENT_OPTIONS = ("intercept", "idempotency_key", "allow_unmeasured", "progress")

__all__ = ["Client", "MarginaliaError", "marginal_frame"]


#: How long :meth:`Client.wait` follows a background job by default (seconds): four hours.
DEFAULT_JOB_DEADLINE = 4 * 3600.0


def _still_running(job: dict[str, Any], seconds: float) -> str:
    """What the client last saw of a job it stops following."""
    progress = job.get("progress") or {}
    seen = f"{progress.get('message') or 'no progress yet'} ({progress.get('done', 0)} of {progress.get('total', 0)})"
    return (f"job {job['job_id']} ({job.get('kind')} of {job.get('dataset')!r}) is still running after {seconds:g} s; "
            f"last seen: {seen}. It may still finish: client.wait(client.job({job['job_id']})) follows it again, "
            "or pass a longer deadline (Client(job_deadline=...), wait(..., deadline=...))")


class Client(CollectionsClient):
    """A connection to one Marginalia server with one API key.

    ``http`` replaces the underlying :class:`httpx.Client` (tests pass FastAPI's ``TestClient``).
    ``retries`` is how often a charging request is re-sent, with the same idempotency key, after
    a connection failure or while the server still runs the first attempt. ``progress`` is the
    default of every charging call (see the module docstring); ``poll_seconds`` the longest pause
    between two looks at a background job, and ``job_deadline`` how long the client follows one before giving up
    with ``job_deadline`` (seconds; None: no deadline). ``device`` is a participant's own privacy filter (her
    ceilings and spend file, :class:`service.client.spend.Device`); by default ``Device()`` (its defaults, the spend
    file ``~/.marginalia/device-spend.json``), made when she first submits.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = 300.0,
        retries: int = 3,
        http: httpx.Client | None = None,
        progress: ProgressOption = False,
        poll_seconds: float = 2.0,
        job_deadline: float | None = DEFAULT_JOB_DEADLINE,
        device: Device | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._device = device
        self.retries = retries
        self.progress = progress
        self.poll_seconds = poll_seconds
        self.job_deadline = job_deadline
        self._domains: dict[str, dict[str, Any]] = {}  # name -> GET /datasets/{name} (public, never changes)
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
                 headers: dict[str, str] | None = None, content: bytes | None = None) -> Any:
        try:
            response = self._http.request(method, path, json=json, params=params, headers=headers, content=content)
        except httpx.TransportError as exc:
            raise MarginaliaError("connection_error", f"{method} {self.url}{path}: {exc}", 0) from exc
        if response.status_code >= 400:
            raise _error_of(response)
        return response.json()

    def _charging(self, path: str, body: dict[str, object], idempotency_key: str | None,
                  progress: ProgressOption | None = None) -> Any:
        """POST a request that may spend budget: one idempotency key for every attempt; the server
        runs it in the background and this call follows the job until it is done."""
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4()), "Prefer": "respond-async"}
        for attempt in range(self.retries + 1):
            try:
                answer = self._request("POST", path, json=body, headers=headers)
                break
            except MarginaliaError as exc:
                retriable = exc.status == 0 or exc.code == "idempotency_in_progress"
                if not retriable or attempt == self.retries:
                    raise
                time.sleep(min(0.5 * 2**attempt, 10.0))
        return self._followed(answer, progress)

    def _in_background(self, path: str, body: dict[str, object], progress: ProgressOption | None) -> Any:
        """POST a long request that spends nothing (attach, migrate) in the background and follow its job. Not
        re-sent after a connection failure: without an idempotency key a second attempt could be a second request
        (a retry of an attach that went through is a 409 ``duplicate_dataset``)."""
        return self._followed(self._request("POST", path, json=body, headers={"Prefer": "respond-async"}), progress)

    def _followed(self, answer: Any, progress: ProgressOption | None) -> Any:
        """``answer``, or when it is a job (a 202), the job's answer once it is done."""
        if isinstance(answer, dict) and "job_id" in answer and "state" in answer:
            return self.wait(answer, self.progress if progress is None else progress)
        return answer

    def job(self, job_id: int) -> dict[str, Any]:
        """A background request's state, progress and (once finished) answer."""
        return self._request("GET", f"/jobs/{int(job_id)}")

    def wait(self, job: dict[str, Any], progress: ProgressOption = False, deadline: float | None = None) -> Any:
        """Poll ``job`` until it finishes; return its answer or raise its error as :class:`MarginaliaError`. After
        ``deadline`` seconds (default: the client's ``job_deadline``) it raises ``job_deadline``, saying what it last
        saw of the job (which may still finish: ``client.wait(client.job(id))`` follows it again). A job whose server
        died is answered ``request_interrupted`` by the server that reads it (docs/operations.md)."""
        show = _ProgressLine() if progress is True else progress or None
        limit = self.job_deadline if deadline is None else deadline
        give_up = None if limit is None else time.monotonic() + limit
        delay, failures = 0.1, 0
        while True:
            if show is not None:
                show(job)
            if job["state"] != "running":
                break
            if give_up is not None and time.monotonic() >= give_up:
                raise MarginaliaError("job_deadline", _still_running(job, limit), None)
            time.sleep(delay)
            delay = min(delay * 1.5, self.poll_seconds)
            try:
                job = self.job(job["job_id"])
                failures = 0
            except MarginaliaError as exc:  # a look is safe to repeat; the job goes on meanwhile
                failures += 1
                if exc.status != 0 or failures > self.retries:
                    raise
        result = job["result"]
        if job["state"] == "failed" or (job["status_code"] or 0) >= 400:
            raise MarginaliaError(str(result.get("error", "job_failed")), str(result.get("message", result)),
                                  int(job["status_code"] or 500))
        return result

    # service ----------------------------------------------------------------------------------
    def health(self) -> dict[str, str]:
        return self._request("GET", "/health")

    # datasets ---------------------------------------------------------------------------------
    def datasets(self) -> list[dict[str, object]]:
        """Every dataset this key may see: ``name``, ``engine``, ``domain`` (and ``rows`` for stewards)."""
        return self._request("GET", "/datasets")

    def domain(self, name: str) -> dict[str, dict[str, object]]:
        """``{column: {"size": k, "kind": "categorical" | "ordinal"}}`` in table order (a dataset's
        domain never changes, so it is asked once per client)."""
        return self._described(name)["domain"]

    def labels(self, name: str) -> dict[str, list[str]]:
        """``{column: [the label of each code]}`` for the columns the table's spec or domain labels (public, asked
        once per client, like the domain)."""
        return self._described(name).get("labels") or {}

    def _described(self, name: str) -> dict[str, Any]:
        if name not in self._domains:
            self._domains[name] = self._request("GET", f"/datasets/{_segment(name)}")
        return self._domains[name]

    def load_dataset(
        self,
        name: str,
        csv: str,
        *,
        domain: dict[str, object] | None = None,
        categorical: Sequence[str] = (),
        bins: dict[str, object] | None = None,
        engine: str | None = None,
    ) -> dict[str, object]:
        """Stewards: load a table from CSV text, coded 0..size-1 with ``domain`` or raw with a
        public binning spec ``bins``, kept by ``engine`` (``duckdb``, the server's default, or ``sql``). The data
        goes in; no route ever sends rows back."""
        body: dict[str, object] = {"name": name, "csv": csv}
        if engine is not None:
            body["engine"] = engine
        if domain is not None:
            body["domain"] = domain
            body["categorical"] = list(categorical)
        if bins is not None:
            body["bins"] = bins
        return self._request("POST", "/datasets", json=body)

    def attach_dataset(
        self,
        name: str,
        *,
        source: str,
        bins: dict[str, object],
        parquet: Sequence[str] | None = None,
        table: str | None = None,
        privacy_unit: str | None = None,
        progress: ProgressOption | None = None,
    ) -> dict[str, object]:
        """Stewards: register a table where it lives, without copying it, through ``source`` (a name the operator
        registered with ``marginalia source add``): ``parquet``, Parquet files or globs relative to a folder
        source (``["part-*.parquet"]``; nothing absolute, no ``..``), or ``table``, a table of a SQL or Spark
        source. ``bins`` is the public binning spec (as in :meth:`load_dataset`), applied inside the engine; a value
        outside it is refused, naming its column. With ``privacy_unit`` (a column naming the person each row belongs
        to) every scan keeps one row per unit, so every guarantee holds per unit. The key's scope must name the
        source (403 otherwise), and a table a dataset already reads is a 409 ``already_attached`` (one location is
        one dataset). Nothing is stored on any error. Returns the new dataset. The check reads every row, so the
        server does it in the background and this call follows its job, as a release does (``progress``: its
        phases, see the module docstring)."""
        body: dict[str, object] = {"name": name, "source": source, "bins": bins}
        if parquet is not None:
            body["parquet"] = [parquet] if isinstance(parquet, str) else list(parquet)
        if table is not None:
            body["table"] = table
        if privacy_unit is not None:
            body["privacy_unit"] = privacy_unit
        return self._in_background("/datasets/attach", body, progress)

    def migrate_dataset(self, name: str, *, engine: str = "duckdb",
                        progress: ProgressOption | None = None) -> dict[str, object]:
        """Stewards: move dataset ``name``'s rows to ``engine`` (a SQL table of the service database to ``duckdb``,
        a Parquet file in the data folder), as ``marginalia dataset migrate``; the dataset switches only once the copy
        is complete, and its budget, ledger and releases are untouched. Returns the dataset as now stored. The copy
        runs in the background and this call follows its job (``progress``: the rows copied so far)."""
        return self._in_background(f"/datasets/{_segment(name)}/migrate", {"engine": engine}, progress)

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
        mechanism: str = "auto",
        workload: Workload = "all-2way",
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        *,
        options: dict[str, object] | None = None,
        idempotency_key: str | None = None,
        progress: ProgressOption | None = None,
    ) -> dict[str, object]:
        """Stewards: release a marginal workload; spends budget. Returns ``release_id``, ``cost`` and
        ``budget`` (the budget's composed epsilon spent before and after, with a note when that is not
        just the release's epsilon).

        ``mechanism`` is a registered marginal mechanism, or ``"auto"`` (the default): the zCDP mechanism the
        benchmark found best for this workload at this budget, chosen from the domain, the workload and rho only
        (``auto`` in the answer says which and why; it takes no ``options``).
        ``workload`` is ``"all-2way"``-style, ``"target:COL"``, or a list of attribute lists (or
        ``{"attributes": [...], "weight": w}``). A 409 ``budget_exceeded`` error says what can still be spent.
        ``progress`` overrides the client's default for this call."""
        body = _release_body(mechanism, workload, options, epsilon=epsilon, delta=delta, rho=rho)
        return self._charging(f"/datasets/{_segment(name)}/releases/marginals", body, idempotency_key, progress)

    def plan_release(
        self,
        name: str,
        mechanism: str = "auto",
        workload: Workload = "all-2way",
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        *,
        options: dict[str, object] | None = None,
        target_error: float | None = None,
    ) -> dict[str, object]:
        """Stewards: the dry run of :meth:`release_marginals` with the same arguments; spends and stores nothing.
        Returns ``fits``, ``cost``, ``budget`` (the composed epsilon spent before -> after and, for the first zCDP
        release, the ``note`` saying why it costs more than its epsilon), ``epsilon_charged`` and, when it does not
        fit, the ``refusal`` the release would meet (``budget_exceeded``); ``accuracy`` of each workload marginal
        (per-cell standard error, expected L1 error of the normalised marginal) and ``accuracy_basis``: ``closed_form``
        for laplace, gaussian and residual, ``simulation`` for mst and aim (the mechanism run on the synthetic rows of a
        stored release, ``accuracy["simulation"]`` saying which; an AIM estimate takes as long as an AIM release), or
        ``none`` with ``accuracy_note`` saying why. ``target_error`` (closed forms only) solves for the smallest epsilon
        at which every workload marginal's expected normalised L1 error is at most it (omit ``epsilon`` and ``rho``;
        give ``delta`` for a zCDP mechanism; not with ``auto``): ``target["epsilon"]``, and the plan is made at it.
        With ``mechanism="auto"``, ``auto`` says what it chose and why, and the plan is that mechanism's. Answered at
        once (no job, no idempotency key: nothing is charged)."""
        body = _release_body(mechanism, workload, options, epsilon=epsilon, delta=delta, rho=rho,
                             target_error=target_error)
        return self._request("POST", f"/datasets/{_segment(name)}/releases/marginals/plan", json=body)

    def plan_fit(self, name: str, target: str, features: Sequence[str] | None = None, method: str = "dd-ssp",
                 epsilon: float | None = None, delta: float | None = None, release: int | None = None, *,
                 task: str = "linear", **options: Any) -> dict[str, object]:
        """The dry run of :meth:`fit_linear` (``task="linear"``) or :meth:`fit_logistic` (``task="logistic"``) with the
        same arguments; spends and stores nothing. Returns ``answered_by`` (a stored release that answers for free)
        or the plan of the new release the fit would make: ``fits``, ``cost``, ``budget`` (before -> after, with its
        ``note``), ``epsilon_charged`` and the ``refusal`` it would meet. ``options``: ``intercept``,
        ``allow_unmeasured`` and the method's settings, as for a fit."""
        body = self._fit_body(target, features, method, epsilon, delta, release, options, f"plan_fit ({task})")
        return self._request("POST", f"/datasets/{_segment(name)}/fit/{task}/plan", json=body)

    def fit_linear(self, name: str, target: str, features: Sequence[str] | None = None, method: str = "dd-ssp",
                   epsilon: float | None = None, delta: float | None = None, release: int | None = None,
                   **options: Any) -> FittedRegression:
        """A private linear regression of ``target`` (methods dd-ssp, adassp, aim-synth, dp-iht, or auto: the
        server picks dd-ssp or adassp from the design and epsilon, and the answer's ``auto`` says which and why). Free
        when a stored release can answer; otherwise a new release is made with ``epsilon``/``delta`` and charged.
        ``options``: ``intercept`` (default True), ``allow_unmeasured`` (let a release that did not measure
        every pair answer), ``idempotency_key``, ``progress``; for dp-iht ``sparsity`` (required),
        ``iterations``, ``step``, ``clip_norm``, ``l2`` (the same settings later are answered by the stored model). Any
        other option is sent as a setting: the server refuses one the method does not take (a 422
        ``invalid_request`` naming it, raised as :class:`MarginaliaError`), before anything is charged. ``seed`` is
        refused here (a :class:`TypeError`): no server takes one."""
        return self._fit("linear", name, target, features, method, epsilon, delta, release, options)

    def fit_logistic(self, name: str, target: str, features: Sequence[str] | None = None, method: str = "dd-ssp",
                     epsilon: float | None = None, delta: float | None = None, release: int | None = None,
                     **options: Any) -> FittedRegression:
        """A private logistic regression of a binary ``target`` (dd-ssp, objpert, aim-synth, dp-iht, or auto); as
        :meth:`fit_linear`."""
        return self._fit("logistic", name, target, features, method, epsilon, delta, release, options)

    def _fit(self, task: str, name: str, target: str, features: Sequence[str] | None, method: str,
             epsilon: float | None, delta: float | None, release: int | None,
             options: dict[str, Any]) -> FittedRegression:
        body = self._fit_body(target, features, method, epsilon, delta, release, options, f"fit_{task}")
        path = f"/datasets/{_segment(name)}/fit/{task}"
        shown = self.progress if options.get("progress") is None else options.get("progress")
        if release is not None and options.get("idempotency_key") is None and not shown:
            # answered from a named release: post-processing that spends nothing, so it is asked directly (a retry
            # is harmless), without the idempotency claim, the background job and its polling of a charging request
            answer = self._request("POST", path, json=body)
        else:
            answer = self._charging(path, body, options.get("idempotency_key"), options.get("progress"))
        return FittedRegression(answer, self.domain(name), self.labels(name))

    @staticmethod
    def _fit_body(target: str, features: Sequence[str] | None, method: str, epsilon: float | None,
                  delta: float | None, release: int | None, options: dict[str, Any], call: str) -> dict[str, object]:
        """A fit's request body (and its dry run's). The method's settings (DP-IHT's sparsity, iterations...) go to
        the server as they are: it knows its methods and answers a 422 invalid_request naming a setting it does not
        take, so a client never refuses a setting that a newer server accepts, and ships without the server's
        catalog."""
        if "seed" in options:  # not a setting of any server, ever: the privacy of the release depends on it
            raise TypeError(f"{call} takes no seed: the server draws every random value from its own secure "
                            "source (whoever chose a release's seed could subtract its noise)")
        settings = {key: value for key, value in options.items() if key not in _CLIENT_OPTIONS}
        body: dict[str, object] = {"target": target, "method": method, "intercept": options.get("intercept", True)}
        for key, value in (("features", None if features is None else list(features)), ("epsilon", epsilon),
                           ("delta", delta), ("release", release),
                           ("allow_unmeasured", options.get("allow_unmeasured")), *settings.items()):
            if value is not None:
                body[key] = value
        return body

    def releases(self, name: str | None = None) -> list[dict[str, object]]:
        return self._request("GET", "/releases", params=None if name is None else {"dataset": name})

    def release(self, release_id: int) -> dict[str, object]:
        return self._request("GET", f"/releases/{int(release_id)}")

    def marginal(self, release: int | None = None, attrs: Sequence[str] = (), labels: bool = True,
                 bootstrap: bool = False, *, campaign: str | None = None) -> pd.DataFrame:
        """A marginal estimated from a release, or with ``campaign`` from a marginals campaign's model (free): one
        row per cell, a column per attribute (its label where the table's spec or domain gives one, else its code;
        ``labels=False`` for codes) and ``count``.
        ``frame.attrs["coverage"]`` says what the release (campaign) measured of it and ``frame.attrs["cost"]`` what
        it cost (nothing: the release paid, or the participants' reports did); an extrapolated marginal also raises
        an :class:`ExtrapolationWarning`. A
        marginal the release measured also has ``standard_error`` per cell (residual, laplace, gaussian: of the
        unbiased estimate the non-negative ``count`` adjusts; mst, aim, a campaign's attribute set: of the raw
        measurement), and so has one an MST or AIM release (or a campaign) did not measure with ``bootstrap=True``
        (the model's parametric bootstrap, computed the first time: seconds to a minute).
        ``frame.attrs["error_basis"]`` says how they were computed (docs/mechanisms.md, "Error bars on answers")."""
        path = self._answer_path(release, campaign, "marginal")
        answer = self._request("POST", path,
                               json={"attributes": list(attrs), "codes": not labels, "bootstrap": bool(bootstrap)})
        frame = marginal_frame(answer["attributes"], answer["shape"], answer["counts"], answer.get("labels"))
        if answer.get("standard_errors") is not None:
            import numpy as np

            frame["standard_error"] = np.asarray(answer["standard_errors"], dtype=float).ravel()
        frame.attrs["coverage"] = answer.get("coverage")
        frame.attrs["cost"] = answer.get("cost")
        frame.attrs["error_basis"] = answer.get("error_basis", "none")
        warning = (answer.get("coverage") or {}).get("warning")
        if warning:
            warnings.warn(warning, ExtrapolationWarning, stacklevel=2)
        return frame

    def synthetic(self, release: int | None = None, rows: int = 0, labels: bool = True, *,
                  campaign: str | None = None) -> pd.DataFrame:
        """``rows`` synthetic records drawn from a release, or with ``campaign`` from a marginals campaign's model
        (free), one column per attribute (the labels where the table's spec or domain gives them, as ordered
        categoricals; ``labels=False`` for codes), with fresh randomness of the server's. ``frame.attrs["cost"]`` is
        what it cost: nothing. A fitted regression predicts on such a frame as it comes."""
        path = self._answer_path(release, campaign, "synthetic")
        answer = self._request("POST", path, json={"rows": rows, "codes": not labels})
        names = answer.get("labels") or {}
        frame = pd.DataFrame({c: _labelled_values(answer["data"][c], names.get(c)) for c in answer["columns"]},
                             columns=answer["columns"])
        frame.attrs["cost"] = answer.get("cost")
        return frame

    @staticmethod
    def _answer_path(release: int | None, campaign: str | None, what: str) -> str:
        """The route of a free answer: a release's, or a marginals campaign's (exactly one of them named)."""
        if (release is None) == (campaign is None):
            raise ValueError("name exactly one of release (an id) and campaign (a marginals campaign's name)")
        if campaign is not None:
            return f"/campaigns/{_segment(str(campaign))}/{what}"
        return f"/releases/{int(release)}/{what}"

    # ledger -----------------------------------------------------------------------------------
    def ledger(self, name: str) -> pd.DataFrame:
        """Auditors and stewards: the dataset's privacy ledger, oldest entry first."""
        entries = self._request("GET", f"/datasets/{_segment(name)}/ledger")["entries"]
        columns = ["entry_id", "entry", "release_id", "release_status", "campaign_id", "mechanism", "epsilon", "delta",
                   "rho", "epsilon_priced", "epsilon_spent_after", "principal", "note", "created_at"]
        frame = pd.DataFrame(entries, columns=columns)
        for ids in ("release_id", "campaign_id"):  # ids, not floats (most rows have none)
            frame[ids] = frame[ids].astype("Int64")
        return frame


def marginal_frame(attributes: Sequence[str], shape: Sequence[int], counts: object,
                   labels: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Long format of a marginal table: every cell (codes in C order, or their labels for the
    attributes in ``labels``) with its count."""
    import numpy as np

    table = np.asarray(counts, dtype=float).reshape(tuple(shape))
    index = np.indices(table.shape).reshape(len(shape), -1)
    names = labels or {}
    frame = pd.DataFrame({a: labelled(index[i], names.get(a)) for i, a in enumerate(attributes)})
    frame["count"] = table.ravel()
    return frame


def _labelled_values(values: Sequence[object], labels: Sequence[str] | None) -> object:
    """A synthetic column as the server sends it (labels where ``labels``, else codes), with its labels as an ordered
    categorical in code order."""
    if not labels:
        return list(values)
    return pd.Categorical(list(values), categories=list(labels), ordered=True)


class _ProgressLine:
    """A one-line progress display of a background job on stderr (rewritten in place on a terminal)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last = ""
        self.tty = sys.stderr.isatty()

    @staticmethod
    def describe(job: dict[str, Any]) -> str:
        """``job 3 (release of adult): 2/5 measuring ...``: the job by its id (a job's id is not a release's), the
        steps once their number is known (never ``0/?``), the step's message while it runs (a finished job says
        ``done`` or ``failed``, not its first step's ``queued``), and once its answer names it, the release by its own
        id (``done, release 10``)."""
        step = job.get("progress") or {}
        running = job.get("state") == "running"
        parts = []
        if step.get("total"):
            parts.append(f"{step.get('done', 0)}/{step['total']}")
        if step.get("message") and (running or step.get("total")):
            parts.append(str(step["message"]))
        fit = job.get("fit")
        if fit:
            parts.append(f"| {FIT_PHASE} {fit['done']}/{fit['total']}")
        if not running:
            parts.append(str(job.get("state")))
        result = job.get("result")
        release_id = result.get("release_id") if isinstance(result, dict) else None
        if release_id is not None:
            parts[-1] += f", release {release_id}"
        return f"job {job.get('job_id')} ({job.get('kind', 'request')} of {job.get('dataset')}): {' '.join(parts)}"

    def __call__(self, job: dict[str, Any]) -> None:
        text = self.describe(job)
        if text == self.last and self.tty is False:  # a log: only what changed (a terminal also shows the time)
            return
        self.last = text
        text += f" [{time.monotonic() - self.started:.0f} s]"
        if self.tty:
            sys.stderr.write("\r" + text[:150].ljust(150) + ("\n" if job.get("state") != "running" else ""))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _release_body(mechanism: str, workload: Workload, options: dict[str, object] | None,
                  **amounts: float | None) -> dict[str, object]:
    """The body of a marginal release and of its plan: the mechanism, the workload, the amounts given, the options."""
    body: dict[str, object] = {"mechanism": mechanism, "workload": _workload(workload)}
    body.update({key: value for key, value in amounts.items() if value is not None})
    if options:
        body["options"] = dict(options)
    return body


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
