"""What each process of the concurrency test runs: one check-and-charge of epsilon 0.1.

Kept apart from the test module so that spawned children import only the database layer and the
accountant (no JAX), which keeps 20 processes cheap on two cores."""

from __future__ import annotations

from fractions import Fraction


def charge_once(url: str, barrier, results) -> None:  # noqa: ANN001
    from db.engine import make_engine
    from service.accounting.accountant import reserve_release
    from service.errors import BudgetExceeded
    from service.privacy.cost import PrivacyCost

    engine = make_engine(url)
    barrier.wait()
    try:
        reserve_release(engine, "tiny", "marginals", "laplace", PrivacyCost(epsilon=Fraction(1, 10)), {}, "p")
        results.put("ok")
    except BudgetExceeded:
        results.put("refused")
    except Exception as exc:  # noqa: BLE001
        results.put(f"error: {type(exc).__name__}: {exc}")
    finally:
        engine.dispose()
