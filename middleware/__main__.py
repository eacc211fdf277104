"""``python -m middleware`` runs the ``chatcli-mw`` command."""

from __future__ import annotations

import sys

from middleware.cli import main

sys.exit(main())
