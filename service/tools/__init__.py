"""Programs built on the service (the demo and the regression benchmark), off the server's import path."""
