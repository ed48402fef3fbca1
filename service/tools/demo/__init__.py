"""``make demo``: the product's story end to end on the embedded SQLite default (:mod:`.story`, its parts in order;
:mod:`.local`, the local-DP collection). Run it with ``python -m service.tools.demo``."""
