"""The console's pages, one module per area: signing in, datasets and budgets, releases and their answers, the release
planner and its jobs, the ledger. Each module's ``router`` is a :class:`~service.api.console.access.ConsoleRoute`
router whose every route is left out of the API's OpenAPI document (the console is not part of the API)."""
