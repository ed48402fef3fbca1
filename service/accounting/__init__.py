"""Accounting: the central ledger of what each release charged to its dataset's budget."""
