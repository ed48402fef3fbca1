"""Registering a sensitive table where it lives, without copying it (issue 21; docs/engines.md).

* :mod:`~service.data.attach.tables`: ``marginalia dataset attach NAME --parquet | --sql | --spark``: every check
  (columns, values against the spec, the privacy unit) made before a dataset row is stored;
* :mod:`~service.data.attach.sources`: the places an operator allows tables to be attached from over HTTP
  (``marginalia source add | update | list | remove``; a SQL source's password is a reference:
  :mod:`service.data.credentials`);
* :mod:`~service.data.attach.through_source`: ``POST /datasets/attach``: a source, paths or a table inside it,
  and every error redacted so it never shows where the source reads;
* :mod:`~service.data.attach.locations`: one location, one dataset: what each dataset reads, and the refusal of an
  attach of rows a dataset already reads.
"""
