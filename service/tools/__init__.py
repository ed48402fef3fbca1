"""Programs built on the service, off the server's import path: ``demo`` (``make demo``, the product's story end to
end). The benchmarks live outside the shipped code, in the repository's ``benchmarks`` package."""
