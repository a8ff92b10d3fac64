"""`python -m outbox`: the publisher's command line (see outbox/cli/main.py)."""
import sys

from .cli.main import main

sys.exit(main())
