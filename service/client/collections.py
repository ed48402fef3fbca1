"""The client's side of the collections (numpy, pandas and :mod:`workloads` only: a participant's device or an
analyst's notebook installs no server stack).

:class:`CollectionsClient` is mixed into :class:`service.client.Client`:

* ``client.public_tables()``, ``client.public_table(name)`` (a DataFrame: the rows are public),
  ``client.load_public_table(...)`` (stewards);
* ``client.create_campaign(...)`` (stewards), ``client.campaigns()``, ``client.campaign(name)``: a
  :class:`CampaignHandle` with ``state()``, ``submit(x, y)`` (a participant: randomizes on this device with the OS's
  randomness, then posts only the report), ``submit_batch(x, y, pseudonyms)`` (a gateway: the binary wire format),
  ``fit(model)`` (analysts and stewards: a :class:`CampaignModel`, free), ``info()``, ``close()``.

No call takes a seed: a participant's noise is drawn from ``os.urandom`` on her device
(``workloads.local.rng.device_rng``), and nobody else ever sees it. Nor does her device take the server's word for
what a report costs: ``submit`` goes through the client's :class:`service.client.spend.Device` (her per-report and
total ceilings and her spend file), which computes the cost from the campaign's spec and reserves it before
randomizing; ``submit_batch`` (a gateway, many people) checks the per-report ceiling and the published state.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from estimators.base import LinearScoreModel
from service.client.device import clipped, clipping_warning, make_report
from service.client.errors import CollectionError, DeviceError, MarginaliaError
from service.client.spend import Device
from workloads.encodings import INTERCEPT_NAME
from workloads.links import model_mean
from workloads.local.wire import MEDIA_TYPE, encode_batch

BATCH = 50_000


class CampaignModel(LinearScoreModel):
    """A model fitted from a campaign, on the project's one linear-model type
    (:class:`estimators.base.LinearScoreModel`: ``coef_`` in the order of ``feature_names_``, ``intercept_``,
    ``decision_function``, ``coefficients()``). ``predict`` is the link's mean ``E[y | x]`` (the score for
    ``linear``), or labels {0, 1} for a binary link (the GLMs' labels), whose ``predict_proba`` gives ``P(y = 0),
    P(y = 1)``. ``campaign`` (which answered), ``model``, ``cost`` (zero) and ``answer`` (the JSON) say where it came
    from; ``influence`` how far one more accepted report could move it (docs/campaigns.md)."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        self.answer = dict(answer)
        self.campaign: str = answer["campaign"]
        self.model: str = answer["model"]
        self.kind: str = answer["kind"]
        self.cost: dict[str, float] = dict(answer["cost"])
        #: how far one more accepted report can move the coefficients (``per_report``, ``norm``, ``basis``)
        self.influence: dict[str, Any] | None = answer.get("influence")
        #: each coefficient's standard error, and the signal-to-noise verdict (docs/campaigns.md)
        self.standard_errors: dict[str, float] | None = answer.get("standard_errors")
        self.quality: dict[str, Any] | None = answer.get("quality")
        names = tuple(answer["feature_names"])
        coefficients = answer["coefficients"]
        theta = [coefficients.get(INTERCEPT_NAME, 0.0), *(coefficients[name] for name in names)]
        self._store(np.asarray(theta, dtype=float), names, intercept=True)
        if self.kind == "classifier":
            self.classes_ = np.array([0, 1])

    def _features(self, X: Any) -> np.ndarray:
        if hasattr(X, "columns"):
            missing = [c for c in self.feature_names_ if c not in X.columns]
            if missing:
                raise ValueError(f"the frame lacks the feature(s) {missing}")
            X = X[list(self.feature_names_)].to_numpy(dtype=float)
        return super()._features(X)

    def predict_mean(self, X: Any) -> np.ndarray:
        return model_mean(self.model)(self.decision_function(X))

    def predict(self, X: Any) -> np.ndarray:
        mean = self.predict_mean(X)
        return np.where(mean > 0.5, 1, 0) if self.kind == "classifier" else mean

    def predict_proba(self, X: Any) -> np.ndarray:
        """Binary links only: columns ``P(y = 0)``, ``P(y = 1)``."""
        if self.kind != "classifier":
            raise AttributeError(f"predict_proba is defined for binary models, not {self.model!r}")
        positive = np.clip(self.predict_mean(X), 0.0, 1.0)
        return np.column_stack([1.0 - positive, positive])

    def __repr__(self) -> str:
        return f"CampaignModel(model={self.model!r}, campaign={self.campaign!r}, features={self.n_features_in_})"


class CampaignHandle:
    """One campaign, seen through a client (see the module docstring)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = str(name)
        self._path = f"/campaigns/{_segment(self.name)}"

    def info(self) -> dict[str, Any]:
        return self.client._request("GET", self._path)

    def state(self) -> dict[str, Any]:
        """The public state: the spec, the features' public transform, the open round and its published values
        (for a participant key also ``you``: whether she reported in the open round, her spend and cap)."""
        return self.client._request("GET", f"{self._path}/state")

    def submit(self, x: Any, y: Any = None) -> dict[str, Any]:
        """A participant's report: fetch the state, check she may report (the server's view of her), check the state
        and her own ceilings and reserve the cost on her spend file (``client.device``), randomize ``(x, y)`` here
        with the device's randomness, post only the report. A refusal on the device randomizes and sends nothing
        (:class:`service.client.CollectionError`, :class:`service.client.DeviceError`); once randomized, the cost
        stays on her spend file even if sending fails."""
        features = np.asarray(x, dtype=float)
        if features.ndim != 1:
            raise DeviceError(f"submit takes one participant's features (a vector), got shape {features.shape}; "
                              "gateways use submit_batch", code="invalid_participant_data")
        state = self.state()
        if state.get("round") is None:
            raise CollectionError("round_closed", f"campaign {self.name!r} has no open round")
        device = self.client.device
        epsilon, delta = device.check_round(state)  # the published state, her per-report ceiling; the spec's cost
        you = state.get("you")
        if you is not None:  # the server's view of her (advisory: her own filter is the device's)
            self._check_you(you, state["round"], epsilon, delta)
        reserved = device.randomize(state, features, y, server=getattr(self.client, "url", ""))
        _warn_clipped(state, features, y)
        report = {name: np.asarray(value).tolist() for name, value in reserved.report.items()}
        body = {"round": reserved.round, "report": report}
        try:
            answer = self.client._request("POST", f"{self._path}/reports", json=body)
        except MarginaliaError as error:  # the report may have left the device: its reservation stays
            device.ledger.settle(reserved.entry, f"failed: {error.code}")
            raise
        device.ledger.settle(reserved.entry, "accepted")
        return answer

    def _check_you(self, you: Any, round_index: int, epsilon: float, delta: float) -> None:
        """Refuse what the server says it would refuse: a second report in the round, her server-side cap."""
        try:
            reported = bool(you["reported_in_round"])
            over = (you["epsilon_spent"] + epsilon > you["epsilon_cap"] * (1 + 1e-12)
                    or you["delta_spent"] + delta > you["delta_cap"] * (1 + 1e-12))
        except (KeyError, TypeError) as error:
            raise DeviceError(f"campaign {self.name!r}: the state's 'you' cannot be read ({error!r})",
                              code="invalid_state") from None
        if reported:
            raise CollectionError("already_reported", f"you have reported in round {round_index} of "
                                                      f"{self.name!r} already")
        if over:
            raise CollectionError("local_cap_exceeded", f"this round spends epsilon {epsilon:g}, delta {delta:g}; "
                                  f"you have spent epsilon {you['epsilon_spent']:g} of your cap "
                                  f"{you['epsilon_cap']:g}")

    def submit_batch(self, x: Any, y: Any = None, pseudonyms: Sequence[str] = (), batch: int = BATCH,
                     single_precision: bool = False) -> list[dict[str, Any]]:
        """A gateway's batches: each row of ``x`` (and ``y``) one participant named by ``pseudonyms``, randomized
        here (the OS's randomness) and sent in the binary format, ``batch`` reports per request. The device checks
        the published state and its per-report ceiling first; the spend file is a person's, so a gateway's pseudonyms
        are not on it (the server's cap is theirs)."""
        features = np.asarray(x, dtype=float)
        labels = None if y is None else np.asarray(y, dtype=float)
        names = list(pseudonyms)
        if features.ndim != 2 or len(names) != features.shape[0]:
            raise DeviceError(f"submit_batch takes rows of features and one pseudonym per row, got shape "
                              f"{features.shape} and {len(names)} pseudonyms", code="invalid_participant_data")
        results = []
        for lo in range(0, features.shape[0], batch):
            state = self.state()
            self.client.device.check_round(state)  # the published state and the per-report ceiling
            index, reports = make_report(state, features[lo:lo + batch],
                                         None if labels is None else labels[lo:lo + batch])
            _warn_clipped(state, features[lo:lo + batch], None if labels is None else labels[lo:lo + batch])
            payload = encode_batch(reports, index, names[lo:lo + batch], "<f4" if single_precision else "<f8")
            results.append(self.client._request("POST", f"{self._path}/reports", content=payload,
                                                headers={"Content-Type": MEDIA_TYPE}))
        return results

    def fit(self, model: str, covariance: str | None = None, *, strict: bool = False) -> CampaignModel:
        """A model from the campaign's stored aggregates (free): ``linear``, a link (``logistic``, ``probit``,
        ``poisson``, ...) or ``mean`` (LDP-AVG), with ``standard_errors`` and ``quality``. A fit whose verdict is not
        ``ok`` raises a ``UserWarning`` saying why; ``strict=True`` refuses a noise-dominated one instead
        (:class:`service.client.MarginaliaError` ``noise_dominated``)."""
        body: dict[str, Any] = {"model": model}
        if covariance is not None:
            body["covariance"] = covariance
        if strict:
            body["strict"] = True
        fitted = CampaignModel(self.client._request("POST", f"{self._path}/fit", json=body))
        quality = fitted.quality or {}
        if quality.get("verdict") in ("weak", "noise-dominated"):
            warnings.warn(f"campaign {self.name!r}, model {model!r}: {quality['verdict']}: "
                          f"{'; '.join(quality.get('reasons', []))}", UserWarning, stacklevel=2)
        return fitted

    def close(self, round_index: int | None = None) -> dict[str, Any]:
        """Stewards: close the campaign, or only its open round ``round_index``."""
        path = f"{self._path}/close" if round_index is None else f"{self._path}/rounds/{int(round_index)}/close"
        return self.client._request("POST", path)


class CollectionsClient:
    """The collections' methods of :class:`service.client.Client` (it provides ``_request``)."""

    _request: Callable[..., Any]
    _device: Device | None = None

    @property
    def device(self) -> Device:
        """The participant's device: her ceilings and spend file (``Client(..., device=Device(...))``; by default
        ``Device()``, made on first use)."""
        if self._device is None:
            self._device = Device()
        return self._device

    def public_tables(self) -> list[dict[str, Any]]:
        return self._request("GET", "/public-tables")

    def public_table(self, name: str, page: int = 10_000) -> pd.DataFrame:
        """Every row of a public table, as a DataFrame (fetched in pages)."""
        frames, offset = [], 0
        while True:
            answer = self._request("GET", f"/public-tables/{_segment(name)}/rows",
                                   params={"offset": offset, "limit": page})
            frames.append(pd.DataFrame(answer["rows"], columns=answer["columns"]))
            offset += len(answer["rows"])
            if answer["complete"] or not answer["rows"]:
                break
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs["public_table"] = name
        return frame

    def load_public_table(self, name: str, csv: str | pd.DataFrame,
                          domain: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Stewards: register a public table from CSV text or a DataFrame."""
        text = csv.to_csv(index=False) if isinstance(csv, pd.DataFrame) else csv
        body: dict[str, Any] = {"name": name, "csv": text}
        if domain is not None:
            body["domain"] = dict(domain)
        return self._request("POST", "/public-tables", json=body)

    def create_campaign(self, name: str, protocol: str, features: Sequence[str], *, epsilon: float,
                        delta: float = 0.0, target: str | None = None, public: str | None = None,
                        **options: Any) -> CampaignHandle:
        """Stewards: create a campaign (protocol options as keywords: ``norm_bound=4``, ``participants=1000``...)."""
        body = {"name": name, "protocol": protocol, "features": list(features), "target": target,
                "public": public, "epsilon": epsilon, "delta": delta, "options": options}
        self._request("POST", "/campaigns", json=body)
        return self.campaign(name)

    def plan_campaign(self, protocol: str, features: Sequence[str], *, epsilon: float, delta: float = 0.0,
                      target: str | None = None, public: str | None = None, participants: int | None = None,
                      target_error: float | None = None, **options: Any) -> dict[str, Any]:
        """A campaign's expected error before any report, free: at ``participants``, or the participants needed for
        ``target_error`` (docs/campaigns.md, "Planning a campaign"); protocol options as keywords."""
        body = {"protocol": protocol, "features": list(features), "target": target, "public": public,
                "epsilon": epsilon, "delta": delta, "options": options, "participants": participants,
                "target_error": target_error}
        return self._request("POST", "/campaigns/plan", json=body)

    def campaigns(self) -> list[dict[str, Any]]:
        return self._request("GET", "/campaigns")

    def campaign(self, name: str) -> CampaignHandle:
        return CampaignHandle(self, name)


def _warn_clipped(state: Mapping[str, Any], x: Any, y: Any) -> None:
    """A ``UserWarning`` naming each bound that clipped her values and how many rows (counted on the device, never
    sent: :mod:`workloads.local.clipping`)."""
    found = clipped(state, x, y)
    if found:
        warnings.warn(clipping_warning(state.get("campaign"), found), UserWarning, stacklevel=3)


def _segment(name: str) -> str:
    from urllib.parse import quote

    return quote(str(name), safe="")
