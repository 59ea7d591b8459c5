"""``python -m app ARGS`` runs the ``trajopt`` command (:func:`app.cli.main`)."""

import sys

from .cli import main

sys.exit(main())
