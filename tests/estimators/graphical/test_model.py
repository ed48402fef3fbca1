"""The fitted model: marginals across cliques equal mbi's variable elimination; synthetic rows follow the model and
are reproducible from their seed."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from estimators.graphical import mbi_adapter, mirror_descent
from estimators.graphical.mirror_descent import Measurement
from service.privacy.noise import NoiseSource
from tests.support.tables import titanic_oracle


def test_numpy_marginals_match_mbi_variable_elimination() -> None:
    """Out-of-clique marginals from our junction-tree code equal mbi's variable elimination on the
    same exported model (floating-point tolerance)."""
    oracle = titanic_oracle()
    noise = NoiseSource(1)
    cliques = [("Survived", "Sex"), ("Pclass", "Sex"), ("SibSp", "Parch"), ("Parch", "Embarked"), ("Survived",)]
    measurements = [
        Measurement(c, oracle.counts(c) + noise.discrete_gaussian(Fraction(25), oracle.domain.cells(c)).reshape(
            oracle.domain.shape(c)), 5.0)
        for c in cliques
    ]
    model = mbi_adapter.fit_to_mbi(mirror_descent.fit(oracle.domain, measurements, iters=200))
    query = ("Survived", "Embarked", "SibSp")  # spans three cliques of the junction tree
    expected = np.asarray(model.project(query).datavector(flatten=False))
    assert np.allclose(mbi_adapter.marginal(model, query), expected, rtol=1e-9, atol=1e-9)


def test_synthetic_rows_follow_the_model() -> None:
    """Rows are i.i.d. from the model, so each cell count of a marginal is Binomial(n, p). Every
    cell must lie within 5 standard deviations (+1 for discreteness) of n p: by Chernoff/normal tails
    a cell fails with probability below 1e-6, the ~80 checked cells together below 1e-4."""
    oracle = titanic_oracle()
    cliques = [("Survived", "Sex"), ("Pclass", "Sex"), ("SibSp", "Parch"), ("Parch", "Embarked")]
    exact = [Measurement(c, oracle.counts(c).astype(float), 1.0) for c in cliques]
    model = mbi_adapter.fit_to_mbi(mirror_descent.fit(oracle.domain, exact, iters=300))
    n = 20000
    rows = mbi_adapter.synthetic_rows(model, n, seed=7)
    assert set(rows) == set(oracle.domain.names)
    for query in (("Survived", "Sex"), ("SibSp", "Parch"), ("Survived", "Embarked")):  # the last spans cliques
        p = mbi_adapter.marginal(model, query) / float(model.total)
        index = np.ravel_multi_index([rows[a] for a in query], p.shape)
        counts = np.bincount(index, minlength=p.size).reshape(p.shape)
        assert np.all(np.abs(counts - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1)
    again = mbi_adapter.synthetic_rows(model, n, seed=7)
    assert all(np.array_equal(rows[a], again[a]) for a in rows)


STORED_READ = """
import sys
from pathlib import Path
import numpy as np
from estimators.graphical import mbi_adapter
from tests.support.tables import titanic_oracle
domain = titanic_oracle().domain
model = mbi_adapter.model_from_bytes(Path(sys.argv[1]).read_bytes(), domain)
np.save(sys.argv[2], mbi_adapter.marginal(model, ("Survived", "Embarked", "SibSp")))
rows = mbi_adapter.synthetic_rows(model, 100, seed=3)
assert set(rows) == set(domain.names)
loaded = sorted(name for name in ("jax", "mbi", "networkx") if name in sys.modules)
assert not loaded, loaded
"""


def test_a_stored_model_reads_back_without_mbi_or_jax_and_answers_the_same(tmp_path) -> None:  # noqa: ANN001
    """A stored model keeps its junction tree: reading it back in a fresh process answers the same marginals as the
    model that was stored, and imports neither mbi nor JAX (the three seconds of a command-line free answer's four).
    A payload of the first format (no tree) still reads, by triangulating again."""
    import json
    import subprocess
    import sys

    from tests.support.paths import REPO

    oracle = titanic_oracle()
    cliques = [("Survived", "Sex"), ("Pclass", "Sex"), ("SibSp", "Parch"), ("Parch", "Embarked")]
    exact = [Measurement(c, oracle.counts(c).astype(float), 1.0) for c in cliques]
    model = mbi_adapter.fit_to_mbi(mirror_descent.fit(oracle.domain, exact, iters=100))
    query = ("Survived", "Embarked", "SibSp")
    (tmp_path / "model.npz").write_bytes(mbi_adapter.model_to_bytes(model))
    done = subprocess.run([sys.executable, "-c", STORED_READ, str(tmp_path / "model.npz"), str(tmp_path / "m.npy")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert np.allclose(np.load(tmp_path / "m.npy"), mbi_adapter.marginal(model, query), rtol=1e-9, atol=1e-9)

    with np.load(tmp_path / "model.npz") as npz:  # the first format: the same arrays, no tree in the header
        arrays = dict(npz)
    header = json.loads(arrays["header"].tobytes().decode())
    del header["tree"]
    arrays["header"] = np.frombuffer(json.dumps({**header, "format": 1}).encode(), dtype=np.uint8)
    np.savez(tmp_path / "old.npz", **arrays)
    old = mbi_adapter.model_from_bytes((tmp_path / "old.npz").read_bytes(), oracle.domain)
    assert np.allclose(mbi_adapter.marginal(old, query), mbi_adapter.marginal(model, query), rtol=1e-9, atol=1e-9)
