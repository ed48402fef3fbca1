"""The random source a participant's device uses: unpredictable, never chosen by a caller.

Local DP protects a participant only if nobody can reproduce her noise: whoever knows the generator's seed can
subtract it. :func:`device_rng` seeds a fresh numpy ``PCG64`` generator with 256 bits from the operating system's
cryptographically secure source (``os.urandom``) for every report, as the service's own ``NoiseSource.gaussian``
does (``docs/privacy.md``, section 7). PCG64 is not itself a cryptographic generator; its state is unpredictable,
one generator serves one report and is then dropped, and what leaves the device is its output plus the
participant's value, never raw generator output.

The randomizers take a ``numpy.random.Generator`` so that tests and simulations can pass a seeded one; client code
must call them with ``rng=None`` (which means :func:`device_rng`) and must not expose a seed to anyone.
"""

from __future__ import annotations

import os

import numpy as np

from workloads.parameters import check_generator

_SEED_BYTES = 32


def device_rng() -> np.random.Generator:
    """A new generator seeded with 256 bits from ``os.urandom``."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int.from_bytes(os.urandom(_SEED_BYTES)))))


def generator_or_device(rng: np.random.Generator | None) -> np.random.Generator:
    """``rng`` if given (tests, simulations), else a fresh :func:`device_rng`; anything but a
    ``numpy.random.Generator`` or None is a :class:`~workloads.parameters.ParameterError`."""
    return device_rng() if rng is None else check_generator(rng)
