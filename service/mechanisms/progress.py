"""Progress callbacks: how long work (a release, a load, a fit) reports where it is.

Kept apart from the mechanisms so that the command line and the API can read these names without
importing the numerical stack.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``progress(done, total, message)``; mechanisms call it once per step so the CLI can draw a bar.
Progress = Callable[[int, int, str], None]

#: The message of the progress reports of a graphical-model fit: (iteration, iterations, FIT_PHASE).
FIT_PHASE = "fitting the model"


def no_progress(done: int, total: int, message: str) -> None:  # noqa: ARG001
    return None


def fit_progress(progress: Progress) -> Callable[[int, int], None]:
    """The ``progress(iteration, iterations)`` callback of :func:`estimators.graphical.mirror_descent.fit`, reported
    through a mechanism's ``progress`` as ``(iteration, iterations, FIT_PHASE)``: estimation can take most of
    a release's time, so it shows as a phase of its own (the command line draws it as a second bar,
    the API reports it apart from the release's steps)."""
    return lambda done, total: progress(done, total, FIT_PHASE)
