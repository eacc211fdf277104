"""``python -m middleware`` runs the ``chatcli-mw`` command."""

import sys

from .cli import main

sys.exit(main())
