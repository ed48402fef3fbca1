"""The mechanisms, their registry (:mod:`service.mechanisms.registry`) and the built-in ones
(:mod:`service.mechanisms.catalog`).

Importing the package registers the built-ins, so any lookup in the registry sees them. Both modules are light:
each mechanism's numerical module is imported only when a release runs.
"""

from service.mechanisms import catalog  # noqa: F401 - registers the built-in mechanisms
