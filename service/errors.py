"""Errors that reach users: each has a stable ``code``, an HTTP ``status`` and a one-paragraph
message naming the parameter, column or row at fault. The CLI prints the message; the API returns
``{"error": code, "message": message}``."""

from __future__ import annotations


class ServiceError(Exception):
    code = "invalid_request"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    def to_json(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


class NotFound(ServiceError):
    code = "not_found"
    status = 404


class Conflict(ServiceError):
    code = "conflict"
    status = 409


class BudgetExceeded(Conflict):
    code = "budget_exceeded"


class InvalidInput(ServiceError):
    code = "invalid_input"
    status = 422
