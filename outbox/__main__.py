"""`python -m outbox`: the publisher's command line (see outbox/cli.py)."""
import sys

from .cli import main

sys.exit(main())
