"""Pinning a test to one backend of the service database (the ``database_url`` fixture of tests/conftest.py runs
every test that uses ``engine`` on SQLite and on PostgreSQL).

:data:`ON_SQLITE` is for a test whose claim is statistical (an estimate's spread, a plan's accuracy over repeated
simulated campaigns): the numbers come from numpy and the protocols, not from the database, so the PostgreSQL run
repeats the same draws at twice the cost and checks nothing more. The database's part of those paths (storing
campaigns, rounds, public tables and reports) keeps its PostgreSQL variants in the tests that assert it.
"""

import pytest

ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
