"""Programs built on the service, off the server's import path: ``demo`` (``make demo``, the product's story end to
end) and ``bench`` (the experiments behind ``marginalia bench ...``, each on temporary databases)."""
