"""Where the repository and the shared data tables are, for every test module wherever it lives in the tests tree."""

from __future__ import annotations

import os
from pathlib import Path

#: The repository's root folder.
REPO = Path(__file__).resolve().parents[2]
#: The shared folder beside the repository (papers, data), and its data tables (MARGINALIA_SHARED_DATA overrides).
SHARED = REPO.parent / "shared"
DATA = Path(os.environ.get("MARGINALIA_SHARED_DATA", SHARED / "data"))
