"""Where a dataset's rows live and who counts them: the data engines (issue 21).

The ledger, budgets, keys and campaigns stay in the service database with its transactions; a sensitive table is
read only through a :class:`~service.data.engines.base.TableEngine`, whose outputs are exact marginal counts, the
distinct rows (with their counts) that ObjPert reads, and DP-IHT's clipped gradient sums. Each engine is one record
(:mod:`~service.data.engines.record`: its typed locations, how each opens, its part of ``dataset attach``)
registered in :mod:`~service.data.engines.registry`, whose :func:`~service.data.engines.registry.open_table` opens
the engine a dataset's row names.
"""
