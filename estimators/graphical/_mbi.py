"""private-pgm (``mbi``) imported with JAX set up as this project needs it (CPU only, 64-bit floats), and a
:class:`~workloads.domain.Domain` in mbi's terms.

Every module that uses mbi imports it from here, so the configuration is applied before JAX is first imported.
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mbi  # noqa: E402

from workloads.domain import Domain  # noqa: E402

__all__ = ["jax", "mbi", "mbi_domain"]


def mbi_domain(domain: Domain) -> mbi.Domain:
    """``domain`` as an ``mbi.Domain`` (same attributes, same order, same sizes)."""
    return mbi.Domain(list(domain.names), [a.size for a in domain.attributes])
