"""``python -m service.cli``: the command line (the server's child processes run it this way)."""

from service.cli import main

main()
