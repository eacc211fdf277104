"""``python -m middleware`` runs the ``chatcli-mw`` command."""

from __future__ import annotations

import sys

from middleware.cli.main import main

sys.exit(main())
