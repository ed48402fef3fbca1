"""Where a dataset's rows live and who counts them: the data engines (issue 21).

The ledger, budgets, keys and campaigns stay in the service database with its transactions; a sensitive table is
read only through a :class:`~service.data.engines.base.TableEngine`, whose outputs are exact marginal counts and
the distinct rows (with their counts) that ObjPert and DP-IHT read. :func:`~service.data.engines.registry.open_table`
picks the engine a dataset's row names.
"""
